"""EGO-Swarm: decentralised multi-drone planning by broadcast trajectories (Zhou et al., ICRA 2021).

Each drone runs its own :class:`~planner_pkg.planning.ego_planner.EgoPlanner`; drones coordinate
only through the B-splines they broadcast. This module is the ROS-free part of it:

* :class:`SwarmConfig`: the swarm parameters that are not cost weights (the weights are
  ``CostWeights.swarm`` / ``terminal`` / ``swarm_clearance_m`` / ``swarm_z_scale``, beside the
  other terms' weights in :mod:`planner_pkg.planning.costs`).
* :class:`SwarmTrajectoryTable`: the latest broadcast B-spline per drone id with its start time
  and receive time (one table per drone; a transport, in-process or ROS, fills it).
  A broadcast older than ``timeout_s`` is *stale*: its drone is no longer predicted along the
  trajectory (it is dropped from the moving-obstacle term) but treated as a static obstacle
  occupying the rest of its last known trajectory (from when the broadcasts stopped to its end,
  where the trajectory server holds it: a drone whose planner died hovers there).
* :class:`SwarmPlanContext` (built by :meth:`SwarmView.plan_context` for one plan): the other
  drones' positions at the times of the plan's curve samples, and :meth:`SwarmPlanContext.kernel`,
  EGO-Swarm's reciprocal-avoidance cost plus its terminal cost, value and hand-derived gradient,
  evaluated inside the optimiser's one fused :class:`~planner_pkg.planning.costs.TotalCost`
  node. With another drone near, the last three control points are free (EGO-Swarm: the end of
  a plan may have to give way) and the terminal cost pulls the curve's end to the local target.
* :meth:`SwarmView.collision_time`: the check of a trajectory against the others before it is
  committed, and every tick while it is flown.
* :class:`LocalBroadcast` (an in-process bus for the embedded simulator and tests, with fault
  injection: a muted drone's broadcasts are lost) and :class:`SwarmAgent` (one drone: an
  EgoPlanner that broadcasts its trajectory every tick and masks the other drones out of its
  depth images, so they are avoided as predicted trajectories rather than as map voxels).

Swarm cost, per curve sample ``P_k`` (every knot and segment midpoint of the plan, at its time
``t_k``) and other drone ``j`` at its broadcast position ``O_j(t_k)`` (its trajectory clamped to
its ends): ``e = diag(1, 1, z_scale) (P_k - O_j(t_k))``, ``c = C - |e|`` and the cost
``sum max(c, 0)^3`` (EGO-Swarm's cubic; ``C`` the clearance between centres, z counted by
``z_scale`` = half, so drones keep twice the distance vertically: downwash). A stale drone counts
at its tube point nearest to ``P_k``. Terminal cost: ``|P(t_end) - target|^2``.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from planner_pkg.config_schema import Config, Schema, setting
from planner_pkg.planning.bspline import UniformBSpline, fit_cubic
from planner_pkg.planning.costs import CostWeights, _KernelFunction

__all__ = ["SwarmConfig", "SwarmTrajectory", "SwarmTrajectoryTable", "SwarmView", "SwarmPlanContext",
           "LocalBroadcast", "SwarmAgent", "SwarmCost", "swarm_kernel", "broadcast_spline", "curve_samples"]

logger = logging.getLogger(__name__)

_TINY = 1e-9
_SCHEMA = Schema(sep=" ")
#: longest broadcast trajectory, s (a longer one is cut: nobody plans that far ahead)
MAX_BROADCAST_S = 30.0


@dataclass(frozen=True)
class SwarmConfig(Config, schema=_SCHEMA, prefix="SwarmConfig."):
    """Swarm parameters of one drone (the cost weights are in ``CostWeights``)."""

    timeout_s: float = setting(1.0, range=(0.0, 60.0), low_open=True,
                               description="a broadcast older than this is stale: its drone becomes a static obstacle "
                                           "along the rest of its last known trajectory, s")
    check_distance_m: float = setting(0.6, range=(0.0, 10.0), low_open=True,
                                      description="a trajectory passing closer than this (ellipsoidal, centres) to "
                                                  "another drone's is refused / replanned, m")
    check_step_s: float = setting(0.05, range=(0.001, 1.0), description="time step of that check, s")
    mask_radius_m: float = setting(0.45, range=(0.0, 5.0),
                                   description="depth pixels within this of a drone whose broadcast is fresh are "
                                               "masked out of the map (0 = none: drones become map voxels), m")
    influence_m: float = setting(12.0, range=(0.0, 1000.0), low_open=True,
                                 description="other drones farther than this from every point of a plan's control "
                                             "polygon are left out of its cost, m")
    tube_step_s: float = setting(0.1, range=(0.01, 1.0), description="sampling of a stale drone's tube, s")


# ---------------------------------------------------------------------------------------------
# broadcasts
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SwarmTrajectory:
    """One drone's broadcast: a cubic B-spline starting at absolute time ``t_start`` (s, the shared
    clock), received at ``received_t`` (s, the receiver's clock)."""

    drone_id: int
    spline: UniformBSpline
    t_start: float
    received_t: float

    @property
    def t_end(self) -> float:
        return self.t_start + self.spline.duration

    def positions(self, t) -> np.ndarray:
        """(T, 3) m at absolute times ``t`` (T,): clamped to the trajectory's start and end."""
        return self.spline.evaluate(np.asarray(t, dtype=np.float64) - self.t_start)


class SwarmTrajectoryTable:
    """The latest trajectory per drone id as one drone knows them (see the module docstring).

    ``update`` refuses a malformed broadcast (logged, counted in ``rejected``; never raises) and
    keeps the newer of two broadcasts from the same drone (by ``t_start``; an equal start with a
    newer receive time replaces it, as a re-broadcast)."""

    def __init__(self, timeout_s: float = SwarmConfig().timeout_s):
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"swarm timeout must be positive, got {timeout_s!r} s")
        self.timeout_s = float(timeout_s)
        self._latest: Dict[int, SwarmTrajectory] = {}
        self.rejected = 0

    def update(self, drone_id: int, control_points, dt: float, t_start: float, received_t: float) -> bool:
        try:
            if isinstance(drone_id, bool) or int(drone_id) != drone_id or drone_id < 0:
                raise ValueError(f"drone id must be an int >= 0, got {drone_id!r}")
            if not (math.isfinite(t_start) and math.isfinite(received_t)):
                raise ValueError("start and receive times must be finite")
            spline = UniformBSpline(control_points, float(dt), 3)
            if spline.control_points.shape[1] != 3:
                raise ValueError(f"control points must be (N, 3), got {spline.control_points.shape}")
            if spline.duration > MAX_BROADCAST_S:
                raise ValueError(f"trajectory of {spline.duration:.1f} s is longer than {MAX_BROADCAST_S:g} s")
        except (ValueError, TypeError) as exc:
            self.rejected += 1
            if self.rejected <= 3:
                logger.warning("swarm broadcast from drone %r refused: %s", drone_id, exc)
            return False
        drone_id = int(drone_id)
        old = self._latest.get(drone_id)
        if old is not None and (t_start < old.t_start or (t_start == old.t_start and received_t < old.received_t)):
            return False  # an older broadcast arriving late
        self._latest[drone_id] = SwarmTrajectory(drone_id, spline, float(t_start), float(received_t))
        return True

    def remove(self, drone_id: int) -> None:
        self._latest.pop(int(drone_id), None)

    def __len__(self) -> int:
        return len(self._latest)

    def ids(self) -> List[int]:
        return sorted(self._latest)

    def get(self, drone_id: int) -> Optional[SwarmTrajectory]:
        return self._latest.get(int(drone_id))

    def split(self, now: float, exclude: Optional[int] = None) -> Tuple[List[SwarmTrajectory], List[SwarmTrajectory]]:
        """(fresh, stale) trajectories at time ``now`` s, without drone ``exclude``."""
        fresh, stale = [], []
        for k in sorted(self._latest):
            if k == exclude:
                continue
            tr = self._latest[k]
            (fresh if now - tr.received_t <= self.timeout_s else stale).append(tr)
        return fresh, stale


