"""One racing vehicle flown outside the training environment (a ROS node, another simulator).

:class:`GateProgress` follows a vehicle along a track from successive positions with the
environment's own gate tests (:func:`~planner_pkg.racing.gates.gate_events`): gates passed in
order lap after lap, lap times, gate-frame hits. :class:`RacerPilot` turns a vehicle state into
the exported policy's action and its command (mass-normalised collective thrust, m/s^2, and body
FLU rates, rad/s), building the observation with :func:`~planner_pkg.racing.env.build_observation`,
the very function the environment trains with, and keeping the previous action as it does.
:func:`track_world` gives the track's gate frames as a world mapping (the world file format of
``planner_pkg.world.io``) for a simulator's collision checks.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import numpy as np

from planner_pkg.racing import quad
from planner_pkg.racing.env import ACTION_DIM, build_observation
from planner_pkg.racing.gates import GateArrays, gate_events
from planner_pkg.racing.track import Track

__all__ = ["GateProgress", "RacerPilot", "track_world"]


class GateProgress:
    """Gates of ``track`` passed in order by one vehicle (``env_cfg``: the racing EnvConfig, for
    the frame size and the vehicle radius). Call :meth:`update` with each new position."""

    def __init__(self, track: Track, env_cfg, start_t: float = 0.0):
        self.track = track
        self.cfg = env_cfg
        self.gates = GateArrays(1, len(track))
        self.gates.set_track(0, track)
        self.passed = 0
        self.lap_times_s: List[float] = []
        self.gate_times_s: List[float] = []
        self.hits = 0  # steps that touched a gate frame (a crash in the environment)
        self._lap_start = float(start_t)
        self._last: Optional[np.ndarray] = None

    @property
    def target(self) -> int:
        """Index of the next gate to pass."""
        return self.passed % len(self.track)

    def update(self, t: float, position) -> bool:
        """Advance to ``position`` (3,) m at time ``t`` s; True when the target gate was passed."""
        p1 = np.array(position, dtype=np.float64).reshape(1, 3)  # a copy: callers may reuse their array
        p0, self._last = self._last, p1
        if p0 is None:
            return False
        passed, hit = gate_events(p0, p1, self.gates, self.cfg.quad.radius_m, self.cfg.frame_width_m,
                                  self.cfg.frame_depth_m)
        self.hits += int(hit.any())
        if not passed[0, self.target]:
            return False
        self.passed += 1
        self.gate_times_s.append(float(t))
        if self.passed % len(self.track) == 0:
            self.lap_times_s.append(float(t) - self._lap_start)
            self._lap_start = float(t)
        return True


class RacerPilot:
    """The exported racer (:class:`~planner_pkg.racing.export.LoadedRacer`) flying ``track``."""

    def __init__(self, racer, track: Track, start_t: float = 0.0):
        self.racer = racer
        self.cfg = racer.config.env
        self.progress = GateProgress(track, self.cfg, start_t)
        self.prev_action = np.zeros((1, ACTION_DIM))

    def observation(self, position, velocity, rotation, body_rates) -> np.ndarray:
        """(1, obs_dim) the policy's observation: position, velocity (3,) world ENU; rotation
        (3, 3) body FLU -> world; body rates (3,) rad/s."""
        target = np.array([self.progress.target])
        return build_observation(np.asarray(position, dtype=np.float64).reshape(1, 3),
                                 np.asarray(velocity, dtype=np.float64).reshape(1, 3),
                                 np.asarray(rotation, dtype=np.float64).reshape(1, 3, 3),
                                 np.asarray(body_rates, dtype=np.float64).reshape(1, 3),
                                 self.progress.gates, target, self.prev_action, self.cfg.gate_obs)

    def act(self, position, velocity, rotation, body_rates) -> Tuple[float, np.ndarray, np.ndarray]:
        """(collective thrust m/s^2, body rates (3,) rad/s, action (4,)) for this state.

        ValueError when the network's output is not finite (the previous action is kept)."""
        action = np.asarray(self.racer.act(self.observation(position, velocity, rotation, body_rates)),
                            dtype=np.float64).reshape(1, ACTION_DIM)
        if not np.isfinite(action).all():
            raise ValueError(f"the racing network gave a non-finite action {action.ravel().tolist()}")
        action = np.clip(action, -1.0, 1.0)
        self.prev_action = action
        thrust, rates = quad.commands_from_actions(action, self.cfg.quad)
        return float(thrust[0]), rates[0].copy(), action[0].copy()


def start_pose(track: Track) -> Tuple[np.ndarray, float]:
    """(start position (3,) m, heading rad): the environment's evaluation start, facing gate 0."""
    c, _, _, _ = track.arrays()
    p = np.asarray(track.start, dtype=np.float64)
    to_gate = c[0] - p
    return p, math.atan2(to_gate[1], to_gate[0])


def track_world(track: Track, env_cfg, margin_m: Optional[float] = None) -> dict:
    """The gate frames as boxes in a world mapping (``planner_pkg.world.io`` format).

    Each frame is the environment's square ring (``frame_width_m`` wide around the opening,
    ``frame_depth_m`` thick along the normal) as four boxes; the bounds are the environment's
    flight volume (the gates' box grown by ``bounds_margin_m``, from the ground to ``ceiling_m``).
    """
    margin = env_cfg.bounds_margin_m if margin_m is None else float(margin_m)
    width, depth = env_cfg.frame_width_m, env_cfg.frame_depth_m
    obstacles = []
    for g in track.gates:
        c = np.asarray(g.center, dtype=np.float64)
        lat = g.lateral
        half = g.size / 2.0
        outer = 2.0 * (half + width)
        off = half + width / 2.0
        bar = [depth, outer, width]      # along normal, along lateral, vertical (box yaw = gate yaw)
        post = [depth, width, outer]
        for centre, size in ((c + [0.0, 0.0, off], bar), (c - [0.0, 0.0, off], bar),
                             (c + off * lat, post), (c - off * lat, post)):
            obstacles.append({"type": "box", "center": [round(float(v), 6) for v in centre],
                              "size": [float(v) for v in size], "yaw": float(g.yaw)})
    c, _, _, _ = track.arrays()
    pts = np.vstack([c, np.asarray(track.start, dtype=np.float64)[None]])
    lo = pts.min(axis=0) - margin
    hi = pts.max(axis=0) + margin
    return {"bounds": {"min": [float(lo[0]), float(lo[1]), 0.0],
                       "max": [float(hi[0]), float(hi[1]), float(max(env_cfg.ceiling_m, hi[2]))]},
            "obstacles": obstacles}
