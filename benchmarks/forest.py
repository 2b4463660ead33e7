"""Forest benchmark: the EGO planner, the learned ``policy`` and the ``direct`` baseline in N seeded random forests.

Each episode is one closed-loop flight in the embedded simulator (rigid-body quadrotor, SE(3)
controller, 64x48 depth camera at 30 Hz feeding the planner; the planner never sees the world):
a 50 x 20 m forest of vertical trunks (radius 0.25-0.5 m, 4-5 m tall) at 0.2 trunks/m^2, from
(-20, 0, 1) to (20, 0, 1) (40 m), trunks kept 2 m clear of start and goal. Seed k gives the same
forest for every planner and speed.

Printed per planner and max_vel:
- the acceleration limit is min(7, max(3, 1.5 max_vel)) m/s^2 (3 at 2 m/s, 6 at 4 m/s, 7 at 6 m/s;
  ego_config.speed_scaled_max_acc) unless ``--max-acc`` says otherwise;
- success: reached the goal (0.5 m) with no contact (vehicle ball of 0.19 m never touched a surface);
- mean speed (path length / time) and path-length ratio to the 40 m straight line, on successes;
- min clearance: the smallest ball-to-surface gap over successful flights (and their median);
- peak: the highest flown speed over all episodes, and the highest *commanded* speed (the
  reference the controller was given, sampled at the control rate): peak flown / max_vel above
  peak commanded / max_vel is tracking overshoot, a commanded peak above 1 is the planner's (the
  policy commands accelerations, not a speed: "-");
- update() p50 / p95: wall time of every planner.update call (what the runner reports as
  replan_ms; includes the ticks that only check the trajectory), pooled over all episodes: the
  compute per step, comparable between planners (the policy runs at its own rate);
- replan p50 / p95: wall time of the ticks that actually planned (EGO only); cpu p50 / p95: their
  CPU time (the planning thread's ``time.thread_time``: on a loaded machine the wall time also
  counts the time other processes held the core);
- it p95: the iteration budget those plans charged (all initial guesses, both optimiser stages:
  L-BFGS iterations plus guide-path A* expansions / guide_expansions_per_iteration), p95: the
  same compute counted independently of the machine and its load (EGO only);
- map fuse p50: wall time to fuse one depth frame into the map (EGO only; runs in observe()).

``--workers N [--ray-address local|auto|ray://host:port]`` spreads the episodes over Ray actors
(planner_pkg.pool); each episode depends only on its seed and case, so the outcomes equal the
one-worker run's (test/planner_pkg/policy/test_policy_eval_pool.py), EGO's aside: its wall-clock safety nets
make it load-dependent at any worker count (see --time-scale).

A/B on the same worlds in one run: ``--ego-variant LABEL KEY=VALUE ...`` (repeatable) adds a row
``ego[LABEL]`` flown with those :class:`EgoConfig` overrides (dotted keys, YAML values, e.g.
``--ego-variant old optimizer.clearance_margin_m=0.3``) beside the default ``ego`` row; each
seed is flown by every EGO variant before the next seed, so a change in the machine's load
hits all of them alike.

``--ego-truth-map`` adds, for each EGO row, a row ``ego[truth map]`` (``ego[LABEL, truth map]``) flown with the same
config whose map is the forest itself (:class:`TruthMapPlanner`): every voxel observed, the
trunks' voxels occupied, re-set whenever the map's window moves (the camera's frames are fused
on top as usual). It is the planner's own ceiling on these worlds: what it loses to what its
camera has not seen (late trunks, occlusion, the stop before never-observed space) is the
difference to its twin row.

``--camera-px W H`` flies every EGO and direct row with a W x H depth image instead of the default
64 x 48 (the policy's input; same 90 deg field of view and range), e.g. 128 x 96: what a finer
deployment camera changes (a trunk's edge toward the path is found up to a pixel, ~7 cm at 3 m,
sooner). The policy is refused with it.

Never pass/fail on time (machines differ). Run on one core for comparable numbers:
``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/forest.py --episodes 100``.
On a loaded machine EGO's wall-clock safety nets (optimiser, A*, retry time limits) fire long
before its deterministic iteration budgets and the outcome measures the load: ``--time-scale K``
widens them K times (:meth:`EgoConfig.with_time_limits_scaled`, what a lockstep simulation
does), so the deterministic budgets decide; the replan times are then still measured as flown.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from planner_pkg.planning.direct import DirectConfig, DirectPlanner  # noqa: E402
from planner_pkg.planning.ego_planner import EgoConfig, EgoPlanner  # noqa: E402
from planner_pkg.planning.ego_config import speed_scaled_max_acc  # noqa: E402
from planner_pkg.sim import ControllerGains, RunnerConfig, run_episode  # noqa: E402
from planner_pkg.sim.params import CameraParams  # noqa: E402
from planner_pkg.world import Cylinder, generate_world  # noqa: E402

START = (-20.0, 0.0, 1.0)
GOAL = (20.0, 0.0, 1.0)
STRAIGHT_M = 40.0
# ControllerGains fields settable per run (--drag-feedforward, --jerk-feedforward,
# --max-feedforward-rate, --max-tilt-deg); None = the default
GAIN_OPTIONS = ("drag_feedforward", "jerk_feedforward", "max_feedforward_rate_rad_s", "max_tilt_rad")
CLEARANCE_TARGET_M = 0.1  # issue 16: successful flights keep this much beyond the vehicle radius
REPLAN_TARGET_MS = 20.0  # issue 16: replan time p95
PLAN_KINDS = ("flight ok", "flight failed", "from rest")
# the replans made while flying (ok + failed): the plans whose time the moving vehicle waits on;
# a plan from rest is made while the vehicle holds its position (take-off, recovery after a stop)
IN_FLIGHT = "in flight"
DENSITY = 0.2  # trunks per m^2 (--density)


def forest_world(seed: int, density: float = DENSITY):
    """The benchmark's forest ``seed``: trunks kept clear of START and GOAL."""
    return generate_world("forest", seed, density=density, start=START, goal=GOAL)