def broadcast_spline(trajectory, t_now: float, dt: float = 0.1,
                     max_s: float = 10.0) -> Optional[Tuple[UniformBSpline, float]]:
    """What to broadcast for ``trajectory`` at ``t_now``: ``(spline, t_start)``.

    A trajectory with a ``spline`` and ``t_start`` whose time is the spline's own (a
    BsplineTrajectory) is sent as is; any other with ``state(t) -> (p, v, a)`` (a stop-limited
    or braking trajectory) is sampled from ``t_now`` to its end (at most ``max_s``) every ``dt``
    and fitted with a cubic B-spline (exact boundary states). None when there is nothing usable.
    """
    if trajectory is None:
        return None
    spline = getattr(trajectory, "spline", None)
    if isinstance(spline, UniformBSpline) and type(trajectory).__name__ == "BsplineTrajectory":
        if spline.duration <= MAX_BROADCAST_S:
            return spline, float(trajectory.t_start)
    state = getattr(trajectory, "state", None)
    if state is None:
        return None
    t_end = float(getattr(trajectory, "t_end", t_now))
    span = min(max(t_end - t_now, 0.0), max_s)
    k = max(4, int(math.ceil(span / dt)) + 1)
    ts = t_now + np.arange(k) * dt
    first, last = state(float(ts[0])), state(float(ts[-1]))
    positions = getattr(trajectory, "positions", None)  # vectorised where the trajectory has it
    pts = np.asarray(positions(ts)) if positions is not None else np.array([state(float(t))[0] for t in ts])
    return fit_cubic(pts, dt, first[1], last[1], first[2], last[2]), float(t_now)


