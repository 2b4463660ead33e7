"""The racing quadrotor and environment against analytic truth: hover, free fall, yaw rate,
gate passes in order along the normal, frame hits, ground and bounds crashes."""
import math

import numpy as np
import pytest

from planner_pkg.racing import quad
from planner_pkg.racing.config import EnvConfig, QuadConfig, config_from_dict
from planner_pkg.racing.env import CRASH_BOUNDS, CRASH_GATE, CRASH_GROUND, RaceEnv
from planner_pkg.racing.gates import GateArrays, gate_events
from planner_pkg.racing.track import track_from_dict


def test_level_hover_with_thrust_g_is_an_equilibrium():
    cfg = QuadConfig()
    st = quad.QuadState(3)
    st.pos[:] = [1.0, 2.0, 3.0]
    thrust, rates = quad.commands_from_actions(quad.hover_action(3), cfg)
    np.testing.assert_allclose(thrust, cfg.gravity_mps2)
    for _ in range(500):
        quad.step(st, thrust, rates, cfg, 0.01)
    np.testing.assert_allclose(st.pos, [[1.0, 2.0, 3.0]] * 3, atol=1e-9)
    np.testing.assert_allclose(st.vel, 0.0, atol=1e-9)


def test_free_fall_and_action_limits():
    cfg = QuadConfig(min_thrust_mps2=0.0, drag_per_s=(0.0, 0.0, 0.0), thrust_time_constant_s=1e-6)
    thrust, rates = quad.commands_from_actions(np.array([[-1.0, 1, -1, 0.5], [1.0, 0, 0, 0], [3.0, 0, 0, -9]]), cfg)
    np.testing.assert_allclose(thrust, [0.0, cfg.max_thrust_mps2, cfg.max_thrust_mps2])  # clipped to [-1, 1]
    np.testing.assert_allclose(rates[0], [cfg.max_rate_rps[0], -cfg.max_rate_rps[1], 0.5 * cfg.max_rate_rps[2]])
    st = quad.QuadState(1)
    st.pos[0, 2] = 100.0
    st.thrust[:] = 0.0
    dt, n = 0.001, 1000
    for _ in range(n):
        quad.step(st, np.zeros(1), np.zeros((1, 3)), cfg, dt)
    t = dt * n
    # semi-implicit Euler: z = z0 - g dt^2 n (n + 1) / 2 exactly
    assert st.pos[0, 2] == pytest.approx(100.0 - cfg.gravity_mps2 * dt * dt * n * (n + 1) / 2, abs=1e-9)
    assert st.pos[0, 2] == pytest.approx(100.0 - 0.5 * cfg.gravity_mps2 * t * t, abs=0.01)


def test_constant_yaw_rate_rotates_about_z_and_keeps_r_orthonormal():
    cfg = QuadConfig(rate_time_constant_s=1e-6)
    st = quad.QuadState(1)
    w = 1.3
    st.omega[0] = [0.0, 0.0, w]  # already spinning: the rate loop's lag plays no part
    for _ in range(1000):
        quad.step(st, np.array([cfg.gravity_mps2]), np.array([[0.0, 0.0, w]]), cfg, 0.002)
    np.testing.assert_allclose(st.rot[0], quad.rotation_from_yaw(np.array(w * 2.0)), atol=1e-6)
    np.testing.assert_allclose(st.rot[0] @ st.rot[0].T, np.eye(3), atol=1e-12)


def _line_env(gates, start, velocity, **env_kw):
    """An environment without gravity or drag: zero actions fly a straight line at ``velocity``."""
    cfg = config_from_dict({"env": {"quad": {"gravity_mps2": 0.0, "drag_per_s": [0, 0, 0]}, **env_kw}}).env
    track = track_from_dict({"gates": gates, "start": start})
    env = RaceEnv(cfg, 1, np.random.default_rng(0), tracks=[track], train=False, episode_s=30.0)
    env.state.vel[0] = velocity
    env.state.thrust[:] = 0.0
    return env


def _fly(env, steps):
    passed, crash = 0, 0
    for _ in range(steps):
        _, _, term, trunc, info = env.step(np.zeros((1, 4)))
        passed += int(info["passed_gate"][0])
        if info["crash"][0]:
            crash = int(info["crash"][0])
        if term[0] or trunc[0]:
            break
    return passed, crash


G0 = {"center": [5.0, 0.0, 2.0], "yaw": 0.0, "size": 1.5}
G1 = {"center": [15.0, 0.0, 2.0], "yaw": 0.0, "size": 1.5}


