"""Judging one goal-directed flight from the messages a mission sees: odometry and the simulator's
ground truth. Plain Python + NumPy; the bringup's ``Mission`` (``planner_pkg/nodes/mission.py``)
feeds it live messages, :func:`planner_pkg.sim.mcap_log.summarize` a recording's.

What counts (issue 13 item 2, issue 20 item 7):

* Only samples of this mission: after the goal was sent (:meth:`MissionJudge.start`), in time
  order (a stamp that goes back is refused: another clock or a replay). The flight's start is
  where the vehicle was when the goal went out; ``time_s`` is measured from then and is never
  negative.
* Where the simulator's ground truth exists (the embedded ``sim_bridge`` status: ``position``,
  ``collision``, ``crashed``, ``sim_time_s``), *it* decides success: the goal is reached only when
  the simulator puts the vehicle within the tolerance; odometry at the goal only dates the event.
  The start is the simulator's ``position`` when the goal went out. A collision's time and place
  are the simulator's: ``collision_time_s`` / ``collision_position`` where the status has them (or
  a position as the ``collision`` value), else the ones its message names (``collision at
  t=2.612 s at [x, y, z]``), else its ``position`` (the simulator freezes the vehicle where it hit).
  Odometry inside an obstacle of the world file waits ``collision_confirm_s`` for that report and
  then decides on its own (a failure is never lost); a report that has passed that time without a
  collision refuses it. Odometry that disagrees with the ground truth by more than
  ``max_disagreement_m`` is counted. Without ground truth (Gazebo) odometry decides both.
* The simulator reporting a ``lockstep_fault`` (its text, or ``true`` and the text in the status
  message) ends the mission at once with reason ``lockstep fault: <text>``; ``crashed`` without a
  collision ends it as ``non_finite_state``.

Times are sim seconds (the stamps), positions metres in the map frame.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from planner_pkg.envelope import DEFAULT_ENVELOPE, FlightEnvelope
from planner_pkg.sim.flight_log import EpisodeSummary, FlightLog

#: A mission's defaults (the runner, ``fly``, ``bringup`` missions, recordings judged afterwards):
#: sim seconds from the goal until a timeout, and the goal radius, m. Written here once.
MISSION_TIMEOUT_S = 60.0
GOAL_TOLERANCE_M = 0.5

__all__ = ["GroundTruth", "ground_truth_from_status", "MissionJudge", "LOCKSTEP_FAULT_PREFIX"]

LOCKSTEP_FAULT_PREFIX = "lockstep fault: "
#: ``lockstep_fault`` values that mean "no fault".
_NO_FAULT = ("", "none", "None", "false", "False")


@dataclass(frozen=True)
class GroundTruth:
    """One ground-truth report of the simulator (a ``sim_bridge`` status).

    t: sim time of the report, s. position: (3,) m or None (not reported: Gazebo mode).
    collided / crashed: the simulator's own collision monitor. lockstep_fault: "" or why the
    simulator could not keep lockstep with a planning node. collision_time_s / collision_position
    / min_clearance_m: the monitor's values where the status carries them, else None.
    """

    t: float
    position: Optional[np.ndarray]
    collided: bool = False
    crashed: bool = False
    lockstep_fault: str = ""
    collision_time_s: Optional[float] = None
    collision_position: Optional[np.ndarray] = None
    min_clearance_m: Optional[float] = None


def _flag(value: str) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _xyz(text: str, what: str, envelope: FlightEnvelope) -> np.ndarray:
    try:
        parts = [float(v) for v in str(text).strip().strip("[]").split(",")]
    except ValueError:
        parts = []
    if len(parts) != 3 or not all(math.isfinite(v) for v in parts):
        raise ValueError(f"status {what} {text!r} is not three finite numbers")
    envelope.check_position(f"status {what}", parts)
    return np.array(parts)


def _optional_float(values: dict, key: str) -> Optional[float]:
    text = values.get(key)
    if text in (None, "", "none", "None", "n/a", "nan"):
        return None
    v = float(text)
    return v if math.isfinite(v) else None


#: How the simulator words a collision in its status message (``EmbeddedSim._crash``):
#: ``collision at t=2.612 s at [-10.776, 0.0, 1.0]``.
_COLLISION_MESSAGE = re.compile(r"collision at t=([-+0-9.eE]+) s at \[([^\]]*)\]")


def _collision_report(values: dict, envelope: FlightEnvelope):
    """(collided, time s or None, position or None) from a sim_bridge status: the ``collision``
    value (a flag, or the position itself), then ``collision_time_s`` / ``collision_position``
    where the status carries them, else the time and place its message names."""
    raw = str(values.get("collision", "")).strip()
    where = None
    if raw and any(ch.isdigit() for ch in raw) and "," in raw:
        where = _xyz(raw, "collision", envelope)  # the simulator reports where it collided
    collided = where is not None or _flag(raw)
    t = _optional_float(values, "collision_time_s")
    text = values.get("collision_position")
    if text not in (None, "", "none", "None"):
        where = _xyz(text, "collision_position", envelope)
    if collided or _flag(values.get("crashed", "")):
        found = _COLLISION_MESSAGE.search(str(values.get("message", "")))
        if found:
            if t is None:
                t = float(found.group(1))
            if where is None:
                where = _xyz(found.group(2), "collision message position", envelope)
    return collided, t, where


def ground_truth_from_status(values: dict, envelope: FlightEnvelope = DEFAULT_ENVELOPE) -> Optional[GroundTruth]:
    """A :class:`GroundTruth` from a sim_bridge status (``conversions.status_values``: its keys
    plus ``message``), or None when the status carries no simulator time (not an embedded
    simulator). ValueError when a value is malformed (non-finite, outside the envelope)."""
    if "sim_time_s" not in values:
        return None
    t = float(values["sim_time_s"])
    if not math.isfinite(t):
        raise ValueError(f"status sim_time_s {values['sim_time_s']!r} is not finite")
    position = _xyz(values["position"], "position", envelope) if values.get("position") else None
    fault = str(values.get("lockstep_fault", "")).strip()
    if fault in _NO_FAULT:
        fault = ""
    elif _flag(fault):  # a flag: the status message says why
        fault = str(values.get("message", "")).strip() or "reported by the simulator"
    collided, collision_t, where = _collision_report(values, envelope)
    return GroundTruth(
        t=t, position=position, collided=collided, crashed=_flag(values.get("crashed", "")),
        lockstep_fault=fault, collision_time_s=collision_t if collided else None,
        collision_position=where if collided else None,
        min_clearance_m=_optional_float(values, "min_clearance_m"),
    )


class MissionJudge:
    """The state of one mission; feed it in arrival order, read :meth:`summary` at the end.

    world: the World flown in (collision checks without ground truth, clearance); goal (3,) m;
    tolerance_m: goal radius; timeout_s: sim seconds from the goal; radius_m: vehicle radius;
    ground_truth_expected: a simulator with ground truth runs this flight (then odometry alone
    never decides success, and decides a collision only when the simulator has not reported it
    within ``collision_confirm_s`` sim seconds); max_disagreement_m: odometry farther than this
    from the ground truth at the same time is counted as disagreeing.
    """

    def __init__(self, world, goal, tolerance_m: float, timeout_s: float, radius_m: float, *,
                 ground_truth_expected: bool = False, max_disagreement_m: float = 1.0,
                 match_window_s: float = 0.25, collision_confirm_s: float = 2.0):
        self.world, self.goal = world, np.asarray(goal, dtype=np.float64)
        self.tolerance_m, self.timeout_s, self.radius_m = float(tolerance_m), float(timeout_s), float(radius_m)
        self.ground_truth_expected = bool(ground_truth_expected)
        self.max_disagreement_m, self.match_window_s = float(max_disagreement_m), float(match_window_s)
        self.collision_confirm_s = float(collision_confirm_s)
        self.log = FlightLog()  # every accepted odometry sample, before and after the goal (flight_log: this
        # mission's)
        self.t_goal: Optional[float] = None
        self.reason = ""  # "" while the mission runs
        self.t_end: Optional[float] = None
        self.end_position: Optional[np.ndarray] = None  # where the deciding report put the vehicle
        self.truth: Optional[GroundTruth] = None  # newest accepted ground truth
        self.truth_at_goal: Optional[GroundTruth] = None
        self.counts = {"odom_refused_time": 0, "truth_refused_time": 0, "odom_disagreements": 0,
                       "odom_claims_refused": 0, "odom_collisions_refused": 0}
        self.notes: List[str] = []  # what was refused and why (first few), for the summary message
        self._last_t: Optional[float] = None
        self._last_truth_t: Optional[float] = None
        self._inside_since: Optional[float] = None  # first sample of the current streak within tolerance
        self._odom_collision_t: Optional[float] = None  # first sample whose clearance was < 0 ...
        self._odom_collision_p: Optional[np.ndarray] = None  # ... and where it was
        self._rows: List[tuple] = []  # (t, x, y, z) of the flown samples, for matching ground truth

    # -- state ----------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return bool(self.reason)

    @property
    def started(self) -> bool:
        return self.t_goal is not None

    def log_reaches_end(self) -> bool:
        """The flight log holds odometry up to the end of the mission (or the mission is not over)."""
        if not self.done or self.t_end is None:
            return True
        return self._last_t is not None and self._last_t >= self.t_end - 1e-9

    def latest_time(self) -> Optional[float]:
        """The newest sim time seen (odometry or ground truth), s."""
        times = [t for t in (self._last_t, self._last_truth_t) if t is not None]
        return max(times) if times else None

    def _note(self, text: str) -> None:
        if len(self.notes) < 5:
            self.notes.append(text)

    def finish(self, reason: str, t: Optional[float], position=None) -> None:
        """End the mission (the first reason wins)."""
        if self.done:
            return
        self.reason, self.t_end = reason, t
        self.end_position = None if position is None else np.asarray(position, dtype=np.float64)

    def start(self, t_goal: Optional[float] = None) -> float:
        """The goal goes out now: at ``t_goal`` (default the newest sim time seen, 0 if none)."""
        latest = self.latest_time()
        self.t_goal = float(t_goal if t_goal is not None else (latest if latest is not None else 0.0))
        self.truth_at_goal = self.truth
        return self.t_goal

    # -- inputs ---------------------------------------------------------------------------------
    def odometry(self, t: float, position, velocity) -> Optional[str]:
        """One odometry sample (already finite and inside the envelope); returns why it was
        refused, or None when accepted."""
        if self.done:
            # a sample of the flight that arrives after the report that ended it (odometry and the
            # simulator's status travel on separate topics): logged, so the flight log reaches
            # the end; it decides nothing any more
            if self.t_end is not None and t <= self.t_end and (self._last_t is None or t > self._last_t):
                self._last_t = t
                self.log.append(t, np.asarray(position, dtype=np.float64), velocity)
            return None
        if self._last_t is not None and t < self._last_t:
            self.counts["odom_refused_time"] += 1
            why = f"odometry stamp {t:.3f} s goes back from {self._last_t:.3f} s (another clock, or a replay)"
            self._note(why)
            return why
        p = np.asarray(position, dtype=np.float64)
        if self._last_t is not None and t == self._last_t:
            return None  # the same instant again (a simulator waiting to start re-sends it): logged once
        self._last_t = t
        self.log.append(t, p, velocity)
        if not self.started or t < self.t_goal:
            return None
        self._rows.append((t, float(p[0]), float(p[1]), float(p[2])))
        inside = float(np.linalg.norm(p - self.goal)) <= self.tolerance_m
        self._inside_since = (self._inside_since if self._inside_since is not None else t) if inside else None
        collided = float(self.world.signed_distance(p)) - self.radius_m < 0
        if collided and self._odom_collision_t is None:
            self._odom_collision_t, self._odom_collision_p = t, p
        if self._odom_collision_t is not None:
            # with ground truth the simulator's report gives the collision's time and place; it is
            # awaited for collision_confirm_s, then odometry decides (a failure is never lost)
            if not self.ground_truth_expected or t - self._odom_collision_t >= self.collision_confirm_s:
                if self.ground_truth_expected:
                    self._note(f"odometry entered an obstacle at {self._odom_collision_t:.3f} s; the simulator "
                               f"reported no collision within {self.collision_confirm_s:g} s")
                self.finish("collision", self._odom_collision_t, self._odom_collision_p)
        elif inside and not self.ground_truth_expected:
            self.finish("goal_reached", t, p)
        if not self.done and self._odom_collision_t is None and t - self.t_goal >= self.timeout_s:
            self.finish("timeout", t, self._truth_position() if self.ground_truth_expected else p)
        return None

    def ground_truth(self, truth: GroundTruth) -> Optional[str]:
        """One ground-truth report; returns why it was refused, or None."""
        if self.done:
            return "the mission is over"
        if truth.lockstep_fault:
            self.truth = truth
            self.finish(LOCKSTEP_FAULT_PREFIX + truth.lockstep_fault, truth.t, truth.position)
            return None
        if self._last_truth_t is not None and truth.t < self._last_truth_t:
            self.counts["truth_refused_time"] += 1
            why = f"simulator status at {truth.t:.3f} s goes back from {self._last_truth_t:.3f} s"
            self._note(why)
            return why
        self._last_truth_t = truth.t
        self.truth = truth
        if not self.started or truth.t < self.t_goal or truth.position is None:
            return None
        self._compare_odometry(truth)
        if truth.collided:
            t = truth.collision_time_s
            if t is None:
                t = self._odom_collision_t if self._odom_collision_t is not None else truth.t
            where = truth.collision_position if truth.collision_position is not None else truth.position
            self.finish("collision", max(t, self.t_goal), where)
        elif truth.crashed:  # the simulator stopped the vehicle for another reason (non-finite state)
            self.finish("non_finite_state", truth.t, truth.position)
        elif self._odom_collision_t is not None and truth.t >= self._odom_collision_t:
            # the simulator has seen the time of odometry's collision and reports none
            self.counts["odom_collisions_refused"] += 1
            self._note(f"odometry put the vehicle inside an obstacle at {self._odom_collision_t:.3f} s; the "
                       f"simulator reports no collision at {truth.t:.3f} s: refused")
            self._odom_collision_t = self._odom_collision_p = None
        elif float(np.linalg.norm(truth.position - self.goal)) <= self.tolerance_m:
            since = self._inside_since
            self.finish("goal_reached", since if since is not None and since <= truth.t else truth.t, truth.position)
        else:
            self._refuse_odometry_claims(truth)
            if truth.t - self.t_goal >= self.timeout_s:
                self.finish("timeout", truth.t, truth.position)
        return None

    # -- cross-checks ---------------------------------------------------------------------------
    def _truth_position(self) -> Optional[np.ndarray]:
        return None if self.truth is None else self.truth.position

    def _compare_odometry(self, truth: GroundTruth) -> None:
        """Count odometry that disagrees with the ground truth at (about) the same sim time."""
        if not self._rows:
            return
        times = np.fromiter((r[0] for r in self._rows[-200:]), dtype=np.float64)
        i = int(np.argmin(np.abs(times - truth.t)))
        if abs(times[i] - truth.t) > self.match_window_s:
            return
        row = self._rows[-200:][i]
        gap = float(np.linalg.norm(np.array(row[1:4]) - truth.position))
        if gap > self.max_disagreement_m:
            self.counts["odom_disagreements"] += 1
            self._note(f"odometry at {row[0]:.3f} s is {gap:.2f} m from the simulator's position "
                       f"{np.round(truth.position, 3).tolist()}")

    def _refuse_odometry_claims(self, truth: GroundTruth) -> None:
        """Odometry said 'at the goal' before this report; the simulator says the vehicle is not."""
        if self._inside_since is not None and self._inside_since <= truth.t:
            gap = float(np.linalg.norm(truth.position - self.goal))
            if gap > self.tolerance_m + self.max_disagreement_m:
                self.counts["odom_claims_refused"] += 1
                self._note(f"odometry put the vehicle at the goal at {self._inside_since:.3f} s; the simulator "
                           f"has it {gap:.2f} m away: refused")
            self._inside_since = None

    # -- outcome --------------------------------------------------------------------------------
    @property
    def never_flew(self) -> bool:
        """No goal went out, or no sample of this mission arrived after it."""
        return not self.started or not self._rows

    @property
    def run_failed(self) -> bool:
        """The run itself failed (the bringup exits 1): nothing was flown, the simulator lost
        lockstep with a planning node, or its odometry stalled."""
        return self.never_flew or self.reason_is_failure

    @property
    def reason_is_failure(self) -> bool:
        """The mission ended because the run failed (lockstep fault, stalled odometry, no planner
        listening), not with a flight outcome."""
        return self.reason.startswith((LOCKSTEP_FAULT_PREFIX, "stalled", "not_started"))

    def _flown(self, data: np.ndarray) -> np.ndarray:
        """The rows of ``data`` (a log's array) from the goal to the end of the mission."""
        if self.t_goal is None:
            return data[:0]
        end = self.t_end if self.t_end is not None else math.inf
        return data[(data[:, 0] >= self.t_goal) & (data[:, 0] <= end)]

    def flight_log(self) -> FlightLog:
        """This mission's flight as a log (the ``--log`` CSV, the plot): the samples from the goal
        to the end; every accepted sample when no goal went out (what there is, for diagnosis)."""
        data = self.log.as_array()
        rows = self._flown(data) if self.started else data
        out = FlightLog()
        for row in rows:
            out.append(row[0], row[1:4], row[4:7])
        return out

    def summary(self, planner: str, world_name: str, vehicle: str = "quadrotor",
                replan_ms: Sequence[float] = (), wall_time_s: Optional[float] = None,
                message: str = "") -> EpisodeSummary:
        """The mission as fly's ``summary.json`` (:class:`EpisodeSummary`)."""
        data = self.log.as_array()
        t_goal = self.t_goal
        flown = self._flown(data)
        duration = 0.0
        if t_goal is not None:
            last_t = self.t_end if self.t_end is not None else self.latest_time()
            duration = max(0.0, (last_t if last_t is not None else t_goal) - t_goal)
        positions = flown[:, 1:4]
        path = float(np.linalg.norm(np.diff(positions, axis=0), axis=1).sum()) if len(flown) > 1 else 0.0
        speeds = np.linalg.norm(flown[:, 4:7], axis=1) if len(flown) else np.zeros(1)
        if len(flown):
            clear = float((self.world.signed_distance(positions) - self.radius_m).min())
        else:
            clear = math.inf
        truth = self.truth
        if truth is not None and truth.min_clearance_m is not None and self.ground_truth_expected:
            # the simulator's monitor checks every physics step (odometry is sampled and noisy);
            # its newest report may be older than the last sample, so both count
            clear = min(clear, truth.min_clearance_m)
        collided = self.reason == "collision"
        if collided and self.end_position is not None:
            clear = min(clear, float(self.world.signed_distance(self.end_position)) - self.radius_m)
        final = self._final_position(flown, data)
        start = self._start_position(data, flown)
        notes = "; ".join(self.notes)
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items() if v)
        text = "; ".join(t for t in (message, counts, notes) if t)
        return EpisodeSummary(
            reached=self.reason == "goal_reached", collided=collided, time_s=duration, path_length_m=path,
            min_clearance_m=clear if math.isfinite(clear) else None,
            replan_ms_median=float(np.median(replan_ms)) if len(replan_ms) else None,
            replan_ms_p95=float(np.percentile(replan_ms, 95)) if len(replan_ms) else None,
            reason=self.reason or ("interrupted" if self.started else "not_started"),
            mean_speed_mps=path / duration if duration > 0 else None,
            max_speed_mps=float(speeds.max()) if len(flown) else None,
            final_goal_distance_m=float(np.linalg.norm(final - self.goal)) if final is not None else None,
            seed=None, planner=planner, vehicle=vehicle, world=world_name,
            start=start.tolist() if start is not None else [], goal=self.goal.tolist(),
            collision_time_s=self.t_end if collided else None,
            collision_position=self.end_position.tolist() if collided and self.end_position is not None else None,
            planner_calls=None, bad_setpoints=None, depth_frames=None,  # counted inside the nodes
            wall_time_s=wall_time_s,
            real_time_factor=duration / wall_time_s if wall_time_s and duration > 0 else None,
            message=text,
        )

    def _final_position(self, flown: np.ndarray, data: np.ndarray) -> Optional[np.ndarray]:
        if self.end_position is not None:
            return self.end_position
        if self.ground_truth_expected and self.truth is not None and self.truth.position is not None:
            return self.truth.position
        if len(flown):
            return flown[-1, 1:4]
        return data[-1, 1:4] if len(data) else None

    def _start_position(self, data: np.ndarray, flown: np.ndarray) -> Optional[np.ndarray]:
        """Where the vehicle was when the goal went out: the ground truth then, else the last
        sample at or before the goal, else the first one after it."""
        if self.t_goal is None:
            return None
        if self.truth_at_goal is not None and self.truth_at_goal.position is not None:
            return self.truth_at_goal.position
        before = data[data[:, 0] <= self.t_goal]
        if len(before):
            return before[-1, 1:4]
        return flown[0, 1:4] if len(flown) else None
