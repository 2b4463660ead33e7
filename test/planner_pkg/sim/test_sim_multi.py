"""The multi-vehicle simulator: drones see each other in depth (analytic ray-ball distances), a
drone-drone contact is detected at the analytic time and logged, a lost planner is never called
again while its vehicle hovers, and every flight log shares one clock."""
import math

import numpy as np
import pytest

from planner_pkg.sim.multi import MultiVehicleRunner, ray_ball_distances
from planner_pkg.sim.runner import RunnerConfig
from planner_pkg.types import Setpoint
from planner_pkg.world import World

EMPTY = World((-20, -20, 0), (20, 20, 6), [])


class Scripted:
    """A planner that commands a constant velocity along a line (a trajectory), or holds; records
    the frames it observed and how often it was called."""

    rate_hz = 10.0

    def __init__(self, velocity=(0.0, 0.0, 0.0)):
        self.velocity = np.asarray(velocity, dtype=float)
        self.frames = []
        self.calls = 0
        self.start = None

    def reset(self, start, goal):
        self.start = np.asarray(start, dtype=float)
        self.frames, self.calls = [], 0

    def observe(self, frame):
        self.frames.append(frame)

    def update(self, state, sensors):
        self.calls += 1
        if self.calls == 1:
            return self
        return None

    def sample(self, t):
        return Setpoint(self.start + self.velocity * t, self.velocity, np.zeros(3), yaw=0.0)


def test_ray_ball_distances_are_analytic():
    o = np.zeros(3)
    d = np.array([[1.0, 0, 0], [0, 1.0, 0], [math.cos(0.1), math.sin(0.1), 0]])
    out = ray_ball_distances(o, d, np.array([[5.0, 0, 0]]), 0.5)
    assert out[0] == pytest.approx(4.5)
    assert math.isinf(out[1])
    # a ray at angle a to the centre direction: t = 5 cos a - sqrt(r^2 - (5 sin a)^2)
    a = 0.1
    assert out[2] == pytest.approx(5 * math.cos(a) - math.sqrt(0.25 - (5 * math.sin(a)) ** 2))
    assert (ray_ball_distances(o, d, np.array([[0.1, 0, 0]]), 0.5) == 0).all()  # inside a ball


