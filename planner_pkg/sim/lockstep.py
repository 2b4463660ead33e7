"""Simulation lockstep: the bookkeeping that makes a simulated flight independent of CPU load.

Plain Python (no rclpy); the ROS side is ``planner_pkg/nodes/lockstep.py``. The simulator and every
node that acts on sim time (planner, policy, trajectory server: the *participants*) exchange two
small messages, each a set of integer key/value pairs (times in integer nanoseconds of sim time,
so that no rounding can make two runs differ):

* :class:`StepManifest`, from the simulator after every advance (before ``/clock``): the sim time
  the advance ended at and the stamps of the newest odometry and sensor frame published up to then.
  A participant's tick at sim time ``T`` runs only once it holds the manifest of ``T`` and has
  taken the odometry and frame it names (:class:`InputGate`), because DDS does not order messages
  across topics: without the manifest a tick could run before the cloud of its own instant arrived.
* :class:`ParticipantReport`, from each participant after every tick (and at start-up and on a new
  goal): the sim time of its next tick and how much it has published (setpoints and trajectories
  sent, goals accepted). The simulator never advances past any participant's next tick, nor while
  a setpoint it has been told of has not arrived (:class:`LockstepBarrier`); the trajectory server
  does not sample before it holds every trajectory the planner reported (:class:`TrajectoryGate`).
  Messages are counted, not matched by stamp: two setpoints of one instant (a re-send, then a new
  command) must both be in before the simulator goes on.

Liveness: a participant that does not answer for ``fault_timeout_s`` wall seconds while the
simulator waits for it is a *fault* (logged, in status, the mission stops): there is no silent
free-running fallback, since a simulator that ran on would fly a different flight.
"""
from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ["StepManifest", "ParticipantReport", "LockstepBarrier", "InputGate", "TrajectoryGate", "PeerGate",
           "seconds_to_ns", "NONE_NS"]

NONE_NS = -1  # "nothing yet" for a stamp or a next tick
MAX_SENDER_SWITCHES = 4  # reports of one name from alternating publishers: two nodes of that name


def seconds_to_ns(t: float) -> int:
    """Sim time in s -> integer ns, rounded as ``conversions.seconds_to_stamp`` rounds a stamp (whole
    seconds, then the rounded fraction), so that a stamp and the time it was made from compare equal."""
    if not math.isfinite(t):
        raise ValueError(f"time must be finite, got {t!r}")
    sec = math.floor(t)
    return int(sec) * 1_000_000_000 + int(round((t - sec) * 1e9))


def _to_pairs(obj) -> List[Tuple[str, str]]:
    return [(f.name, str(getattr(obj, f.name))) for f in fields(obj)]


def _from_pairs(cls, pairs: Iterable[Tuple[str, str]], text_fields=()):
    """Build ``cls`` from key/value strings; unknown keys are ignored (newer peers), a missing or
    non-integer value raises ValueError naming the key."""
    values = dict(pairs)
    kwargs = {}
    for f in fields(cls):
        if f.name not in values:
            if f.default is MISSING:
                raise ValueError(f"lockstep message lacks the key {f.name!r}")
            continue
        raw = values[f.name]
        if f.name in text_fields:
            kwargs[f.name] = raw
            continue
        try:
            kwargs[f.name] = int(raw)
        except (TypeError, ValueError):
            raise ValueError(f"lockstep message key {f.name!r} is not an integer: {raw!r}") from None
    return cls(**kwargs)


@dataclass(frozen=True)
class StepManifest:
    """What the simulator had published when an advance ended (all sim time, integer ns)."""

    t_ns: int
    odom_ns: int = NONE_NS
    frame_ns: int = NONE_NS

    def to_pairs(self) -> List[Tuple[str, str]]:
        return _to_pairs(self)

    @classmethod
    def from_pairs(cls, pairs) -> "StepManifest":
        return _from_pairs(cls, pairs)


