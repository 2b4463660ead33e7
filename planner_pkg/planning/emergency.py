"""The emergency stop: braking straight, or braking while steering away from what is ahead.

When a replan fails and the committed trajectory is blocked less than ``emergency_time_s`` ahead
(a trunk seen late), the EGO planner stops. Braking along the velocity stops where physics
allows, often inside the obstacle's inflation: in the forest benchmark at 6 m/s these stops were
the closest calls (0.015 m beyond the vehicle's radius). The same deceleration turned sideways
(:class:`~planner_pkg.planning.trajectory.BrakingTrajectory` with ``steer_rad``) stops a little
farther along but up to a metre aside, which is what a pilot does: brake *and* steer away.

:func:`choose_emergency_stop` flies each candidate (straight, and each steer angle to either side)
on the map: its clearance is the smallest distance of its path, sampled every ``step_s``, to an
occupied voxel centre. A steered stop is taken when it keeps at least ``min_gain_m`` more
clearance than braking straight and every point of its path was observed (the voxel map's rays,
or a recent depth frame of ``history``; never-observed space may hide an obstacle); among those
the one with the most clearance (the smaller angle on a tie). Only when braking straight would
come closer than ``blind_below_m`` to what is known to be there (the planner passes its map's
inflation) is the best steered stop through never-observed space taken instead. The stop starts
from the vehicle's own state (the planner passes its odometry, not its reference). No ROS here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from planner_pkg.planning.frontier import observed
from planner_pkg.planning.trajectory import BrakingTrajectory

__all__ = ["EmergencyChoice", "choose_emergency_stop"]


@dataclass(frozen=True)
class EmergencyChoice:
    """Which stop was chosen: steer_rad (0 = straight; > 0 left of the motion, < 0 right);
    clearance_m and straight_clearance_m: the chosen and the straight path's smallest distance to
    an occupied voxel centre, m (inf: none near); steered_candidates: steered paths judged;
    unobserved: steered paths with more clearance refused for passing never-observed space;
    vetoed: ... refused by the caller's ``accept`` (EGO-Swarm: too close to another drone);
    blind: the chosen steered stop passes never-observed space (braking straight would touch)."""

    steer_rad: float
    clearance_m: float
    straight_clearance_m: float
    steered_candidates: int
    unobserved: int
    vetoed: int = 0
    blind: bool = False

    def describe(self) -> str:
        if self.steer_rad == 0.0:
            return (f"braking straight (clearance {self.straight_clearance_m:.2f} m; {self.steered_candidates} "
                    f"steered stops judged, {self.unobserved} through unobserved space"
                    + (f", {self.vetoed} too close to another drone)" if self.vetoed else ")"))
        side = "left" if self.steer_rad > 0 else "right"
        return (f"braking while steering {math.degrees(abs(self.steer_rad)):.0f} deg {side} (clearance "
                f"{self.clearance_m:.2f} m against {self.straight_clearance_m:.2f} m straight"
                + ("; through never-observed space: straight would touch)" if self.blind else ")"))


def _path(stop: BrakingTrajectory, step_s: float) -> np.ndarray:
    n = max(2, int(math.ceil(stop.duration / step_s)) + 1)
    return stop.positions(np.linspace(stop.t_start, stop.t_end, n))


def choose_emergency_stop(grid_map, history, position, velocity, t_start: float, decel_mps2: float,
                          yaw: float = math.nan, steer_angles_rad: Sequence[float] = (),
                          min_gain_m: float = 0.05, start_radius_m: float = 0.5, step_s: float = 0.02,
                          accept: Optional[Callable[[BrakingTrajectory], bool]] = None,
                          blind_below_m: float = 0.0, acceleration=None,
                          ramp_s: float = 0.0) -> Tuple[BrakingTrajectory, EmergencyChoice]:
    """The emergency stop from ``position``/``velocity`` (3,) at ``t_start`` (see the module
    docstring). ``steer_angles_rad``: the steer angles tried to either side (positive; empty =
    straight braking only); ``start_radius_m``: never-observed space this close to ``position``
    counts as observed (the camera cannot see beside the vehicle; it is there); ``accept``: a
    further test a steered stop must pass (None: none), e.g. the other drones' broadcasts;
    ``blind_below_m``: when braking straight comes closer than this to an occupied voxel centre
    (the vehicle would touch it) and no observed steered stop does better, the best steered stop
    through never-observed space is taken (0: never). ``acceleration`` (3,) and ``ramp_s``:
    the vehicle's acceleration now and how long it takes to turn it; every candidate then starts
    with that ramp to its own braking (:class:`BrakingTrajectory`; 0: none)."""
    ramp = dict(acceleration=acceleration, ramp_s=ramp_s)
    straight = BrakingTrajectory(position, velocity, t_start, decel_mps2, yaw, **ramp)
    angles = [float(a) for a in steer_angles_rad if a > 0.0]
    if not angles or straight.side @ straight.side == 0.0:
        return straight, EmergencyChoice(0.0, math.inf, math.inf, 0, 0)
    steered = [BrakingTrajectory(position, velocity, t_start, decel_mps2, yaw, steer_rad=sign * a, **ramp)
               for a in sorted(angles) for sign in (1.0, -1.0)]
    paths = [_path(stop, step_s) for stop in [straight] + steered]
    reach = 1.0  # obstacles farther than this from every path do not decide anything
    distances = grid_map.occupied_distances(np.vstack(paths), reach, 2.0 * reach)
    if not np.isfinite(distances).any():
        return straight, EmergencyChoice(0.0, math.inf, math.inf, len(steered), 0)
    ends = np.cumsum([path.shape[0] for path in paths])[:-1]
    clearance = [float(d.min()) for d in np.split(distances, ends)]
    start = np.asarray(position, dtype=np.float64)
    best, best_clearance, unobserved, vetoed = None, clearance[0] + min_gain_m, 0, 0
    blind, blind_clearance = None, best_clearance  # the best through never-observed space
    for stop, path, c in zip(steered, paths[1:], clearance[1:]):
        if c <= best_clearance:
            continue  # (ordered by angle: a larger one must do strictly better)
        if accept is not None and not accept(stop):
            vetoed += 1
            continue
        if not observed(grid_map, history, path, start, start_radius_m).all():
            unobserved += 1
            if c > blind_clearance:
                blind, blind_clearance = stop, c
            continue
        best, best_clearance = stop, c
    if best is None and blind is not None and clearance[0] < blind_below_m:
        # braking straight hits what is known to be there: never-observed space is the lesser risk
        return blind, EmergencyChoice(blind.steer_rad, blind_clearance, clearance[0], len(steered), unobserved,
                                      vetoed, blind=True)
    if best is None:
        return straight, EmergencyChoice(0.0, clearance[0], clearance[0], len(steered), unobserved, vetoed)
    return best, EmergencyChoice(best.steer_rad, best_clearance, clearance[0], len(steered), unobserved, vetoed)
