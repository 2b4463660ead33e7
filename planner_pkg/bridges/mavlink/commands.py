"""COMMAND_LONG with acknowledgement, timeout and retries (MAVLink command protocol).

A command is sent, then re-sent with ``confirmation`` incremented every ``ack_timeout_s``
until a COMMAND_ACK with a final result arrives or ``retries`` extra attempts are spent.
MAV_RESULT_IN_PROGRESS stops the re-sending and extends the wait. ACKs name only the command
id, so commands with the same id are queued and go out one at a time (FIFO); different ids
run concurrently.

Thread-safe: ``submit`` is called from user threads, ``on_ack``/``poll`` from the bridge's I/O
thread. The ``send`` callable is invoked with the internal lock held and must not call back.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Deque, Dict, Optional, Tuple

__all__ = [
    "MAV_CMD_NAV_RETURN_TO_LAUNCH",
    "MAV_CMD_NAV_LAND",
    "MAV_CMD_NAV_TAKEOFF",
    "MAV_CMD_DO_SET_MODE",
    "MAV_CMD_COMPONENT_ARM_DISARM",
    "MAV_CMD_SET_MESSAGE_INTERVAL",
    "MAV_RESULT_ACCEPTED",
    "MAV_RESULT_IN_PROGRESS",
    "result_name",
    "CommandError",
    "CommandRejected",
    "CommandRefused",
    "CommandTimeout",
    "CommandCancelled",
    "CommandRequest",
    "PendingCommand",
    "CommandManager",
]

MAV_CMD_NAV_RETURN_TO_LAUNCH = 20
MAV_CMD_NAV_LAND = 21
MAV_CMD_NAV_TAKEOFF = 22
MAV_CMD_DO_SET_MODE = 176
MAV_CMD_COMPONENT_ARM_DISARM = 400
MAV_CMD_SET_MESSAGE_INTERVAL = 511

MAV_RESULT_ACCEPTED = 0
MAV_RESULT_IN_PROGRESS = 5
_RESULT_NAMES = {
    0: "ACCEPTED", 1: "TEMPORARILY_REJECTED", 2: "DENIED", 3: "UNSUPPORTED", 4: "FAILED",
    5: "IN_PROGRESS", 6: "CANCELLED", 7: "COMMAND_LONG_ONLY", 8: "COMMAND_INT_ONLY",
}


def result_name(result: int) -> str:
    """``"DENIED"`` for MAV_RESULT 2, and so on."""
    return _RESULT_NAMES.get(int(result), f"RESULT_{int(result)}")


class CommandError(RuntimeError):
    """A command did not succeed; the message says what was asked and what happened."""


class CommandRejected(CommandError):
    """The FCU answered with a result other than ACCEPTED."""

    def __init__(self, label: str, result: int, hint: str = ""):
        self.result = int(result)
        self.result_name = result_name(result)
        super().__init__(f"FCU rejected '{label}': MAV_RESULT_{self.result_name}" + (f" ({hint})" if hint else ""))


class CommandRefused(CommandError):
    """The bridge refused to send the command: a precondition failed (link down, no fresh state
    estimate, wrong mode). Nothing went on the wire."""


class CommandTimeout(CommandError):
    """No final COMMAND_ACK arrived in time."""


class CommandCancelled(CommandError):
    """The bridge closed or the link was lost before the command completed."""


@dataclass(frozen=True)
class CommandRequest:
    """One COMMAND_LONG: ``params`` are param1..param7; ``label`` names it in errors/logs."""

    command: int
    params: Tuple[float, float, float, float, float, float, float]
    target_system: int
    target_component: int
    label: str

    def __post_init__(self):
        if len(self.params) != 7:
            raise ValueError(f"COMMAND_LONG takes 7 params, got {len(self.params)} for '{self.label}'")


class PendingCommand:
    """A submitted command; :meth:`wait` blocks until it completes."""

    def __init__(self, request: CommandRequest):
        self.request = request
        self.attempts = 0
        self.deadline: Optional[float] = None
        self.in_progress = False
        self.result: Optional[int] = None
        self.error: Optional[CommandError] = None
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _finish(self, result: Optional[int] = None, error: Optional[CommandError] = None) -> None:
        self.result, self.error = result, error
        self._done.set()

    def wait(self, timeout_s: Optional[float] = None) -> int:
        """Block until done; returns MAV_RESULT_ACCEPTED or raises the CommandError.

        ``timeout_s`` only bounds this wait (None = until the manager gives up, which its own
        retry budget bounds); the command is not cancelled when it expires.
        """
        if not self._done.wait(timeout_s):
            raise CommandTimeout(f"'{self.request.label}' still pending after waiting {timeout_s} s")
        if self.error is not None:
            raise self.error
        return self.result


class CommandManager:
    """Sends commands and matches their ACKs (see module doc). Times are seconds, caller's clock.

    Args:
        send: ``send(request, confirmation) -> bool`` puts one COMMAND_LONG on the wire.
        ack_timeout_s: wait per attempt. retries: extra attempts after the first.
    """

    def __init__(self, send: Callable[[CommandRequest, int], bool], ack_timeout_s: float, retries: int):
        self._send = send
        self.ack_timeout_s = ack_timeout_s
        self.retries = retries
        self._lock = threading.Lock()
        self._queues: Dict[int, Deque[PendingCommand]] = {}
        self.unexpected_acks = 0

    def submit(self, request: CommandRequest, now: float) -> PendingCommand:
        """Queue ``request``; it goes out now if no command with the same id is in flight."""
        pending = PendingCommand(request)
        with self._lock:
            queue = self._queues.setdefault(request.command, deque())
            queue.append(pending)
            if len(queue) == 1:
                self._attempt(pending, now)
        return pending

    def _attempt(self, pending: PendingCommand, now: float) -> None:
        confirmation = pending.attempts
        pending.attempts += 1
        pending.deadline = now + self.ack_timeout_s
        self._send(pending.request, min(confirmation, 255))

    def _complete(self, queue: Deque[PendingCommand], now: float, result=None, error=None) -> None:
        queue.popleft()._finish(result, error)
        if queue:
            self._attempt(queue[0], now)

    def on_ack(self, command: int, result: int, now: float) -> bool:
        """Handle a COMMAND_ACK from the FCU; False when nothing was waiting for it."""
        with self._lock:
            queue = self._queues.get(int(command))
            if not queue:
                self.unexpected_acks += 1
                return False
            head = queue[0]
            if result == MAV_RESULT_IN_PROGRESS:
                head.in_progress = True
                head.deadline = now + self.ack_timeout_s
            elif result == MAV_RESULT_ACCEPTED:
                self._complete(queue, now, result=MAV_RESULT_ACCEPTED)
            else:
                self._complete(queue, now, error=CommandRejected(head.request.label, result))
            return True

    def poll(self, now: float) -> None:
        """Re-send or time out the commands whose attempt expired."""
        with self._lock:
            for queue in self._queues.values():
                if not queue or now < queue[0].deadline:
                    continue
                head = queue[0]
                if head.in_progress:
                    self._complete(queue, now, error=CommandTimeout(
                        f"'{head.request.label}': the FCU reported IN_PROGRESS, then no final ACK within "
                        f"{self.ack_timeout_s} s"))
                elif head.attempts > self.retries:
                    self._complete(queue, now, error=CommandTimeout(
                        f"'{head.request.label}': no COMMAND_ACK after {head.attempts} attempts "
                        f"({self.ack_timeout_s} s each); is the FCU listening, and do the signing keys match?"))
                else:
                    self._attempt(head, now)

    def cancel_all(self, reason: str) -> None:
        """Fail every queued command with CommandCancelled(reason)."""
        with self._lock:
            for queue in self._queues.values():
                while queue:
                    pending = queue.popleft()
                    pending._finish(error=CommandCancelled(f"'{pending.request.label}' cancelled: {reason}"))