@dataclass(frozen=True)
class ParticipantReport:
    """A participant's state after a tick.

    name: node name (unique in its namespace); next_ns: sim time of its next tick (the simulator
    may advance up to it); setpoints / trajectories: setpoints / trajectories published so far
    (-1: it publishes none); goals: goals accepted so far (-1: it takes none); seq: reports sent so
    far (a lower value than the last one means the node restarted); broadcasts: EGO-Swarm
    trajectory broadcasts sent so far (-1: not a drone of a swarm).
    """

    name: str
    next_ns: int
    setpoints: int = -1
    trajectories: int = -1
    goals: int = -1
    seq: int = 0
    broadcasts: int = -1

    def to_pairs(self) -> List[Tuple[str, str]]:
        return _to_pairs(self)

    @classmethod
    def from_pairs(cls, pairs) -> "ParticipantReport":
        return _from_pairs(cls, pairs, text_fields=("name",))


class InputGate:
    """A participant's check that it holds the inputs of the instant its tick is due at.

    The node tells it every odometry and frame stamp it takes and every manifest; ``missing(now_ns)``
    is empty once the newest manifest is of ``now_ns`` (or later) and the odometry and frame it names
    have been taken. Before any manifest came there is no lockstep simulator to wait for (Gazebo's
    or a bag's clock): nothing is missing. ``frames=False``: the node takes no sensor frames (trajectory server).
    """

    def __init__(self, frames: bool = True):
        self.frames = frames
        self.manifest: Optional[StepManifest] = None
        self.joined_ns = NONE_NS  # sim time of the first manifest taken
        self.odom_ns = NONE_NS
        self.frame_ns = NONE_NS

    def saw_manifest(self, manifest: StepManifest) -> None:
        if self.manifest is None:
            self.joined_ns = manifest.t_ns
        if self.manifest is None or manifest.t_ns >= self.manifest.t_ns:
            self.manifest = manifest

    def saw_odom(self, stamp_ns: int) -> None:
        self.odom_ns = max(self.odom_ns, int(stamp_ns))

    def saw_frame(self, stamp_ns: int) -> None:
        self.frame_ns = max(self.frame_ns, int(stamp_ns))

    def missing(self, now_ns: int) -> str:
        """What the tick at ``now_ns`` still waits for ('' = nothing)."""
        m = self.manifest
        if m is None:
            return ""  # no lockstep simulator in the graph (yet): sim time from elsewhere, nothing to wait for
        if m.t_ns < now_ns:
            return "the simulator's step manifest"
        if m.t_ns <= self.joined_ns:
            return ""  # joined at this instant (a restart): what was published before is gone
        if self.odom_ns < m.odom_ns:
            return "odometry"
        if self.frames and self.frame_ns < m.frame_ns:
            return "a sensor frame"
        return ""


class MessageTally:
    """Messages of one topic: how many the reporting senders say they sent, how many came.

    ``field`` is the :class:`ParticipantReport` count (``"setpoints"``, ``"trajectories"``). A sender
    first heard of mid-flight counts from then on (what it sent before has gone by); a sender that
    restarted (its ``seq`` went down) counts on from where its last run ended.
    """

    def __init__(self, field: str):
        self.field = field
        self.received = 0
        self._sent: Dict[str, int] = {}
        self._base: Dict[str, int] = {}
        self._seq: Dict[str, int] = {}

    def expected(self) -> int:
        return sum(self._base[n] + self._sent[n] for n in self._sent)

    def saw_report(self, report: ParticipantReport) -> None:
        n = getattr(report, self.field)
        if n < 0:
            return  # does not send these
        name = report.name
        if name not in self._sent:
            self._base[name] = self.received - self.expected() - n
        elif report.seq < self._seq[name]:
            self._base[name] += self._sent[name]
        self._sent[name], self._seq[name] = n, report.seq

    def saw_message(self) -> None:
        self.received += 1

    def missing(self) -> int:
        """How many reported messages have not arrived yet."""
        return max(self.expected() - self.received, 0)


