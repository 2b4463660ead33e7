"""Clock offset between the FCU's boot clock and ours, from TIMESYNC or SYSTEM_TIME.

Telemetry carries FCU boot time (``time_boot_ms``, ``time_usec``); the state we publish must be
stamped on *our* clock, at the instant the FCU measured it, not when a slow serial link
delivered it. ``offset_s = fcu_boot_time - our_time``.

* TIMESYNC (PX4 and ArduPilot): we send ``tc1 = 0, ts1 = our_ns``; the FCU answers with
  ``tc1 = its_ns`` and our ``ts1``; ``offset = tc1 - (ts1 + now) / 2`` is exact up to the
  asymmetry of the round trip, so the sample with the smallest round trip in a window wins.
  When the FCU sends a request (``tc1 = 0``) we answer it, so it can sync to us as well.
* SYSTEM_TIME (fallback while no TIMESYNC answer arrived): ``time_boot_ms - receipt_time``
  underestimates the offset by the one-way latency, so the largest recent sample wins.

A jump of more than ``reset_threshold_s`` means the FCU rebooted: the window restarts.
"""
from __future__ import annotations

from collections import deque
from typing import Optional, Tuple

__all__ = ["TimeSync"]


class TimeSync:
    """Offset estimator. All ``now_s`` arguments are our clock in seconds (monotonic).

    Args:
        window: samples kept.
        max_rtt_s: TIMESYNC round trips longer than this are discarded (queued or spoofed).
        reset_threshold_s: an offset jump beyond this restarts the estimate (FCU reboot).
    """

    def __init__(self, window: int = 8, max_rtt_s: float = 0.5, reset_threshold_s: float = 1.0):
        self.max_rtt_s = max_rtt_s
        self.reset_threshold_s = reset_threshold_s
        self._timesync = deque(maxlen=window)  # (rtt_s, offset_s)
        self._system_time = deque(maxlen=window)  # offset_s lower bounds
        self._requests = deque(maxlen=16)  # ts1 values we sent, to recognise our answers
        self.offset_s: Optional[float] = None
        self.rtt_s: Optional[float] = None
        self.source = "none"
        self.resets = 0

    @staticmethod
    def _ns(now_s: float) -> int:
        return int(round(now_s * 1e9))

    def request(self, now_s: float) -> Tuple[int, int]:
        """``(tc1, ts1)`` for a TIMESYNC request sent at ``now_s``."""
        ts1 = self._ns(now_s)
        self._requests.append(ts1)
        return 0, ts1

    def on_timesync(self, tc1: int, ts1: int, now_s: float) -> Optional[Tuple[int, int]]:
        """Handle a TIMESYNC from the FCU. Returns ``(tc1, ts1)`` of the answer to send when it
        was a request, else None (an answer to us, used for the estimate when it matches)."""
        if tc1 == 0:
            return self._ns(now_s), int(ts1)
        if ts1 not in self._requests:
            return None  # not an answer to one of our requests (another component's, or forged)
        self._requests.remove(ts1)
        rtt = now_s - ts1 * 1e-9
        if not 0.0 <= rtt <= self.max_rtt_s:
            return None
        offset = tc1 * 1e-9 - 0.5 * (ts1 * 1e-9 + now_s)
        if self._timesync and abs(offset - min(self._timesync)[1]) > self.reset_threshold_s:
            self._timesync.clear()
            self.resets += 1
        self._timesync.append((rtt, offset))
        self.rtt_s, self.offset_s = min(self._timesync)
        self.source = "timesync"
        return None

    def on_system_time(self, time_boot_ms: int, now_s: float) -> None:
        """Use SYSTEM_TIME as a coarse estimate while TIMESYNC has no sample."""
        offset = time_boot_ms * 1e-3 - now_s
        if self._system_time and abs(offset - max(self._system_time)) > self.reset_threshold_s:
            self._system_time.clear()
            self.resets += 1
        self._system_time.append(offset)
        if not self._timesync:
            self.offset_s = max(self._system_time)
            self.source = "system_time"

    def to_local(self, fcu_time_s: float, receipt_s: float) -> float:
        """Our-clock time (s) of an FCU timestamp, given when the message arrived.

        Falls back to ``receipt_s`` without an estimate, or when the mapped time is more than
        ``reset_threshold_s`` away (a reboot the estimate has not caught up with). Never later
        than the receipt: a measurement cannot come from the future.
        """
        if self.offset_s is None:
            return receipt_s
        t = fcu_time_s - self.offset_s
        if abs(t - receipt_s) > self.reset_threshold_s:
            return receipt_s
        return min(t, receipt_s)