def hover_spline(position, dt: float = 0.5) -> UniformBSpline:
    """A cubic B-spline that stays at ``position`` (a hovering drone's broadcast)."""
    return UniformBSpline(np.repeat(np.asarray(position, dtype=np.float64).reshape(1, 3), 4, axis=0), dt)


# ---------------------------------------------------------------------------------------------
# the cost
# ---------------------------------------------------------------------------------------------
def curve_samples(n: int) -> Tuple[np.ndarray, np.ndarray]:
    """(2 (N-3) + 1, N) matrix mapping a uniform cubic B-spline's control points to its points at
    every knot and segment midpoint, and those points' times in knot intervals (0, 0.5, 1, ...)."""
    segs = n - 3
    m = np.zeros((2 * segs + 1, n))
    for k in range(segs):
        m[2 * k, k:k + 3] = (1.0 / 6.0, 4.0 / 6.0, 1.0 / 6.0)
        m[2 * k + 1, k:k + 4] = (1.0 / 48.0, 23.0 / 48.0, 23.0 / 48.0, 1.0 / 48.0)
    m[2 * segs, segs:segs + 3] = (1.0 / 6.0, 4.0 / 6.0, 1.0 / 6.0)
    return m, 0.5 * np.arange(2 * segs + 1)


class SwarmPlanContext:
    """The swarm data of one optimisation (a plan of ``n`` control points with knot interval ``dt``
    starting at absolute time ``t0``): the other drones' positions at the plan's sample times
    (``moving``, (J, K, 3) m), the stale drones' tubes (list of (S_j, 3) m), the terminal target
    (3,) m or None. :meth:`kernel` gives the weighted swarm + terminal cost and its gradient."""

    def __init__(self, n: int, dt: float, t0: float, moving: np.ndarray, tubes: Sequence[np.ndarray],
                 target: Optional[np.ndarray], ids: Sequence[int] = ()):
        self.n, self.dt, self.t0 = int(n), float(dt), float(t0)
        self.samples, self.sample_s = curve_samples(self.n)
        self.moving = np.asarray(moving, dtype=np.float64).reshape(-1, self.samples.shape[0], 3)
        self.tubes = [np.asarray(t, dtype=np.float64).reshape(-1, 3) for t in tubes if len(t)]
        self.target = None if target is None else np.asarray(target, dtype=np.float64).reshape(3)
        self.ids = tuple(ids)

    @property
    def active(self) -> bool:
        """True when another drone takes part (then the end of the plan is free)."""
        return self.moving.shape[0] > 0 or len(self.tubes) > 0

    @property
    def free_end(self) -> bool:
        return self.active and self.target is not None

    def kernel(self, q: np.ndarray, weights: CostWeights) -> Tuple[float, np.ndarray]:
        """``weights.swarm`` x swarm cost + ``weights.terminal`` x terminal cost (with a free end)
        and the gradient (N, 3)."""
        value, grad = 0.0, np.zeros_like(q)
        if weights.swarm > 0 and self.active:
            v, g = swarm_kernel(q, self, weights)
            value += weights.swarm * v
            grad += weights.swarm * g
        if self.free_end and weights.terminal > 0:
            v, g = terminal_kernel(q, self)
            value += weights.terminal * v
            grad += weights.terminal * g
        return value, grad