def episode_timeout_s(max_vel: float) -> float:
    """How long an episode at ``max_vel`` may fly: three times the straight line at that speed, +10 s."""
    return 3.0 * STRAIGHT_M / max_vel + 10.0


class _Commanded:
    """A trajectory whose samples' speeds are recorded into ``sink`` (a one-element list: max)."""

    def __init__(self, trajectory, sink):
        self.trajectory = trajectory
        self.sink = sink

    def sample(self, t):
        sp = self.trajectory.sample(t)
        v = sp.velocity
        if np.isfinite(v).all():
            self.sink[0] = max(self.sink[0], float(np.sqrt(v @ v)))
        return sp


class TimedPlanner:
    """Forwards the Planner protocol and records the wall time of every update() call and the
    highest speed the controller was commanded."""

    def __init__(self, planner):
        self.planner = planner
        self.name = getattr(planner, "name", type(planner).__name__)
        self.rate_hz = planner.rate_hz
        self.update_ms = []
        self.commanded_peak = [-np.inf]  # stays -inf for a planner that never commands a velocity
        if hasattr(planner, "observe"):
            self.observe = planner.observe

    def reset(self, start, goal):
        self.planner.reset(start, goal)

    def update(self, state, sensors):
        t0 = time.perf_counter()
        try:
            out = self.planner.update(state, sensors)
        finally:
            self.update_ms.append(1e3 * (time.perf_counter() - t0))
        if out is not None and callable(getattr(out, "sample", None)):
            return _Commanded(out, self.commanded_peak)
        if out is not None and np.isfinite(getattr(out, "velocity", np.full(3, np.nan))).all():
            self.commanded_peak[0] = max(self.commanded_peak[0], float(np.linalg.norm(out.velocity)))
        return out


