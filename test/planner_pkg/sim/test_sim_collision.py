"""Collision detection with the vehicle radius against brute-force distances."""
import numpy as np
import pytest

from planner_pkg.sim.collision import CollisionMonitor, clearance
from planner_pkg.world import Cylinder, Sphere, World

RADIUS = 0.19


def forest_of_spheres_and_trunks(rng):
    spheres = [Sphere((float(x), float(y), float(z)), float(r)) for x, y, z, r in zip(
        rng.uniform(1, 19, 15), rng.uniform(-3, 3, 15), rng.uniform(0.5, 3, 15), rng.uniform(0.2, 0.6, 15))]
    trunks = [Cylinder((float(x), float(y)), float(r), 4.0) for x, y, r in zip(
        rng.uniform(1, 19, 15), rng.uniform(-3, 3, 15), rng.uniform(0.2, 0.5, 15))]
    return World([-5, -5, 0], [25, 5, 5], spheres + trunks), spheres, trunks


def brute_force_distance(p, spheres, trunks):
    """Distance (m) from p to the nearest surface: spheres, capped trunks, ground z = 0."""
    d = [p[2]]
    for s in spheres:
        d.append(np.linalg.norm(p - np.array(s.center)) - s.radius)
    for c in trunks:
        radial = np.hypot(p[0] - c.center[0], p[1] - c.center[1]) - c.radius
        vertical = max(-p[2], p[2] - c.height)
        outside = np.hypot(max(radial, 0.0), max(vertical, 0.0))
        d.append(outside if (radial > 0 or vertical > 0) else max(radial, vertical))
    return min(d)


def test_clearance_and_world_collides_match_brute_force():
    rng = np.random.default_rng(3)
    world, spheres, trunks = forest_of_spheres_and_trunks(rng)
    points = np.column_stack([rng.uniform(0, 20, 400), rng.uniform(-3, 3, 400), rng.uniform(0.05, 4.5, 400)])
    truth = np.array([brute_force_distance(p, spheres, trunks) for p in points])
    gaps = np.array([clearance(world, p, RADIUS) for p in points])
    np.testing.assert_allclose(gaps, truth - RADIUS, atol=1e-9)
    np.testing.assert_array_equal(world.collides(points, RADIUS), truth < RADIUS)
    assert 0 < (truth < RADIUS).sum() < len(points)  # both outcomes exercised


@pytest.mark.parametrize("seed, z_mid, z_amp", [(0, 1.5, 0.5), (1, 1.5, 0.5), (2, 1.5, 0.5), (3, 4.55, 0.15)])
def test_adaptive_monitor_finds_the_same_first_collision_as_every_step_checking(seed, z_mid, z_amp):
    """Seeds 0-2 hit something; seed 3 skims 0.4-0.7 m over the trunk tops without a hit."""
    rng = np.random.default_rng(seed)
    world, spheres, trunks = forest_of_spheres_and_trunks(rng)
    # a wiggly flight at up to ~4 m/s through the obstacles, sampled at 500 Hz
    dt = 0.002
    t = np.arange(0, 6, dt)
    y0, w = rng.uniform(-2, 2), rng.uniform(0.5, 2.0)
    path = np.column_stack([3.0 * t, y0 + 1.0 * np.sin(w * t), z_mid + z_amp * np.sin(0.7 * t)])
    speed = np.linalg.norm(np.gradient(path, dt, axis=0), axis=1)
    gaps = np.array([brute_force_distance(p, spheres, trunks) for p in path]) - RADIUS
    first = np.flatnonzero(gaps < 0)
    mon = CollisionMonitor(world, RADIUS, max_accel_mps2=60.0)
    hit_at = None
    for i in range(len(t)):
        if mon.update(t[i], path[i], speed[i]):
            hit_at = i
            break
    assert bool(first.size) == (z_mid < 4.0)
    if first.size:
        assert hit_at == first[0]
        assert mon.collision_time_s == pytest.approx(t[first[0]])
        np.testing.assert_allclose(mon.collision_position, path[first[0]])
        stop = first[0] + 1
    else:
        assert hit_at is None and not mon.collided
        stop = len(t)
    # minimum clearance: never below the true one; within the distance flown in one check interval
    true_min = gaps[:stop].min()
    assert true_min - 1e-12 <= mon.min_clearance_m <= true_min + max(0.5 * abs(true_min), speed.max() * dt)
    assert mon.checks < stop  # it did skip steps


def test_ground_counts_as_a_collision():
    world = World([-5, -5, 0], [5, 5, 5], [])
    mon = CollisionMonitor(world, RADIUS, max_accel_mps2=60.0)
    assert not mon.update(0.0, [0, 0, 1.0], 0.0)
    assert mon.min_clearance_m == pytest.approx(1.0 - RADIUS)
    assert mon.update(1.0, [0, 0, RADIUS - 0.01], 0.0)


def test_monitor_rejects_bad_configuration():
    world = World([-5, -5, 0], [5, 5, 5], [])
    with pytest.raises(ValueError):
        CollisionMonitor(world, -0.1, max_accel_mps2=60.0)
    with pytest.raises(ValueError):
        CollisionMonitor(world, 0.2, max_accel_mps2=0.0)