def swarm_kernel(q: np.ndarray, ctx: SwarmPlanContext, weights: CostWeights) -> Tuple[float, np.ndarray]:
    """Unweighted swarm cost ``sum max(C - |e|, 0)^3`` over samples and drones (see the module
    docstring), and its gradient (N, 3)."""
    pts = ctx.samples @ q  # (K, 3)
    scale = np.array([1.0, 1.0, weights.swarm_z_scale])
    clearance = weights.swarm_clearance_m
    # the others at the same times: (J, K, 3); stale ones at their nearest tube point
    others = [ctx.moving] if ctx.moving.shape[0] else []
    for tube in ctx.tubes:
        d2 = ((((pts[:, None, :] - tube[None, :, :]) * scale) ** 2).sum(axis=2))  # (K, S)
        others.append(tube[np.argmin(d2, axis=1)][None])
    if not others:
        return 0.0, np.zeros_like(q)
    o = np.concatenate(others, axis=0)
    e = (pts[None] - o) * scale  # (J, K, 3)
    dist = np.sqrt((e * e).sum(axis=2))
    c = np.maximum(clearance - dist, 0.0)
    if not c.any():
        return 0.0, np.zeros_like(q)
    value = float((c * c * c).sum())
    # d(c^3)/dP = -3 c^2 (e / |e|) * scale
    coef = -3.0 * c * c / np.maximum(dist, _TINY)
    gp = (coef[..., None] * e * scale).sum(axis=0)  # (K, 3)
    return value, ctx.samples.T @ gp


def terminal_kernel(q: np.ndarray, ctx: SwarmPlanContext) -> Tuple[float, np.ndarray]:
    """``|P(t_end) - target|^2`` (the curve's last knot point) and its gradient (N, 3)."""
    d = (q[-3] + 4.0 * q[-2] + q[-1]) / 6.0 - ctx.target
    g = np.zeros_like(q)
    g[-3], g[-2], g[-1] = d / 3.0, 4.0 * d / 3.0, d / 3.0
    return float(d @ d), g


class SwarmCost(_KernelFunction):
    """The weighted swarm + terminal terms as one fused autograd_core node (``problem.swarm``
    must be a :class:`SwarmPlanContext`); the optimiser gets them inside TotalCost."""

    kernel = staticmethod(lambda q, problem: problem.swarm.kernel(q, problem.weights))


