"""Feed a :class:`~planner_pkg.viz.foxglove_live.LiveView` from the embedded simulator's closed loop.

The runner (:mod:`planner_pkg.sim.runner`) knows no viewer; :class:`VizTap` wraps the planner it
flies and follows the same Planner protocol, so the view sees exactly what the planner sees: the
odometry at each update (the vehicle pose, ``/tf``), every rendered frame (depth image and cloud,
via ``observe``), what the planner returned (the trajectory) and how long it took (replan time).
The wrapped planner's behaviour is unchanged: the tap calls it with the same arguments, returns
its result untouched and only posts to the view, which never blocks (see LiveView).
"""
from __future__ import annotations

import time

import numpy as np

from planner_pkg.types import Setpoint

__all__ = ["VizTap"]


class VizTap:
    """A planner that delegates to ``planner`` and posts what passes through to ``view``."""

    def __init__(self, planner, view):
        self.planner = planner
        self.view = view
        self.rate_hz = float(planner.rate_hz)
        self.name = getattr(planner, "name", type(planner).__name__)

    def __getattr__(self, name):  # statistics and the like of the wrapped planner
        if name == "planner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.planner, name)

    def reset(self, start, goal) -> None:
        self.planner.reset(start, goal)
        self.view.set_goal(goal)

    def observe(self, sensors) -> None:
        inner = getattr(self.planner, "observe", None)
        if inner is not None:
            inner(sensors)
        self.view.post_frame(sensors)

    def update(self, state, sensors):
        wall = time.perf_counter()
        result = self.planner.update(state, sensors)  # errors propagate to the runner as before
        replan_ms = 1e3 * (time.perf_counter() - wall)
        view = self.view
        view.post_state(state.t, state.position, state.attitude, state.velocity)
        view.post_replan(state.t, replan_ms)
        if isinstance(result, Setpoint):
            if result.has_position:
                view.post_trajectory(state.t, points=np.stack([state.position, result.position]))
        elif result is not None and callable(getattr(result, "sample", None)):
            view.post_trajectory(state.t, trajectory=result)
        return result