class TrajectoryGate:
    """The trajectory server's check that it holds the planners' output for the instant it samples.

    ``missing(now_ns)`` is empty once every planner that reported has finished its ticks due at or
    before ``now_ns`` (its next tick is later) and every trajectory they reported has been received.
    ``required``: planners it follows by name; while a lockstep simulator runs (``simulated``), the
    gate also waits for each one's first report. Without that, a server whose DDS discovery of the
    planner is still under way (discovery is per pair of nodes: the simulator may already hear the
    planner while this server does not) would sample as if there were no planner: a flight that
    depends on the machine's load.
    """

    def __init__(self, required: Iterable[str] = ()):
        self.required = tuple(required)
        self.reports: Dict[str, ParticipantReport] = {}
        self.trajectories = MessageTally("trajectories")

    def saw_report(self, report: ParticipantReport) -> None:
        if report.trajectories < 0:
            return  # not a planner
        self.trajectories.saw_report(report)
        self.reports[report.name] = report

    def saw_trajectory(self) -> None:
        self.trajectories.saw_message()

    def missing(self, now_ns: int, simulated: bool = True) -> str:
        if simulated:
            for name in self.required:
                if name not in self.reports:
                    return f"the {name}'s first lockstep report"
        for name, r in self.reports.items():
            if r.next_ns <= now_ns:
                return f"the {name} tick due at {r.next_ns * 1e-9:.3f} s"
        n = self.trajectories.missing()
        return f"{n} trajectory message(s) reported but not received" if n else ""


class PeerGate:
    """A swarm planner's check that it holds its peers' broadcasts sent before the instant it plans.

    At a tick due at ``T`` a drone uses the broadcasts its peers sent before ``T``
    (``nodes/swarm_link.py``). The broadcast topic and a peer's lockstep reports are separate DDS
    topics, so without this gate a broadcast still in transit would be missed at ``T`` by a loaded
    run and used by a quiet one. ``missing(now_ns)`` is empty once every peer has reported (with a
    lockstep simulator: each one in ``required``, so that a peer whose discovery is still under way
    is not planned around as if absent), has finished its ticks due before ``now_ns`` (its next tick
    is at ``now_ns`` or later: the peers' ticks of one instant run together and never wait for each
    other) and every broadcast it reported has arrived. Counts are per peer, from the peer's
    start: the broadcast topic keeps its history for late readers (transient local), so what a peer
    sent before this drone heard it still arrives. A peer that restarted (its ``seq`` went down)
    counts on from where its last run ended.
    """

    def __init__(self, required: Iterable[int] = ()):
        self.required = tuple(int(p) for p in required)
        self.reports: Dict[int, ParticipantReport] = {}
        self.received: Dict[int, int] = {}
        self._base: Dict[int, int] = {}

    def saw_report(self, peer: int, report: ParticipantReport) -> None:
        if report.broadcasts < 0:
            return  # not a swarm planner (the peer's trajectory server reports on the same topic)
        last = self.reports.get(peer)
        if last is not None and report.seq < last.seq:
            self._base[peer] = self._base.get(peer, 0) + last.broadcasts
        self.reports[peer] = report

    def saw_broadcast(self, peer: int) -> None:
        self.received[peer] = self.received.get(peer, 0) + 1

    def expected(self, peer: int) -> int:
        r = self.reports.get(peer)
        return 0 if r is None else self._base.get(peer, 0) + r.broadcasts

    def missing(self, now_ns: int, simulated: bool = True) -> str:
        if simulated:
            for peer in self.required:
                if peer not in self.reports:
                    return f"drone {peer}'s first lockstep report"
        for peer, r in sorted(self.reports.items()):
            if r.next_ns < now_ns:
                return f"drone {peer}'s tick due at {r.next_ns * 1e-9:.3f} s"
            n = self.expected(peer) - self.received.get(peer, 0)
            if n > 0:
                return f"{n} broadcast(s) of drone {peer} reported but not received"
        return ""