# ---------------------------------------------------------------------------------------------
# one drone's view of the swarm
# ---------------------------------------------------------------------------------------------
class SwarmView:
    """What drone ``drone_id`` knows of the others: its :class:`SwarmTrajectoryTable` and config."""

    def __init__(self, drone_id: int, table: SwarmTrajectoryTable, config: SwarmConfig = SwarmConfig(),
                 weights: CostWeights = CostWeights()):
        self.drone_id = int(drone_id)
        self.table = table
        self.config = config
        self.weights = weights

    def _tube(self, tr: SwarmTrajectory) -> np.ndarray:
        """Where a stale drone may be: its last trajectory from its last receive time to the end."""
        t0 = min(tr.received_t, tr.t_end)
        k = max(2, int(math.ceil((tr.t_end - t0) / self.config.tube_step_s)) + 1)
        return tr.positions(np.linspace(t0, tr.t_end, k))

    def plan_context(self, n: int, dt: float, t0: float, target, q_hint: Optional[np.ndarray] = None,
                     now: Optional[float] = None) -> Optional[SwarmPlanContext]:
        """The context of one plan (``n`` control points, knot ``dt``, from ``t0``), or None when
        no other drone is within ``influence_m`` of ``q_hint`` (the initial control polygon)."""
        now = t0 if now is None else now
        fresh, stale = self.table.split(now, exclude=self.drone_id)
        if not fresh and not stale:
            return None
        samples, s = curve_samples(n)
        times = t0 + s * dt
        moving, ids = [], []
        reach = self.config.influence_m
        lo = hi = None
        if q_hint is not None:
            lo, hi = q_hint.min(axis=0) - reach, q_hint.max(axis=0) + reach
        for tr in fresh:
            p = tr.positions(times)
            if lo is not None and not ((p >= lo) & (p <= hi)).all(axis=1).any():
                continue
            moving.append(p)
            ids.append(tr.drone_id)
        tubes = []
        for tr in stale:
            tube = self._tube(tr)
            if lo is not None and not ((tube >= lo) & (tube <= hi)).all(axis=1).any():
                continue
            tubes.append(tube)
            ids.append(tr.drone_id)
        if not moving and not tubes:
            return None
        m = np.stack(moving) if moving else np.zeros((0, samples.shape[0], 3))
        return SwarmPlanContext(n, dt, t0, m, tubes, target, ids)

    def plan_maker(self, t_now: float, target):
        """``(n, dt, q) -> SwarmPlanContext | None`` for one plan from ``t_now`` to ``target`` (what
        the optimiser calls for each problem it builds; cached per (n, dt))."""
        cache: Dict[Tuple[int, float], Optional[SwarmPlanContext]] = {}
        target = np.asarray(target, dtype=np.float64)

        def make(n, dt, q):
            key = (int(n), float(dt))
            if key not in cache:
                cache[key] = self.plan_context(n, dt, t_now, target, q_hint=q)
            return cache[key]

        return make

    def collision_time(self, trajectory, t_from: float, horizon_s: float) -> Optional[Tuple[float, int, float]]:
        """First ``(t, drone id, distance)`` in ``[t_from, t_from + horizon_s]`` where ``trajectory``
        (``state(t)``) passes within ``check_distance_m`` (ellipsoidal) of another drone's broadcast
        (a stale one: anywhere on its tube); None if clear."""
        fresh, stale = self.table.split(t_from, exclude=self.drone_id)
        if not fresh and not stale:
            return None
        c = self.config
        k = max(2, int(math.ceil(horizon_s / c.check_step_s)) + 1)
        ts = t_from + np.arange(k) * c.check_step_s
        own = _positions(trajectory, ts)
        scale = np.array([1.0, 1.0, self.weights.swarm_z_scale])
        limit = c.check_distance_m
        best = None
        for tr in fresh:
            d = np.sqrt(((((own - tr.positions(ts)) * scale) ** 2).sum(axis=1)))
            bad = np.nonzero(d < limit)[0]
            if bad.shape[0] and (best is None or ts[bad[0]] < best[0]):
                best = (float(ts[bad[0]]), tr.drone_id, float(d[bad[0]]))
        for tr in stale:
            tube = self._tube(tr)
            d = np.sqrt(((((own[:, None] - tube[None]) * scale) ** 2).sum(axis=2))).min(axis=1)
            bad = np.nonzero(d < limit)[0]
            if bad.shape[0] and (best is None or ts[bad[0]] < best[0]):
                best = (float(ts[bad[0]]), tr.drone_id, float(d[bad[0]]))
        return best

    def known_positions(self, t: float) -> np.ndarray:
        """(J, 3) m: where the drones with a fresh broadcast are at ``t`` (for depth masking)."""
        fresh, _ = self.table.split(t, exclude=self.drone_id)
        if not fresh:
            return np.zeros((0, 3))
        return np.stack([tr.positions(np.array([t]))[0] for tr in fresh])


