"""The racer outside its training environment: same observation, same gate counting, and a flight
of the shipped model in the embedded simulator's rigid-body quadrotor through its body-rate input."""
from pathlib import Path

import numpy as np
import pytest

from planner_pkg.racing import quad
from planner_pkg.racing.export import default_model_path
from planner_pkg.racing.config import EnvConfig
from planner_pkg.racing.env import RaceEnv
from planner_pkg.racing.export import load_racer
from planner_pkg.racing.pilot import GateProgress, RacerPilot, start_pose, track_world
from planner_pkg.racing.track import load_track

TRACK = Path(__file__).resolve().parents[3] / "config" / "race" / "track_example.yaml"


class _Racer:
    """A stand-in policy: fixed actions, the default configuration."""

    def __init__(self, actions):
        self.config = type("C", (), {"env": EnvConfig()})()
        self.actions = list(actions)

    def act(self, obs):
        return np.asarray(self.actions.pop(0), dtype=np.float64).reshape(1, 4)


def test_the_pilots_observation_and_commands_are_the_environments():
    track = load_track(TRACK)
    cfg = EnvConfig()
    env = RaceEnv(cfg, 1, np.random.default_rng(0), tracks=[track], train=False)
    rng = np.random.default_rng(1)
    actions = rng.uniform(-1, 1, (6, 4))
    pilot = RacerPilot(_Racer(actions), track)
    obs = env.observe()
    for a in actions:
        st = env.state
        assert np.array_equal(pilot.observation(st.pos[0], st.vel[0], st.rot[0], st.omega[0]), obs)
        thrust, rates, action = pilot.act(st.pos[0], st.vel[0], st.rot[0], st.omega[0])
        t_env, r_env = quad.commands_from_actions(a[None], cfg.quad)
        assert thrust == t_env[0] and np.array_equal(rates, r_env[0]) and np.array_equal(action, a)
        obs, *_ = env.step(a[None])


def test_gate_progress_counts_what_the_environment_counts():
    # fly the shipped model in its own environment and follow it with GateProgress at every substep
    racer = load_racer(default_model_path())
    track = load_track(TRACK)
    cfg = racer.config.env
    env = RaceEnv(cfg, 1, np.random.default_rng(0), tracks=[track], train=False, laps=2)
    progress = GateProgress(track, cfg)
    progress.update(0.0, env.state.pos[0])
    obs = env.observe()
    dt = cfg.quad.dt_s / cfg.quad.substeps
    t = 0.0
    while not env.done[0]:
        action = racer.act(obs)
        thrust, rates = quad.commands_from_actions(np.clip(action, -1, 1), cfg.quad)
        snapshot = env.state.copy()
        for _ in range(cfg.quad.substeps):  # the environment's own substeps, replayed
            quad.step(snapshot, thrust, rates, cfg.quad, dt)
            t += dt
            progress.update(t, snapshot.pos[0])
        obs, *_ = env.step(action)
        assert np.allclose(snapshot.pos, env.state.pos)
        assert progress.passed == env.passed[0]
    assert progress.passed == 2 * len(track) and progress.hits == 0 and len(progress.lap_times_s) == 2


def test_track_world_has_open_gates_and_solid_frames():
    from planner_pkg.world.io import world_from_dict

    track = load_track(TRACK)
    cfg = EnvConfig()
    world = world_from_dict(track_world(track, cfg))
    assert len(world.obstacles) == 4 * len(track)
    for g in track.gates:
        c = np.asarray(g.center)
        half = g.size / 2
        assert float(world.signed_distance(c)) == pytest.approx(half, abs=1e-6)  # the opening is free
        on_top_bar = c + [0.0, 0.0, half + cfg.frame_width_m / 2]
        on_post = c + (half + cfg.frame_width_m / 2) * g.lateral
        assert float(world.signed_distance(on_top_bar)) < 0 and float(world.signed_distance(on_post)) < 0
    p, _ = start_pose(track)
    assert (np.asarray(world.bounds_min) < p).all() and (p < np.asarray(world.bounds_max)).all()


def test_the_shipped_racer_flies_the_example_track_in_the_embedded_simulator():
    """Two laps through the rigid-body model's body-rate input (no ROS), close to ``race fly``."""
    from planner_pkg.sim.embedded import EmbeddedSim
    from planner_pkg.racing.evaluate import fly_tracks
    from planner_pkg.sim.rate_control import BodyRateCommand
    from planner_pkg.world.io import world_from_dict

    racer = load_racer(default_model_path())
    track = load_track(TRACK)
    cfg = racer.config.env
    p, yaw = start_pose(track)
    sim = EmbeddedSim(world_from_dict(track_world(track, cfg)), p, yaw, camera_rate_hz=0.0)
    pilot = RacerPilot(racer, track)
    while sim.t < 12.0 and not sim.crashed and pilot.progress.passed < 2 * len(track):
        s = sim.state()
        thrust, rates, _ = pilot.act(s.position, s.velocity, s.rotation, s.angular_velocity)
        sim.set_body_rate_command(BodyRateCommand(thrust, tuple(rates)))
        for o in sim.advance(cfg.quad.dt_s).odometry:
            pilot.progress.update(o.t, o.position)
    assert not sim.crashed, sim.crash_reason
    assert pilot.progress.passed == 2 * len(track) and sim.monitor.min_clearance_m > 0.05
    (ref,) = fly_tracks(racer.act, [track], cfg, laps=2)
    for ours, theirs in zip(pilot.progress.lap_times_s, ref.lap_times_s):
        assert ours == pytest.approx(theirs, rel=0.12)  # measured 3.61 / 3.35 s vs 3.40 / 3.24 s