def true_occupancy(world, grid_map) -> np.ndarray:
    """(nx, ny, nz) bool over ``grid_map``'s window: the voxels whose centre lies inside a trunk
    or within half a voxel of its surface (the voxel a depth ray hitting the surface marks). The
    forest's trunks are vertical cylinders standing on the ground (any other obstacle: ValueError)."""
    res = grid_map.res
    o, d = grid_map.origin, grid_map.dims
    x = (np.arange(d[0]) + o[0] + 0.5) * res
    y = (np.arange(d[1]) + o[1] + 0.5) * res
    z = (np.arange(d[2]) + o[2] + 0.5) * res
    occ = np.zeros(tuple(int(k) for k in d), dtype=bool)
    grow = 0.5 * res
    for ob in world.obstacles:
        if not isinstance(ob, Cylinder):
            raise ValueError(f"true_occupancy: the forest has trunks only, got a {type(ob).__name__}")
        cx, cy = ob.center
        r = ob.radius + grow
        i0, i1 = np.searchsorted(x, cx - r), np.searchsorted(x, cx + r, side="right")
        j0, j1 = np.searchsorted(y, cy - r), np.searchsorted(y, cy + r, side="right")
        if i0 >= i1 or j0 >= j1:
            continue
        disc = (x[i0:i1, None] - cx) ** 2 + (y[None, j0:j1] - cy) ** 2 <= r * r
        occ[i0:i1, j0:j1, :] |= disc[:, :, None] & (z <= ob.height + grow)[None, None, :]
    return occ


class TruthMapPlanner:
    """An :class:`EgoPlanner` whose map is the world: after every update in which the map's window
    has moved (and the first), the window is set to :func:`true_occupancy` (every voxel observed;
    ``OccupancyGridMap.set_known``). The planner's camera frames are still fused on top. Everything
    else (stats, config, events) is the planner's."""

    def __init__(self, planner: EgoPlanner, world):
        self.planner = planner
        self.world = world
        self._origin = None

    def __getattr__(self, name):
        return getattr(self.planner, name)

    def reset(self, start, goal):
        self._origin = None
        self.planner.reset(start, goal)

    def update(self, state, sensors):
        out = self.planner.update(state, sensors)
        m = self.planner.map
        if m is not None and (self._origin is None or (m.origin != self._origin).any()):
            m.set_known(true_occupancy(self.world, m))
            self._origin = m.origin.copy()
        return out


def default_max_acc(max_vel: float) -> float:
    """The acceleration limit EGO flies ``max_vel`` with (the product's rule, also what ``fly
    --planner ego --max-vel V`` uses: :func:`planner_pkg.planning.ego_config.speed_scaled_max_acc`)."""
    return speed_scaled_max_acc(max_vel)


def make_planner(name: str, max_vel: float, max_acc: float, time_scale: float = 1.0, model=None, seed: int = 0,
                 overrides=None):
    """The planner ``name`` at speed limit ``max_vel`` (the policy's commanded speed; the policy
    has no acceleration limit to set); ``overrides``: EgoConfig overrides (dotted keys)."""
    if name == "ego":
        config = EgoConfig(max_vel_mps=max_vel, max_acc_mps2=max_acc)
        if overrides:
            config = config.with_overrides(overrides)
        return EgoPlanner(config.with_time_limits_scaled(time_scale))
    if name == "direct":
        return DirectPlanner(DirectConfig(max_vel_mps=max_vel, max_acc_mps2=max_acc))
    if name == "policy":
        from planner_pkg.app.planners import PlannerOptions, make_planner as make_registered

        return make_registered("policy", PlannerOptions(max_vel_mps=max_vel, model_path=model, seed=seed))
    raise ValueError(f"unknown planner {name!r}")


def run_forest_episode(cases, item):
    """One episode: ``item`` = (index into ``cases``, seed); ``cases[k]`` holds the row label, the
    planner name, max_vel, max_acc, density, time_scale, model and EgoConfig overrides. Returns the summary and the timings (what
    :func:`summarize_case` pools). Depends only on its arguments (the workers of ``--workers``
    run it in any order); EGO's wall-clock safety nets still see the load (``--time-scale``)."""
    k, seed = item
    c = cases[k]
    timeout = episode_timeout_s(c["max_vel"])
    world = forest_world(seed, c["density"])
    inner = make_planner(c["name"], c["max_vel"], c["max_acc"], c["time_scale"], c["model"], seed, c.get("overrides"))
    planner = TimedPlanner(TruthMapPlanner(inner, world) if c.get("truth_map") else inner)
    gains = ControllerGains().with_overrides({key: c[key] for key in GAIN_OPTIONS if c.get(key) is not None})
    camera = CameraParams() if c.get("camera_px") is None else CameraParams(*c["camera_px"])
    res = run_episode(world, planner, START, GOAL, RunnerConfig(timeout_s=timeout, seed=seed), gains=gains,
                      camera=camera)
    stats = getattr(planner.planner, "stats", None)
    return {"summary": res.summary, "update_ms": planner.update_ms, "commanded": planner.commanded_peak[0],
            "replan_ms": list(stats.replan_ms) if stats is not None else [],
            "replan_cpu_ms": list(stats.replan_cpu_ms) if stats is not None else [],
            "plan_iterations": list(stats.plan_iterations) if stats is not None else [],
            "plan_in_flight": list(stats.plan_in_flight) if stats is not None else [],
            "replan_ok": list(stats.replan_ok) if stats is not None else [],
            "fuse_ms": list(stats.fuse_ms) if stats is not None else []}