def _positions(trajectory, ts: np.ndarray) -> np.ndarray:
    """(T, 3) positions of any trajectory at absolute times ``ts``."""
    spline = getattr(trajectory, "spline", None)
    if type(trajectory).__name__ == "BsplineTrajectory" and isinstance(spline, UniformBSpline):
        return spline.evaluate(np.maximum(ts - trajectory.t_start, 0.0))
    positions = getattr(trajectory, "positions", None)
    if positions is not None:
        return np.asarray(positions(ts))
    return np.array([trajectory.state(float(t))[0] for t in ts])


# ---------------------------------------------------------------------------------------------
# transport (in-process) and one drone
# ---------------------------------------------------------------------------------------------
class LocalBroadcast:
    """In-process trajectory broadcast: every published trajectory goes to every other drone's
    table, received at the publish time (one clock). ``mute(drone_id, from_t)`` loses that drone's
    broadcasts from ``from_t`` on (its planner keeps flying: the stale-broadcast fault)."""

    def __init__(self, n_drones: int, timeout_s: float = SwarmConfig().timeout_s):
        if not (isinstance(n_drones, int) and n_drones >= 1):
            raise ValueError(f"need at least one drone, got {n_drones!r}")
        self.tables = [SwarmTrajectoryTable(timeout_s) for _ in range(n_drones)]
        self._muted: Dict[int, float] = {}
        self.sent = 0
        self.lost = 0

    def mute(self, drone_id: int, from_t: float) -> None:
        self._muted[int(drone_id)] = float(from_t)

    def publish(self, drone_id: int, spline: UniformBSpline, t_start: float, t_now: float) -> None:
        if t_now >= self._muted.get(drone_id, math.inf):
            self.lost += 1
            return
        self.sent += 1
        for k, table in enumerate(self.tables):
            if k != drone_id:
                table.update(drone_id, spline.control_points, spline.dt, t_start, t_now)