class LockstepBarrier:
    """The simulator's side: how far it may advance, and whether a participant went silent.

    participants: node names that must report before sim time starts (empty = whoever reports;
    time then starts with the first report). start_on_goal: also stay at the start until a
    participant that takes goals has accepted one. fault_timeout_s: wall seconds the simulator
    may wait at a barrier for one participant before that is a fault.
    """

    def __init__(self, participants: Iterable[str] = (), start_on_goal: bool = False,
                 fault_timeout_s: float = 30.0):
        if not (math.isfinite(fault_timeout_s) and fault_timeout_s > 0):
            raise ValueError(f"fault_timeout_s must be positive, got {fault_timeout_s!r}")
        self.required = tuple(participants)
        self.start_on_goal = bool(start_on_goal)
        self.fault_timeout_s = float(fault_timeout_s)
        self.reports: Dict[str, ParticipantReport] = {}
        self.setpoints = MessageTally("setpoints")
        self.started = False
        self.fault = ""
        self.faults = 0
        self.waits = 0
        self.wait_wall_s = 0.0
        self._blocked_since: Optional[float] = None
        self._blocked_on = ""
        self._sender: Dict[str, bytes] = {}  # name -> the publisher its last report came from
        self._switches: Dict[str, int] = {}

    # -- inputs ----------------------------------------------------------------------------------
    def saw_report(self, report: ParticipantReport, sender: bytes = b"") -> None:
        """``sender``: the publisher's id (DDS GID), if known. Reports of one name that keep
        alternating between two publishers are two nodes of that name - another graph on this
        ROS domain without a namespace: a fault, since either one's reports would pace this
        simulation (a restart changes the publisher once)."""
        if sender:
            last = self._sender.get(report.name)
            if last is not None and last != sender:
                self._switches[report.name] = self._switches.get(report.name, 0) + 1
                if self._switches[report.name] >= MAX_SENDER_SWITCHES and not self.fault:
                    self.fault = (f"two nodes named {report.name!r} report lockstep (their reports alternate): another "
                                  f"graph on this ROS domain without a namespace? give each graph its own "
                                  f"--namespace or ROS_DOMAIN_ID")
                    self.faults += 1
            self._sender[report.name] = sender
        self.setpoints.saw_report(report)
        self.reports[report.name] = report

    def saw_setpoint(self) -> None:
        self.setpoints.saw_message()

    @property
    def engaged(self) -> bool:
        """Whether lockstep paces the simulation (some participant is known)."""
        return bool(self.required) or bool(self.reports)

    # -- the barrier -----------------------------------------------------------------------------
    def _start_blocker(self) -> str:
        absent = [n for n in self.required if n not in self.reports]
        if absent:
            return "start: waiting for " + ", ".join(absent) + " to report"
        if self.start_on_goal and not any(r.goals > 0 for r in self.reports.values()):
            return "start: waiting for a goal"
        return ""

    def limit_ns(self, now_ns: int) -> Tuple[Optional[int], str]:
        """(sim time the simulator may advance to, what it waits for). ``None`` = no limit (not
        engaged); a limit <= ``now_ns`` means wait; the text names the participant waited for."""
        if not self.engaged:
            return None, ""
        if self.fault:
            return now_ns, "nothing: a lockstep fault stopped the simulation"
        if not self.started:
            why = self._start_blocker()
            if why:
                return now_ns, why
            self.started = True
        late = self.setpoints.missing()
        if late:  # told of setpoints that have not arrived yet
            return now_ns, f"{late} setpoint message(s) reported but not received"
        limit, who = None, ""
        for name, r in self.reports.items():
            if limit is None or r.next_ns < limit:
                limit, who = r.next_ns, name
        return limit, (f"{who} (next tick {limit * 1e-9:.3f} s)" if limit is not None and limit <= now_ns else "")

    def blocked(self, wall_s: float, on: str) -> bool:
        """Note that the simulator cannot advance at wall time ``wall_s`` because of ``on``; returns
        True when that has lasted ``fault_timeout_s`` (a fault is then set, and counted once). A
        wait for the start is not a fault: nothing has flown yet."""
        if self._blocked_since is None or on != self._blocked_on:
            self._end_wait(wall_s)
            self._blocked_since, self._blocked_on = wall_s, on
            self.waits += 1
            return bool(self.fault)
        if self.fault or on.startswith("start:"):
            return bool(self.fault)
        if wall_s - self._blocked_since >= self.fault_timeout_s:
            self.fault = (f"no answer for {wall_s - self._blocked_since:.1f} s wall while the simulator waited for "
                          f"{on} (lockstep fault_timeout_s = {self.fault_timeout_s:g})")
            self.faults += 1
            return True
        return False

    def advanced(self, wall_s: float) -> None:
        """The simulator advanced: any wait is over (a fault stays until :meth:`clear_fault`)."""
        self._end_wait(wall_s)

    def _end_wait(self, wall_s: float) -> None:
        if self._blocked_since is not None:
            self.wait_wall_s += max(wall_s - self._blocked_since, 0.0)
            self._blocked_since, self._blocked_on = None, ""

    def waiting_for(self) -> str:
        return self._blocked_on