def episode_line(case, out) -> str:
    s, cmd = out["summary"], out["commanded"]
    return (f"  {case.get('label', case['name'])} v={case['max_vel']:g} seed={s.seed}: {s.reason:14s} t={s.time_s:5.1f} s "
            f"mean={s.mean_speed_mps:5.2f} m/s clear={s.min_clearance_m:6.3f} m peak={s.max_speed_mps:5.2f} "
            f"(cmd {cmd if cmd > -np.inf else float('nan'):5.2f}) m/s  {s.message}")


def run_cases(cases, seeds, verbose: bool = False, workers: int = 1, ray_address: str = "local", **pool):
    """Every case over every seed, the episodes spread over ``workers`` workers of
    :func:`planner_pkg.pool.map_items` (Ray actors for ``workers > 1``); one summary dict per case."""
    from planner_pkg.pool import map_items

    # seed by seed: every case (EGO variants included) flies a seed before the next one, so a change
    # in the machine's load hits them alike
    items = [(k, seed) for seed in seeds for k in range(len(cases))]

    def show(n, out):
        if verbose:
            print(episode_line(cases[items[n][0]], out), flush=True)

    out = map_items(run_forest_episode, items, workers, shared=cases, ray_address=ray_address, on_result=show, **pool)
    per_case = [[] for _ in cases]
    for (k, _), o in zip(items, out["results"]):
        per_case[k].append(o)
    return [summarize_case(c, outs) for c, outs in zip(cases, per_case)]


def replan_cpu_by_kind(cpu_ms, in_flight, ok, target_ms: float = REPLAN_TARGET_MS):
    """EGO's plans split by kind: "flight ok" and "flight failed" (replans in flight, under
    ``EgoConfig.replan_iterations``) and "from rest" (from a hover or below
    ``turn_first_speed_mps``: take-off, recovery after a stop; each guess has its own budgets).
    Per kind: plans, their share of all, CPU p50 / p95 (ms), and how many took more than
    ``target_ms`` (with their share of all plans over it): which kind the replan time's tail is.
    A fourth entry, :data:`IN_FLIGHT`, pools the first two (every replan made while flying)."""
    cpu = np.asarray(cpu_ms, dtype=float)
    flying = np.asarray(in_flight, dtype=bool)
    good = np.asarray(ok, dtype=bool)
    if not (cpu.shape == flying.shape == good.shape):
        raise ValueError(f"one CPU time, flight flag and outcome per plan: {cpu.shape}, {flying.shape}, {good.shape}")
    over_all = int((cpu > target_ms).sum())
    out = {}
    for kind, sel in zip(PLAN_KINDS + (IN_FLIGHT,), (flying & good, flying & ~good, ~flying, flying)):
        c = cpu[sel]
        over = int((c > target_ms).sum())
        out[kind] = {"plans": int(sel.sum()), "share": float(sel.mean()) if cpu.size else float("nan"),
                     "p50": float(np.percentile(c, 50)) if c.size else float("nan"),
                     "p95": float(np.percentile(c, 95)) if c.size else float("nan"),
                     "over": over, "over_share": over / over_all if over_all else float("nan")}
    return out


