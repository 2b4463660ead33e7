"""The replan state machine's states and its one logged transition function (EGO's ``ego_replan_fsm``).

States (EGO-Planner's names):
- INIT: constructed, no mission yet.
- WAIT_TARGET: no goal, or the goal was reached / refused; holds position.
- GEN_NEW_TRAJ: plan from the vehicle's current state, from scratch (quintic initial guess).
- REPLAN_TRAJ: plan from the reference at the current time, reusing the current trajectory.
- EXEC_TRAJ: flying a trajectory; checks safety, timer and progress to decide when to replan.
- EMERGENCY_STOP: a collision was imminent and no replan succeeded; brakes, then GEN_NEW_TRAJ.

What each state does lives in :class:`planner_pkg.planning.ego_planner.EgoPlanner`; this module
only records the state and every change of it (time, from, to, reason), in one place.
"""
from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import List

__all__ = ["FsmState", "Transition", "ReplanFSM"]

logger = logging.getLogger(__name__)


class FsmState(enum.Enum):
    INIT = "INIT"
    WAIT_TARGET = "WAIT_TARGET"
    GEN_NEW_TRAJ = "GEN_NEW_TRAJ"
    REPLAN_TRAJ = "REPLAN_TRAJ"
    EXEC_TRAJ = "EXEC_TRAJ"
    EMERGENCY_STOP = "EMERGENCY_STOP"


@dataclass(frozen=True)
class Transition:
    t: float  # s, odometry time
    source: FsmState
    target: FsmState
    reason: str


class ReplanFSM:
    """Current state plus the transition history (bounded: the oldest entries are dropped)."""

    def __init__(self, max_history: int = 1000):
        self.state = FsmState.INIT
        self.history: List[Transition] = []
        self._max_history = int(max_history)

    def transition(self, target: FsmState, reason: str, t: float) -> None:
        """Change state to ``target`` because of ``reason`` (logged at INFO; EMERGENCY_STOP at
        WARNING). A transition to the current state is recorded too (e.g. a retried plan)."""
        if not isinstance(target, FsmState):
            raise TypeError(f"FSM target must be a FsmState, got {target!r}")
        record = Transition(float(t), self.state, target, reason)
        level = logging.WARNING if target is FsmState.EMERGENCY_STOP else logging.INFO
        logger.log(level, "t=%.3f s: %s -> %s (%s)", record.t, self.state.value, target.value, reason)
        self.history.append(record)
        if len(self.history) > self._max_history:
            del self.history[: len(self.history) - self._max_history]
        self.state = target

    def reset(self, t: float = 0.0) -> None:
        self.transition(FsmState.INIT, "reset", t)
