"""N embedded simulators in one world on one clock, stepped from outside (the swarm_sim node's physics).

Plain Python (no rclpy). Each vehicle is one :class:`~planner_pkg.sim.embedded.EmbeddedSim`
(its own controller, setpoint, odometry and depth camera, seed ``seed + i``); what the swarm
adds, as :class:`~planner_pkg.sim.multi.MultiVehicleRunner` does for the in-process swarm:

* all vehicles advance one dynamics step at a time together, so their clocks never differ;
* each camera sees the *other* vehicles, as balls of their collision radius at their positions
  at the start of the step (the world's raycast, then each ray against those balls);
* two vehicles whose centres come closer than the sum of their radii collide: both are frozen
  (``EmbeddedSim.crash``; a status then reports a collision), the event is logged once per pair;
* the smallest centre distance over all pairs and all steps is kept (``min_separation_m``).
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from planner_pkg.sim.embedded import EmbeddedSim, SimOutputs
from planner_pkg.sim.multi import ray_ball_distances

__all__ = ["SwarmStepper"]


class _SeenWorld:
    """The world as vehicle ``k``'s camera sees it: the obstacles plus the other vehicles' balls."""

    def __init__(self, world, stepper: "SwarmStepper", k: int):
        self._world, self._stepper, self._k = world, stepper, k

    def __getattr__(self, name):
        return getattr(self._world, name)

    def raycast(self, origin, directions, max_range: float):
        out = self._world.raycast(origin, directions, max_range)
        centres = np.delete(self._stepper.centres, self._k, axis=0)
        if centres.shape[0]:
            d = np.asarray(directions, dtype=np.float64).reshape(-1, 3)
            d = d / np.linalg.norm(d, axis=1, keepdims=True)
            o = np.asarray(origin, dtype=np.float64).reshape(-1, 3)[0]
            balls = ray_ball_distances(o, d, centres, self._stepper.radius_m)
            balls[balls > max_range] = np.inf
            out = np.minimum(out, balls.reshape(np.shape(out)))
        return out


class SwarmStepper:
    """The vehicles of a swarm (see the module docstring). ``starts`` (N, 3) m, ``yaws`` (N,) rad;
    the keyword arguments are :class:`EmbeddedSim`'s and apply to every vehicle (``seed`` + i)."""

    def __init__(self, world, starts, yaws: Optional[Sequence[float]] = None, *, seed: int = 0, **sim_kwargs):
        starts = np.asarray(starts, dtype=np.float64).reshape(-1, 3)
        n = starts.shape[0]
        if n < 1:
            raise ValueError("a swarm needs at least one vehicle")
        yaws = [0.0] * n if yaws is None else [float(y) for y in yaws]
        if len(yaws) != n:
            raise ValueError(f"{n} vehicles need {n} start headings, got {len(yaws)}")
        self.world = world
        self.sims = [EmbeddedSim(world, starts[k], yaws[k], seed=seed + k, **sim_kwargs) for k in range(n)]
        self.radius_m = float(self.sims[0].radius_m)
        for k, sim in enumerate(self.sims):
            sim.world = _SeenWorld(world, self, k)  # the camera renders this; collisions use the world itself
        self.centres = starts.copy()
        self.min_separation_m = math.inf
        self.min_separation_pair: Optional[Tuple[int, int]] = None
        self.min_separation_time_s: Optional[float] = None
        self.contacts: List[tuple] = []  # (t, a, b, distance) of each drone-drone collision
        self.drone_collided = [False] * n
        self._touching: set = set()
        self._iu = np.triu_indices(n, 1)

    def __len__(self) -> int:
        return len(self.sims)

    @property
    def t(self) -> float:
        """Sim time, s: whole steps (a frozen EmbeddedSim's own ``t`` trails its steps by one)."""
        return self.sims[0].steps * self.sims[0].dt

    @property
    def dt(self) -> float:
        return self.sims[0].dt

    def steps_until(self, t: float) -> int:
        return self.sims[0].steps_until(t)

    def positions(self) -> np.ndarray:
        return np.array([sim.state().position for sim in self.sims])

    def advance_steps(self, n: int) -> List[SimOutputs]:
        """Advance every vehicle by ``n`` dynamics steps; what each one's sensors produced."""
        outs = [SimOutputs() for _ in self.sims]
        for _ in range(max(int(n), 0)):
            self.centres = self.positions()
            self._check_contacts(outs)
            for sim, out in zip(self.sims, outs):
                o = sim.advance_steps(1)
                out.odometry += o.odometry
                out.frames += o.frames
                out.events += o.events
        self.centres = self.positions()
        return outs

    def _check_contacts(self, outs: List[SimOutputs]) -> None:
        if len(self.sims) < 2:
            return
        p = self.centres
        diff = p[:, None, :] - p[None, :, :]
        dist = np.sqrt((diff * diff).sum(axis=2))
        pair = dist[self._iu]
        j = int(np.argmin(pair))
        t = self.t
        if pair[j] < self.min_separation_m:
            self.min_separation_m = float(pair[j])
            self.min_separation_pair = (int(self._iu[0][j]), int(self._iu[1][j]))
            self.min_separation_time_s = t
        touch = 2.0 * self.radius_m
        for a, b in zip(*np.nonzero(np.triu(dist < touch, 1))):
            a, b = int(a), int(b)
            if (a, b) in self._touching:
                continue
            self._touching.add((a, b))
            d = float(dist[a, b])
            self.contacts.append((t, a, b, d))
            for k, other in ((a, b), (b, a)):
                self.drone_collided[k] = True
                where = [round(float(v), 3) for v in p[k]]
                # worded like EmbeddedSim's own collisions, which a mission judge reads from the status
                reason = f"collision at t={t:.3f} s at {where} with drone {other} (centres {d:.3f} m apart)"
                if self.sims[k].crash(reason):
                    outs[k].events.append(reason + "; vehicle frozen")