def test_a_straight_flight_through_a_gate_counts_once():
    env = _line_env([G0, G1], [0.0, 0.0, 2.0], [5.0, 0.0, 0.0])
    passed, crash = _fly(env, 50)  # 2 s: through G0 (t = 1 s), not yet at G1 (t = 3 s)
    assert (passed, crash) == (1, 0)
    assert env.passed[0] == 1


def test_the_wrong_direction_does_not_count_and_order_matters():
    # flying -x through G0 (normal +x): crosses its plane backwards, no pass, no crash
    env = _line_env([G0, G1], [8.0, 0.0, 2.0], [-5.0, 0.0, 0.0], bounds_margin_m=20.0)
    assert _fly(env, 50) == (0, 0)
    # flying +x through G1 first (the target is G0): not counted either
    env = _line_env([G0, G1], [12.0, 0.3, 2.0], [5.0, 0.0, 0.0], bounds_margin_m=20.0)
    assert _fly(env, 30) == (0, 0)


def test_gates_count_lap_after_lap_in_order():
    # two gates facing each other across x; a start position that passes G0 (+x) and then G1 (-x)
    ga = {"center": [5.0, 0.0, 2.0], "yaw": 0.0, "size": 1.5}
    gb = {"center": [3.0, 0.0, 2.0], "yaw": math.pi, "size": 1.5}
    cfg = config_from_dict({"env": {"quad": {"gravity_mps2": 0.0, "drag_per_s": [0, 0, 0]}}}).env
    track = track_from_dict({"gates": [ga, gb], "start": [0.0, 0.0, 2.0]})
    env = RaceEnv(cfg, 1, np.random.default_rng(0), tracks=[track], train=False, laps=2, episode_s=30)
    env.state.thrust[:] = 0.0
    env.state.vel[0] = [4.0, 0.0, 0.0]
    seq = []
    for k in range(400):
        if env.state.pos[0, 0] > 7.0:
            env.state.vel[0] = [-4.0, 0.0, 0.0]
        if env.state.pos[0, 0] < 1.0 and env.state.vel[0, 0] < 0:
            env.state.vel[0] = [4.0, 0.0, 0.0]
        _, _, term, _, info = env.step(np.zeros((1, 4)))
        if info["passed_gate"][0]:
            seq.append(int(env.passed[0]))
        if term[0]:
            break
    assert seq == [1, 2, 3, 4] and info["success"][0] and not info["crash"][0]


@pytest.mark.parametrize("offset, expect", [
    ((0.0, 0.7), CRASH_GATE),     # body (r 0.15) touches the top bar (opening half 0.75)
    ((0.85, 0.0), CRASH_GATE),    # right through the side bar
    ((0.55, 0.55), 0),            # inside the opening near the corner, clear of the frame
    ((1.3, 0.0), 0),              # beside the frame (half 0.75 + width 0.2 + r 0.15 = 1.1)
])
def test_frame_hits_are_crashes(offset, expect):
    env = _line_env([G0, G1], [0.0, offset[0], 2.0 + offset[1]], [5.0, 0.0, 0.0])
    passed, crash = _fly(env, 50)
    assert crash == expect
    assert passed == (1 if max(abs(offset[0]), abs(offset[1])) <= 0.75 - 0.15 else 0)


def test_fast_flight_cannot_tunnel_through_a_frame():
    gates = GateArrays(1, 1)
    gates.set_track(0, track_from_dict({"gates": [G0]}))
    # one step jumping 4 m through the plane, crossing on the bottom bar
    passed, hit = gate_events(np.array([[3.0, 0.0, 1.2]]), np.array([[7.0, 0.0, 1.2]]), gates, 0.15, 0.2, 0.1)
    assert hit[0, 0] and not passed[0, 0]


def test_ground_and_bounds_crash():
    env = _line_env([G0, G1], [0.0, 0.0, 2.0], [0.0, 0.0, -4.0])
    assert _fly(env, 50)[1] == CRASH_GROUND
    env = _line_env([G0, G1], [0.0, 0.0, 2.0], [0.0, 6.0, 0.0], bounds_margin_m=2.0)
    assert _fly(env, 50)[1] == CRASH_BOUNDS
    assert env.done[0]


def test_training_env_resets_finished_vehicles_and_is_seeded():
    cfg = EnvConfig()
    a = RaceEnv(cfg, 8, np.random.default_rng(3))
    b = RaceEnv(cfg, 8, np.random.default_rng(3))
    rng = np.random.default_rng(0)
    for _ in range(60):
        act = rng.uniform(-1, 1, (8, 4))
        oa, ra, ta, _, _ = a.step(act)
        ob, rb, tb, _, _ = b.step(act)
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ra, rb)
    assert not a.done.any()  # auto-reset in training mode
    assert oa.shape == (8, a.obs_dim) and np.isfinite(oa).all()
