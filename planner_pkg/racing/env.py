"""Vectorised gate-racing environment: N quadrotors, each on its own track (NumPy, no autograd).

``RaceEnv.step(actions)`` advances every vehicle one control period (``quad.substeps`` physics
steps), counts gates passed in order (lap after lap), detects crashes (gate frame, ground,
leaving the flight volume), computes Swift's reward (:class:`~planner_pkg.racing.config.RewardConfig`)
and, in training mode, resets finished vehicles on a fresh random track.

Observation (``obs_dim = 15 + 6 * gate_obs``), everything in the body frame so that it does not
depend on the track's heading: velocity (3), the world's up axis (3), body rates (3), for each of
the next ``gate_obs`` gates its centre relative to the vehicle (3) and its normal (3), the
previous action (4), height above ground (1), the next gate's half size (1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from planner_pkg.racing import quad
from planner_pkg.racing.gates import GateArrays, gate_events
from planner_pkg.racing.track import Track, random_track, track_from_dict

__all__ = ["RaceEnv", "build_observation", "rng_state", "set_rng_state", "obs_dim", "ACTION_DIM",
           "CRASH_NONE", "CRASH_GATE", "CRASH_GROUND", "CRASH_BOUNDS",
           "CRASH_NAMES"]

ACTION_DIM = 4
CRASH_NONE, CRASH_GATE, CRASH_GROUND, CRASH_BOUNDS = 0, 1, 2, 3
CRASH_NAMES = {CRASH_NONE: None, CRASH_GATE: "gate", CRASH_GROUND: "ground", CRASH_BOUNDS: "out_of_bounds"}


def obs_dim(env_cfg) -> int:
    return 15 + 6 * env_cfg.gate_obs


def max_gates(env_cfg, tracks: Optional[Sequence[Track]] = None) -> int:
    g = env_cfg.track.gates[1]
    if tracks:
        g = max(g, max(len(t) for t in tracks))
    return g


def build_observation(pos, vel, rot, omega, gates: GateArrays, target, prev_action, gate_obs: int) -> np.ndarray:
    """The policy's observation (module docstring) of N vehicles: pos, vel (N, 3) world; rot
    (N, 3, 3) body-to-world; omega (N, 3) body; target (N,) index of the next gate."""
    n = len(pos)
    rot_t = np.transpose(rot, (0, 2, 1))
    parts = [np.einsum("nij,nj->ni", rot_t, vel), rot[:, 2, :], omega]
    rows = np.arange(n)
    for k in range(gate_obs):
        gi = (target + k) % gates.count
        parts.append(np.einsum("nij,nj->ni", rot_t, gates.centers[rows, gi] - pos))
        parts.append(np.einsum("nij,nj->ni", rot_t, gates.normals[rows, gi]))
    parts.append(prev_action)
    parts.append(pos[:, 2:3])
    parts.append(gates.half[rows, target][:, None])
    return np.concatenate(parts, axis=1)


def rng_state(rng: np.random.Generator) -> dict:
    """A PCG64 generator's state as plain data (ints and a str: what a checkpoint stores)."""
    st = rng.bit_generator.state
    return {"bit_generator": st["bit_generator"], "state": int(st["state"]["state"]), "inc": int(st["state"]["inc"]),
            "has_uint32": int(st["has_uint32"]), "uinteger": int(st["uinteger"])}