def summarize_case(case, outs):
    rows = [o["summary"] for o in outs]
    update_ms = [x for o in outs for x in o["update_ms"]]
    replan_ms = [x for o in outs for x in o["replan_ms"]]
    replan_cpu_ms = [x for o in outs for x in o["replan_cpu_ms"]]
    plan_iterations = [x for o in outs for x in o["plan_iterations"]]
    fuse_ms = [x for o in outs for x in o["fuse_ms"]]
    commanded = [o["commanded"] for o in outs]
    name, max_vel, max_acc = case["name"], case["max_vel"], case["max_acc"]
    ok = [s for s in rows if s.reached and not s.collided]

    def pct(values, q):
        return float(np.percentile(values, q)) if values else float("nan")

    # the vehicle's distance from its position reference (None: the policy's acceleration commands)
    track_p95 = [s.tracking_error_p95_m for s in rows if s.tracking_error_p95_m is not None]
    track_max = [s.tracking_error_max_m for s in rows if s.tracking_error_max_m is not None]
    return {
        "planner": case.get("label", name),
        "kind": name,
        "max_vel": max_vel,
        "max_acc": max_acc,
        "episodes": len(rows),
        "success": len(ok) / len(rows) if rows else float("nan"),
        "collisions": sum(s.collided for s in rows),
        "timeouts": sum(s.reason == "timeout" for s in rows),
        "speed": float(np.mean([s.mean_speed_mps for s in ok])) if ok else float("nan"),
        "length_ratio": float(np.mean([s.path_length_m / STRAIGHT_M for s in ok])) if ok else float("nan"),
        "clear_min": min((s.min_clearance_m for s in ok), default=float("nan")),
        "clear_med": pct([s.min_clearance_m for s in ok], 50),
        "clear_low": sum(s.min_clearance_m < CLEARANCE_TARGET_M for s in ok),
        "peak": max(s.max_speed_mps for s in rows) if rows else float("nan"),
        "peak_cmd": max(commanded, default=-np.inf) if max(commanded, default=-np.inf) > -np.inf else float("nan"),
        "update_p50": pct(update_ms, 50),
        "update_p95": pct(update_ms, 95),
        "replan_p50": pct(replan_ms, 50),
        "replan_p95": pct(replan_ms, 95),
        "cpu_p50": pct(replan_cpu_ms, 50),
        "cpu_p95": pct(replan_cpu_ms, 95),
        "iterations_p95": pct(plan_iterations, 95),
        "cpu_by_kind": replan_cpu_by_kind(replan_cpu_ms, [x for o in outs for x in o["plan_in_flight"]],
                                          [x for o in outs for x in o["replan_ok"]]),
        "fuse_p50": pct(fuse_ms, 50),
        "track_p95": float(np.mean(track_p95)) if track_p95 else float("nan"),
        "track_max": max(track_max, default=float("nan")),
        "per_episode": [s.to_dict() for s in rows],
    }


