"""Ray-casting cost of planner_pkg.world for a depth camera, printed as a table.

A 64 x 48 pinhole camera (90 deg horizontal FOV, 3072 rays) at (0, 0, 1.5) looking along +x
into random forests of 50 / 200 / 1000 trunks filling a 40 m x 40 m square around it, out to
20 m. Columns: the World.raycast call (angular culling driver), the brute-force driver on the
same rays, World.cull, and signed_distance for 3072 points. Times in milliseconds (median of
repeats). Never passes or fails on time.

    python benchmarks/world_raycast.py [--repeats N]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from planner_pkg.world import Cylinder, World
from planner_pkg.world.raycast import cast_brute


def camera_rays(width: int = 64, height: int = 48, fov_rad: float = math.radians(90.0)):
    """(width * height, 3) unit ray directions of a forward (+x) pinhole camera, ENU."""
    focal = 0.5 * width / math.tan(0.5 * fov_rad)
    u, v = np.meshgrid(np.arange(width) - 0.5 * width + 0.5, np.arange(height) - 0.5 * height + 0.5)
    rays = np.stack([np.full(u.size, focal), -u.ravel(), -v.ravel()], axis=1)
    return rays / np.linalg.norm(rays, axis=1, keepdims=True)


def median_ms(fn, repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return 1e3 * float(np.median(samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rays = camera_rays()
    origin = np.array([0.0, 0.0, 1.5])
    max_range = 20.0
    rng = np.random.default_rng(0)
    print(f"{'obstacles':>9} {'in range':>8} {'raycast':>9} {'brute':>9} {'cull':>8} "
          f"{'sdf 3072':>9} {'hit rays':>8}")
    for count in (50, 200, 1000):
        trunks = [Cylinder(tuple(rng.uniform(-20.0, 20.0, 2)), rng.uniform(0.25, 0.5),
                           rng.uniform(3.0, 5.0)) for _ in range(count)]
        world = World((-20.0, -20.0, 0.0), (20.0, 20.0, 6.0), trunks)
        near = world.cull(origin, max_range)
        hits = np.isfinite(world.raycast(origin, rays, max_range)).sum()
        points = origin + rays * rng.uniform(0.0, 5.0, (len(rays), 1))
        timings = [
            median_ms(lambda: world.raycast(origin, rays, max_range), args.repeats),
            median_ms(lambda: cast_brute(world._blocks, origin[None], rays), args.repeats),
            median_ms(lambda: world.cull(origin, max_range), args.repeats),
            median_ms(lambda: world.signed_distance(points), args.repeats),
        ]
        print(f"{count:>9} {len(near.obstacles):>8} " + " ".join(f"{t:>9.3f}" for t in timings[:2])
              + f" {timings[2]:>8.3f} {timings[3]:>9.3f} {hits:>8}")


if __name__ == "__main__":
    main()