def test_drones_see_each_other_in_depth():
    """Drone 0 looks along +x at drone 1 hovering 3 m ahead: the centre pixel's depth is the
    distance to drone 1's ball (3 - r); alone in the same world it sees nothing there."""
    cfg = RunnerConfig(timeout_s=0.2, vehicle="point_mass", point_cloud=False)
    a, b = Scripted(), Scripted()
    runner = MultiVehicleRunner(EMPTY, [a, b], cfg)
    res = runner.run([[0, 0, 2], [3, 0, 2]], [[10, 0, 2], [10, 5, 2]])
    r = res.vehicles and runner._factory.make_vehicle()[2]
    frame = a.frames[0]
    h, w = frame.depth.shape
    centre = float(frame.depth[h // 2 - 1: h // 2 + 1, w // 2 - 1: w // 2 + 1].min())
    assert centre == pytest.approx(3.0 - r, abs=0.02)
    # drone 1 looks away from drone 0 (yaw 0 towards +x): no drone in its image
    solo = Scripted()
    MultiVehicleRunner(EMPTY, [solo], cfg).run([[0, 0, 2]], [[10, 0, 2]])
    assert not np.isfinite(solo.frames[0].depth[h // 2 - 1: h // 2 + 1, w // 2 - 1: w // 2 + 1]).any()


def test_head_on_collision_is_detected_at_the_analytic_time_and_logged():
    """Two drones fly at each other at 1 m/s each from 4 m apart: their balls (r each) touch when
    the centres are 2 r apart, at t = (4 - 2 r) / 2 s (plus the small tracking lag)."""
    cfg = RunnerConfig(timeout_s=5.0, vehicle="point_mass")
    a, b = Scripted((1.0, 0, 0)), Scripted((-1.0, 0, 0))
    runner = MultiVehicleRunner(EMPTY, [a, b], cfg)
    r = runner._factory.make_vehicle()[2]
    res = runner.run([[-2, 0, 2], [2, 0, 2]], [[5, 0, 2], [-5, 0, 2]])
    assert len(res.drone_collisions) == 1
    c = res.drone_collisions[0]
    assert (c.a, c.b) == (0, 1) and c.distance_m < 2 * r
    assert c.t == pytest.approx((4 - 2 * r) / 2, abs=0.1)
    for v in res.vehicles:
        assert v.drone_collision and v.reason == "drone_collision" and not v.reached
    assert res.min_separation_m < 2 * r and not res.success
    assert any("collided with drone" in e for e in res.events)
    # down: the planners are not called after the contact
    calls = a.calls
    assert calls <= int(c.t * 10) + 2


def test_logs_share_one_clock_and_passing_drones_keep_their_distance():
    cfg = RunnerConfig(timeout_s=3.0, vehicle="point_mass")
    a, b = Scripted((1.0, 0, 0)), Scripted((-1.0, 0, 0))
    res = MultiVehicleRunner(EMPTY, [a, b], cfg).run([[-2, 0.5, 2], [2, -0.5, 2]], [[5, 0, 2], [-5, 0, 2]])
    assert res.drone_collisions == []
    np.testing.assert_array_equal(res.logs[0].t, res.logs[1].t)
    # closest approach 1.0 m (lateral offset) at t = 2 s
    assert res.min_separation_m == pytest.approx(1.0, abs=0.05)
    assert res.min_separation_time_s == pytest.approx(2.0, abs=0.15)


def test_lost_planner_is_never_called_again_and_its_drone_hovers():
    cfg = RunnerConfig(timeout_s=3.0, vehicle="point_mass")
    a, b = Scripted(), Scripted()
    res = MultiVehicleRunner(EMPTY, [a, b], cfg).run([[0, 0, 2], [4, 0, 2]], [[10, 0, 2], [10, 5, 2]],
                                                     planner_lost_at={1: 1.0})
    assert b.calls == 10  # t = 0.0 .. 0.9 s at 10 Hz
    assert a.calls > 25
    pos = res.logs[1].positions
    assert np.abs(pos - [4, 0, 2]).max() < 0.05  # held its last reference
    assert res.vehicles[1].planner_lost_at_s == 1.0


def test_mismatched_starts_are_refused():
    with pytest.raises(ValueError, match="2 planners need 2 starts"):
        MultiVehicleRunner(EMPTY, [Scripted(), Scripted()]).run([[0, 0, 1]], [[1, 0, 1], [2, 0, 1]])


class Offset(Scripted):
    """Holds a point ``offset`` from its start (NaN: a bad setpoint every tick)."""

    def __init__(self, offset):
        super().__init__()
        self.offset = np.asarray(offset, dtype=float)

    def sample(self, t):
        return Setpoint.hold(self.start + self.offset, 0.0)


def test_each_drone_reports_how_far_it_flew_from_its_position_reference():
    """A drone told to hold 0.5 m beside its start begins exactly 0.5 m away and closes the gap; one
    holding its start stays within millimetres; one whose reference is never valid (NaN) flies the
    runner's own hold, which is not its planner's reference: no figure."""
    cfg = RunnerConfig(timeout_s=3.0, vehicle="point_mass")
    aside, here, broken = Offset([0.0, 0.5, 0.0]), Offset([0.0, 0.0, 0.0]), Offset([math.nan, 0.0, 0.0])
    res = MultiVehicleRunner(EMPTY, [aside, here, broken], cfg).run([[0, 0, 2], [0, 4, 2], [0, 8, 2]],
                                                                    [[10, 0, 2], [10, 4, 2], [10, 8, 2]])
    a, h, b = (v.to_dict() for v in res.vehicles)
    assert a["tracking_error_max_m"] == pytest.approx(0.5, abs=1e-6)  # the first tick, before any motion
    assert a["tracking_error_p95_m"] < 0.5
    assert h["tracking_error_max_m"] < 5e-3 and h["tracking_error_p95_m"] <= h["tracking_error_max_m"]
    assert b["tracking_error_p95_m"] is None and b["tracking_error_max_m"] is None
    assert res.vehicles[2].tracking_errors == []