def _variant(values):
    """``LABEL KEY=VALUE ...`` -> (label, {dotted key: YAML-parsed value})."""
    from planner_pkg import safe_yaml

    label = values[0]
    try:
        return label, safe_yaml.key_values(values[1:])
    except ValueError as exc:
        raise ValueError(f"--ego-variant {label}: {exc}") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=100, help="forests per case (seeds first..first+N-1)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--speeds", type=float, nargs="+", default=[2.0, 4.0], help="max_vel values, m/s")
    ap.add_argument("--planners", nargs="+", default=["ego", "direct"], choices=["ego", "policy", "direct"])
    ap.add_argument("--model", default=None, help="the policy's model file (default: the shipped one)")
    ap.add_argument("--max-acc", type=float, default=None,
                    help="acceleration limit, m/s^2 (default: min(7, max(3, 1.5 max_vel)): 3 at 2, 6 at 4, 7 at 6 m/s)")
    ap.add_argument("--density", type=float, default=DENSITY, help="trunks per m^2")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="multiply EGO's wall-clock safety nets by this (>= 1; default 1: as configured)")
    ap.add_argument("--verbose", action="store_true", help="one line per episode")
    ap.add_argument("--ego-variant", nargs="+", action="append", default=[], metavar="LABEL [KEY=VALUE]",
                    help="also fly EGO with these EgoConfig overrides (dotted keys, YAML values) as row ego[LABEL], "
                         "seed by seed beside the default (repeatable)")
    ap.add_argument("--ego-truth-map", action="store_true",
                    help="also fly every EGO row with the forest itself as its map (rows ego[truth map], ego[LABEL, truth map]): the "
                         "planner's own ceiling, without what its camera has not seen")
    ap.add_argument("--drag-feedforward", type=float, default=None, metavar="F",
                    help="the simulated controller's ControllerGains.drag_feedforward for every flight (default: "
                         "its default, 1; 0 = Lee's law without the rotor-drag feed-forward)")
    ap.add_argument("--jerk-feedforward", type=float, default=None, metavar="F",
                    help="the simulated controller's ControllerGains.jerk_feedforward for every flight (default: "
                         "its default, 1; 0 = no body-rate feed-forward of the reference's jerk)")
    ap.add_argument("--max-feedforward-rate", type=float, default=None, metavar="RAD_S",
                    dest="max_feedforward_rate_rad_s",
                    help="the simulated controller's ControllerGains.max_feedforward_rate_rad_s for every flight "
                         "(default: its default; the largest body rate the jerk feed-forward may demand)")
    ap.add_argument("--max-tilt-deg", type=float, default=None, metavar="DEG",
                    help="the simulated controller's tilt limit (ControllerGains.max_tilt_rad) for every flight, "
                         "deg (default: its default, 45, PX4's MPC_TILTMAX_AIR default)")
    ap.add_argument("--camera-px", type=int, nargs=2, default=None, metavar=("W", "H"),
                    help="the simulated depth camera's image size for EGO and direct flights, px (default 64 48, "
                         "the policy's input; same 90 deg field of view, finer pixels: what a deployment camera "
                         "at a higher resolution sees of a trunk's edges)")
    ap.add_argument("--workers", type=int, default=1,
                    help="spread the episodes over N workers (Ray actors when N > 1 and ray is installed; default 1)")
    ap.add_argument("--ray-address", default="local", help="local (default), auto or ray://host:port")
    args = ap.parse_args(argv)
    if args.episodes < 1:
        ap.error("--episodes must be >= 1")
    if args.workers < 1:
        ap.error("--workers must be >= 1")
    from planner_pkg.pool import check_ray_address

    try:
        check_ray_address(args.ray_address)
        variants = [_variant(v) for v in args.ego_variant]
        for _, overrides in variants:
            EgoConfig().with_overrides(overrides)
    except ValueError as exc:
        ap.error(str(exc))
    if args.max_tilt_deg is not None and not 0.0 < args.max_tilt_deg < 90.0:
        ap.error(f"--max-tilt-deg must lie between 0 and 90 deg, got {args.max_tilt_deg:g}")
    args.max_tilt_rad = None if args.max_tilt_deg is None else math.radians(args.max_tilt_deg)
    gains = {key: getattr(args, key) for key in GAIN_OPTIONS}
    try:
        ControllerGains().with_overrides({key: value for key, value in gains.items() if value is not None})
    except ValueError as exc:
        ap.error(str(exc))
    if args.camera_px is not None:
        if "policy" in args.planners:
            ap.error("--camera-px: the policy's network reads the 64 x 48 image it was trained on")
        try:
            CameraParams(*args.camera_px)
        except ValueError as exc:
            ap.error(f"--camera-px: {exc}")
    if not (args.time_scale >= 1.0 and args.time_scale < float("inf")):
        ap.error("--time-scale must be a finite number >= 1")
    seeds = range(args.first_seed, args.first_seed + args.episodes)
    print(f"forest benchmark: {args.episodes} forests (seeds {seeds.start}..{seeds.stop - 1}), density "
          f"{args.density} /m^2, 40 m start-goal, quadrotor + 30 Hz depth camera"
          + ("" if args.camera_px is None else f" ({args.camera_px[0]} x {args.camera_px[1]} px)")
          + (f", EGO wall-clock safety nets x{args.time_scale:g}" if args.time_scale != 1.0 else "")
          + f", {args.workers} worker(s)", flush=True)
    cases = []
    for v in args.speeds:
        for name in args.planners:
            rows = [(name, None, False)] + ([(f"ego[{label}]", overrides, False) for label, overrides in variants]
                                            if name == "ego" else [])
            if name == "ego" and args.ego_truth_map:
                rows += [(f"{label[:-1]}, truth map]" if label.endswith("]") else f"{label}[truth map]", overrides, True)
                         for label, overrides, _ in rows]
            cases += [{"label": label, "name": name, "max_vel": v,
                       "max_acc": args.max_acc if args.max_acc is not None else default_max_acc(v),
                       "density": args.density, "time_scale": args.time_scale, "model": args.model,
                       "overrides": overrides, "truth_map": truth, "camera_px": args.camera_px, **gains}
                      for label, overrides, truth in rows]
    wall0 = time.perf_counter()
    results = run_cases(cases, seeds, args.verbose, args.workers, args.ray_address)
    width = max([8] + [len(r["planner"]) for r in results])
    head = (f"{'planner':{width}s} {'v_max':>5s} {'a_max':>5s} {'success':>8s} {'coll':>5s} {'tout':>5s} {'speed':>6s} {'%vmax':>6s} "
            f"{'len/L':>6s} {'clr_min':>8s} {'clr_med':>8s} {'<0.1':>5s} {'peak':>5s} {'cmd':>5s} {'upd p50':>8s} {'upd p95':>8s} {'rpl p50':>8s} "
            f"{'rpl p95':>8s} {'cpu p50':>8s} {'cpu p95':>8s} {'it p95':>6s} {'fuse':>6s} {'trk':>6s} {'trk max':>7s}")
    print()
    print(head)
    print("-" * len(head))
    for r in results:
        acc = "    -" if r["kind"] == "policy" else f"{r['max_acc']:5.1f}"
        cmd = "    -" if r["kind"] == "policy" else f"{r['peak_cmd'] / r['max_vel']:5.2f}"
        print(f"{r['planner']:{width}s} {r['max_vel']:5.1f} {acc} {100 * r['success']:7.1f}% {r['collisions']:5d} {r['timeouts']:5d} "
              f"{r['speed']:6.2f} {100 * r['speed'] / r['max_vel']:5.0f}% {r['length_ratio']:6.3f} "
              f"{r['clear_min']:8.3f} {r['clear_med']:8.3f} {r['clear_low']:5d} {r['peak'] / r['max_vel']:5.2f} {cmd} "
              f"{r['update_p50']:8.2f} {r['update_p95']:8.2f} "
              f"{r['replan_p50']:8.2f} {r['replan_p95']:8.2f} {r['cpu_p50']:8.2f} {r['cpu_p95']:8.2f} "
              f"{r['iterations_p95']:6.0f} {r['fuse_p50']:6.2f} {r['track_p95']:6.3f} {r['track_max']:7.3f}")
    print("(speed m/s and len/L on successful flights; clearance m, <0.1: successful flights with less than "
          f"{CLEARANCE_TARGET_M:g} m; peak, cmd: highest flown and commanded speed over "
          "all flights / max_vel; times ms; trk: each flight's p95 distance of the vehicle from its position "
          "reference, averaged over the flights, trk max: the largest, m (nan: no position reference); "
          f"total wall {time.perf_counter() - wall0:.0f} s)")
    ego_rows = [r for r in results if r["kind"] == "ego"]
    if ego_rows:
        print()
        print(f"EGO replan CPU by kind of plan (ms; over: plans above {REPLAN_TARGET_MS:g} ms, and their share of "
              f"all plans above it; {IN_FLIGHT}: the first two together)")
        head = f"{'planner':{width}s} {'v_max':>5s} {'plans':>6s} " + " ".join(
            f"{kind + ': n':>17s} {'p50':>6s} {'p95':>6s} {'over':>10s}" for kind in PLAN_KINDS) + \
            f" {IN_FLIGHT + ': p95':>16s} {'over (of them)':>15s}"
        print(head)
        print("-" * len(head))
        for r in ego_rows:
            by = r["cpu_by_kind"]
            cells = " ".join(f"{by[k]['plans']:>10d} ({100 * by[k]['share']:3.0f}%) {by[k]['p50']:6.1f} {by[k]['p95']:6.1f} "
                             f"{by[k]['over']:>4d} ({100 * by[k]['over_share']:3.0f}%)" for k in PLAN_KINDS)
            fl = by[IN_FLIGHT]
            print(f"{r['planner']:{width}s} {r['max_vel']:5.1f} {sum(by[k]['plans'] for k in PLAN_KINDS):6d} {cells} "
                  f"{fl['p95']:16.1f} {fl['over']:>6d} ({100 * fl['over'] / fl['plans'] if fl['plans'] else float('nan'):4.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