def set_rng_state(rng: np.random.Generator, state) -> None:
    """Restore :func:`rng_state` into ``rng``; ValueError if it is not a PCG64 state."""
    try:
        if state["bit_generator"] != type(rng.bit_generator).__name__:
            raise ValueError(f"a {state['bit_generator']!r} state for a {type(rng.bit_generator).__name__} generator")
        rng.bit_generator.state = {"bit_generator": state["bit_generator"],
                                   "state": {"state": int(state["state"]), "inc": int(state["inc"])},
                                   "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"invalid random generator state: {exc}") from None


#: The arrays of :meth:`RaceEnv.get_state` (besides the tracks and the generator): (owner, name).
_STATE_ARRAYS = (("state", "pos"), ("state", "vel"), ("state", "rot"), ("state", "omega"), ("state", "thrust"),
                 ("gates", "centers"), ("gates", "normals"), ("gates", "laterals"), ("gates", "half"),
                 ("gates", "valid"), ("gates", "count"), ("env", "passed"), ("env", "first_target"),
                 ("env", "steps"), ("env", "prev_action"), ("env", "lo"), ("env", "hi"), ("env", "done"),
                 ("env", "crash"))


class RaceEnv:
    """N vehicles racing.

    cfg: :class:`~planner_pkg.racing.config.EnvConfig`. rng: the environment's generator (tracks,
    starts). tracks: fixed tracks, one per vehicle (evaluation / ``race fly``); None draws a random
    track at every reset (training). train: random in-flight starts and auto-reset; when False the
    vehicles start hovering at their track's start and stay done once finished.
    laps: when set, a vehicle that passes ``laps`` x its gate count is done (success).
    """

    def __init__(self, cfg, n: int, rng: np.random.Generator, tracks: Optional[Sequence[Track]] = None,
                 train: bool = True, laps: Optional[int] = None, episode_s: Optional[float] = None):
        if tracks is not None and len(tracks) != n:
            raise ValueError(f"need one track per vehicle: {n} vehicles, {len(tracks)} tracks")
        self.cfg = cfg
        self.qc = cfg.quad
        self.n = n
        self.rng = rng
        self.fixed_tracks = list(tracks) if tracks is not None else None
        self.train = train
        self.laps = laps
        self.episode_s = cfg.episode_s if episode_s is None else float(episode_s)
        self.max_steps = max(1, int(round(self.episode_s / self.qc.dt_s)))
        self.gates = GateArrays(n, max_gates(cfg, tracks))
        self.tracks: List[Optional[Track]] = [None] * n
        self.state = quad.QuadState(n, self.qc.gravity_mps2)
        self.passed = np.zeros(n, dtype=np.int64)  # gates passed in order since the episode start
        self.first_target = np.zeros(n, dtype=np.int64)
        self.steps = np.zeros(n, dtype=np.int64)
        self.prev_action = np.zeros((n, ACTION_DIM))
        self.lo = np.zeros((n, 3))
        self.hi = np.zeros((n, 3))
        self.done = np.zeros(n, dtype=bool)
        self.crash = np.zeros(n, dtype=np.int64)
        self.obs_dim = obs_dim(cfg)
        self.reset(np.arange(n))

    # ---------------------------------------------------------------------------------------
    def _target_index(self) -> np.ndarray:
        return (self.first_target + self.passed) % self.gates.count

    def reset(self, idx) -> np.ndarray:
        """Start the vehicles ``idx`` anew (a new random track in training); returns all observations."""
        cfg, qc = self.cfg, self.qc
        for i in np.atleast_1d(idx):
            track = self.fixed_tracks[i] if self.fixed_tracks is not None else random_track(self.rng, cfg.track)
            self.tracks[i] = track
            self.gates.set_track(i, track)
            c, nrm, _, h = track.arrays()
            lo, hi = c.min(axis=0), c.max(axis=0)
            self.lo[i] = (lo[0] - cfg.bounds_margin_m, lo[1] - cfg.bounds_margin_m, -np.inf)
            self.hi[i] = (hi[0] + cfg.bounds_margin_m, hi[1] + cfg.bounds_margin_m, cfg.ceiling_m)
            self.lo[i, :2] = np.minimum(self.lo[i, :2], np.asarray(track.start[:2]) - 1.0)
            self.hi[i, :2] = np.maximum(self.hi[i, :2], np.asarray(track.start[:2]) + 1.0)
            st = self.state
            st.omega[i] = 0.0
            st.thrust[i] = qc.gravity_mps2
            if self.train and self.rng.random() < cfg.random_start_prob:
                g = int(self.rng.integers(len(track)))
                back = self.rng.uniform(*cfg.start_distance_m)
                off = self.rng.uniform(-0.8, 0.8, 2) * h[g]
                lat = track.gates[g].lateral
                p = c[g] - back * nrm[g] + off[0] * lat + np.array([0.0, 0.0, off[1]])
                p[2] = max(p[2], 0.5)
                to_gate = c[g] - p
                dist = np.linalg.norm(to_gate)
                speed = self.rng.uniform(*cfg.start_speed_mps)
                st.pos[i] = p
                st.vel[i] = to_gate / max(dist, 1e-6) * speed
                yaw = math.atan2(to_gate[1], to_gate[0]) + self.rng.uniform(-0.3, 0.3)
                roll, pitch = self.rng.uniform(-0.2, 0.2, 2)
                st.rot[i] = quad.rotation_from_yaw(np.array(yaw), np.array(roll), np.array(pitch))
                self.first_target[i] = g
            else:
                p = np.asarray(track.start, dtype=np.float64)
                to_gate = c[0] - p
                st.pos[i] = p
                st.vel[i] = 0.0
                st.rot[i] = quad.rotation_from_yaw(np.array(math.atan2(to_gate[1], to_gate[0])))
                self.first_target[i] = 0
            self.passed[i] = 0
            self.steps[i] = 0
            self.prev_action[i] = 0.0
            self.done[i] = False
            self.crash[i] = CRASH_NONE
        return self.observe()

    # ---------------------------------------------------------------------------------------
    def _owner(self, name: str):
        return {"state": self.state, "gates": self.gates, "env": self}[name]

    def get_state(self) -> dict:
        """Everything :meth:`step` and :meth:`reset` read, as plain data: the vehicles, their
        tracks and gate arrays, counters and the generator's state (a checkpoint's resume point)."""
        out = {f"{o}.{k}": getattr(self._owner(o), k).copy() for o, k in _STATE_ARRAYS}
        out["tracks"] = [t.to_dict() if t is not None else None for t in self.tracks]
        out["rng"] = rng_state(self.rng)
        return out

    def set_state(self, state) -> None:
        """Restore :meth:`get_state` (of an environment with the same vehicle count and
        configuration); ValueError naming the first array that does not fit."""
        if not isinstance(state, dict):
            raise ValueError(f"environment state: expected a mapping, got {type(state).__name__}")
        arrays = {}
        for o, k in _STATE_ARRAYS:
            key = f"{o}.{k}"
            if key not in state:
                raise ValueError(f"environment state: missing {key!r}")
            cur = getattr(self._owner(o), k)
            v = np.asarray(state[key])
            if v.shape != cur.shape or v.dtype != cur.dtype:
                raise ValueError(f"environment state: {key} is {v.dtype}{list(v.shape)}, this environment "
                                 f"holds {cur.dtype}{list(cur.shape)}")
            arrays[key] = v
        tracks = state.get("tracks")
        if not isinstance(tracks, (list, tuple)) or len(tracks) != self.n:
            raise ValueError(f"environment state: need {self.n} tracks")
        tracks = [track_from_dict(t, f"environment state: track {i}") if t is not None else None
                  for i, t in enumerate(tracks)]
        set_rng_state(self.rng, state.get("rng", {}))
        for o, k in _STATE_ARRAYS:
            setattr(self._owner(o), k, arrays[f"{o}.{k}"].copy())
        self.tracks = tracks

    def observe(self) -> np.ndarray:
        """(N, obs_dim) float64 (module docstring)."""
        st = self.state
        return build_observation(st.pos, st.vel, st.rot, st.omega, self.gates, self._target_index(),
                                 self.prev_action, self.cfg.gate_obs)

    def step(self, actions: np.ndarray):
        """Apply (N, 4) actions for one control period.

        Returns (obs (N, D), reward (N,), terminated (N,) bool, truncated (N,) bool, info) where
        info holds ``passed_gate`` (N,) bool, ``crash`` (N,) int (CRASH_*), ``success`` (N,) bool
        (laps done) and, for the vehicles that finished this step, ``final_obs`` (N, D) (their
        last observation, before a training reset replaced it).
        """
        qc, rc, cfg = self.qc, self.cfg.reward, self.cfg
        st, n = self.state, self.n
        active = ~self.done
        actions = np.clip(np.asarray(actions, dtype=np.float64), -1.0, 1.0)
        thrust_cmd, rate_cmd = quad.commands_from_actions(actions, qc)
        rows = np.arange(n)
        tgt = self._target_index()
        tgt_c = self.gates.centers[rows, tgt]
        d_prev = np.linalg.norm(tgt_c - st.pos, axis=1)
        passed_gate = np.zeros(n, dtype=bool)
        crash = np.zeros(n, dtype=np.int64)
        dt = qc.dt_s / qc.substeps
        frozen = st.copy() if not active.all() else None
        for _ in range(qc.substeps):
            p0 = st.pos.copy()
            quad.step(st, thrust_cmd, rate_cmd, qc, dt)
            passed, hit = gate_events(p0, st.pos, self.gates, qc.radius_m, cfg.frame_width_m, cfg.frame_depth_m)
            live = crash == CRASH_NONE
            tgt_now = self._target_index()
            through = passed[rows, tgt_now] & live & ~passed_gate
            self.passed += through
            passed_gate |= through
            new_crash = np.where(hit.any(axis=1), CRASH_GATE,
                                 np.where(st.pos[:, 2] < qc.radius_m, CRASH_GROUND,
                                          np.where(((st.pos < self.lo) | (st.pos > self.hi)).any(axis=1),
                                                   CRASH_BOUNDS, CRASH_NONE)))
            crash = np.where(live, new_crash, crash)
        if frozen is not None:  # finished vehicles (evaluation) do not move
            for k in st.__slots__:
                getattr(st, k)[~active] = getattr(frozen, k)[~active]
            crash[~active] = CRASH_NONE
            passed_gate &= active
        self.steps += active
        d_now = np.linalg.norm(tgt_c - st.pos, axis=1)
        to_gate = self.gates.centers[rows, self._target_index()] - st.pos
        cosang = np.sum(st.rot[:, :, 0] * to_gate, axis=1) / np.maximum(np.linalg.norm(to_gate, axis=1), 1e-6)
        angle = np.arccos(np.clip(cosang, -1.0, 1.0))
        reward = (rc.progress * (d_prev - d_now)
                  + rc.perception * np.exp(rc.perception_sharpness * angle ** 4)
                  - rc.rate_penalty * np.linalg.norm(st.omega, axis=1)
                  - rc.action_smoothness * np.sum((actions - self.prev_action) ** 2, axis=1)
                  + rc.gate_bonus * passed_gate
                  - rc.crash * (crash != CRASH_NONE))
        reward = np.where(active, reward, 0.0)
        self.prev_action = np.where(active[:, None], actions, self.prev_action)
        success = np.zeros(n, dtype=bool)
        if self.laps is not None:
            success = active & (crash == CRASH_NONE) & (self.passed >= self.laps * self.gates.count)
        terminated = active & ((crash != CRASH_NONE) | success)
        truncated = active & ~terminated & (self.steps >= self.max_steps)
        self.crash = np.where(active, crash, self.crash)
        finished = terminated | truncated
        self.done |= finished
        obs = self.observe()
        info = {"passed_gate": passed_gate, "crash": crash, "success": success}
        if finished.any():
            info["final_obs"] = obs.copy()
            if self.train:
                obs = self.reset(np.flatnonzero(finished))
        return obs, reward, terminated, truncated, info