class SwarmAgent:
    """One drone of the swarm behind the runner's Planner protocol: an EgoPlanner that knows the
    others through ``bus.tables[drone_id]``, broadcasts its current trajectory (a hover at its
    position when it has none) after every tick, and masks the drones it knows (fresh broadcasts)
    out of its depth images before they reach the map (``SwarmConfig.mask_radius_m``)."""

    def __init__(self, planner, drone_id: int, bus: LocalBroadcast):
        self.planner = planner
        self.drone_id = int(drone_id)
        self.bus = bus
        self.rate_hz = planner.rate_hz
        self.name = f"{getattr(planner, 'name', 'planner')}-swarm"
        cfg = planner.config
        self.view = SwarmView(self.drone_id, bus.tables[self.drone_id], cfg.swarm, cfg.optimizer.weights)
        self._frame_in = None
        self._frame_out = None
        self.masked_pixels = 0
        # CPU time (this thread) of the ticks that planned, ms: unlike the planner's wall-clock
        # replan_ms it does not count the time other processes held the CPU
        self.plan_cpu_ms: List[float] = []

    def __getattr__(self, name):
        # what a node shows of its planner (map, manager, fsm, guide path) is the wrapped planner's
        if name == "planner":
            raise AttributeError(name)
        return getattr(self.planner, name)

    @property
    def stats(self):
        return self.planner.stats

    @property
    def events(self):
        return self.planner.events

    def reset(self, start, goal) -> None:
        self.planner.reset(start, goal)
        self.planner.attach_swarm(self.view)
        self.bus.publish(self.drone_id, hover_spline(start), 0.0, 0.0)

    def _masked(self, frame):
        if frame is None or frame is self._frame_in:
            return self._frame_out if frame is not None else None
        out = frame
        r = self.view.config.mask_radius_m
        if r > 0 and frame.depth is not None and frame.intrinsics is not None:
            others = self.view.known_positions(frame.t)
            if others.shape[0]:
                out = mask_depth(frame, others, r)
                self.masked_pixels += int(np.isnan(out.depth).sum() - np.isnan(frame.depth).sum())
        elif r > 0 and frame.points is not None and len(frame.points):  # a point cloud only (ROS `cloud`)
            others = self.view.known_positions(frame.t)
            if others.shape[0]:
                keep = ~_near(frame.points, others, r)
                if not keep.all():
                    self.masked_pixels += int((~keep).sum())
                    out = replace(frame, points=frame.points[keep])
        self._frame_in, self._frame_out = frame, out
        return out

    def observe(self, frame) -> None:
        self.planner.observe(self._masked(frame))

    def update(self, state, sensors):
        frame = self._masked(sensors)
        plans, c0 = len(self.planner.stats.replan_ms), time.thread_time()
        out = self.planner.update(state, frame)
        if len(self.planner.stats.replan_ms) > plans:
            self.plan_cpu_ms.append(1e3 * (time.thread_time() - c0))
        msg = broadcast_spline(self.planner.trajectory, state.t)
        if msg is None:
            msg = (hover_spline(state.position), state.t)
        self.bus.publish(self.drone_id, msg[0], msg[1], state.t)
        return out


def mask_depth(frame, centres: np.ndarray, radius_m: float):
    """``frame`` with the depth pixels whose point lies within ``radius_m`` of any of ``centres``
    (J, 3) m set to NaN (invalid: neither obstacle nor free space), points likewise dropped."""
    from planner_pkg.types import quaternion_to_matrix

    depth = np.array(frame.depth, dtype=np.float32)
    rays = frame.intrinsics.rays().reshape(-1, 3)
    d = depth.reshape(-1).astype(np.float64)
    finite = np.isfinite(d)
    if not finite.any():
        return frame
    rot = quaternion_to_matrix(frame.camera_orientation)
    pts = (rays[finite] * d[finite, None]) @ rot.T + np.asarray(frame.camera_position)
    near = _near(pts, centres, radius_m)
    if not near.any():
        return frame
    idx = np.nonzero(finite)[0][near]
    flat = depth.reshape(-1)
    flat[idx] = np.nan
    points = frame.points
    if points is not None:
        points = points[~_near(points, centres, radius_m)]
    return replace(frame, depth=flat.reshape(depth.shape), points=points)


def _near(points, centres, radius_m: float) -> np.ndarray:
    """(M,) bool: which of ``points`` (M, 3) lie within ``radius_m`` of any of ``centres`` (J, 3) m."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    near = np.zeros(p.shape[0], dtype=bool)
    r2 = radius_m * radius_m
    for c in np.asarray(centres, dtype=np.float64).reshape(-1, 3):  # per drone: no (M, J, 3) temporary
        near |= ((p[:, 0] - c[0]) ** 2 + (p[:, 1] - c[1]) ** 2 + (p[:, 2] - c[2]) ** 2) <= r2
    return near
