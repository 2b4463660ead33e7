"""Ray-casting cost of planner_pkg.world for a depth camera, printed as a table.

A 64 x 48 pinhole camera (90 deg horizontal FOV, 3072 rays) at (0, 0, 1.5) looking along +x
into random forests of 50 / 200 / 1000 trunks filling a 40 m x 40 m square around it, out to
20 m. Columns, in milliseconds per call:

- ``raycast``: the public ``World.raycast`` call (validation, normalisation, ground, and the
  single-origin driver: image-plane culling for a camera's rays);
- ``image``: that driver alone (``cast_single_origin``, via ``raycast_fast.cast_image``);
- ``groups``: the previous single-origin driver on the same rays (angular groups of 8 rays,
  ``cast_angular_groups``), the reference the image path is measured against;
- ``brute``: every ray against every obstacle (``cast_brute``);
- ``cull``: ``World.cull``; ``sdf 3072``: ``signed_distance`` for 3072 points.

The machine is shared and noisy, so the candidates are timed in alternating rounds in one process
(each a run of calls in a row, so that one candidate's large temporaries do not leave the next
one page-faulting) and both the best (min) and the median of the calls are printed; compare
columns within a row.
``speedup`` is groups / image on the best times. Never passes or fails on time.

    python benchmarks/world_raycast.py [--repeats N]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from planner_pkg.world import Cylinder, World  # noqa: E402
from planner_pkg.world.raycast import (cast_angular_groups, cast_brute,  # noqa: E402
                                       cast_single_origin)


def camera_rays(width: int = 64, height: int = 48, fov_rad: float = math.radians(90.0)):
    """(width * height, 3) unit ray directions of a forward (+x) pinhole camera, ENU."""
    focal = 0.5 * width / math.tan(0.5 * fov_rad)
    u, v = np.meshgrid(np.arange(width) - 0.5 * width + 0.5, np.arange(height) - 0.5 * height + 0.5)
    rays = np.stack([np.full(u.size, focal), -u.ravel(), -v.ravel()], axis=1)
    return rays / np.linalg.norm(rays, axis=1, keepdims=True)


def round_robin_ms(fns: dict, repeats: int, rounds: int = 5) -> dict:
    """{name: (best, median)} milliseconds per call. Each round times every candidate in turn,
    ``repeats`` calls in a row (warm: the allocator and caches in the candidate's own steady
    state, not in the state another candidate's large arrays leave), so slow drifts in the load
    of the shared machine hit all candidates alike."""
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            for _ in range(repeats):
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
    return {name: (1e3 * min(s), 1e3 * float(np.median(s))) for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="calls per candidate per round")
    args = parser.parse_args()
    rays = camera_rays()
    origin = np.array([0.0, 0.0, 1.5])
    max_range = 20.0
    rng = np.random.default_rng(0)
    print("ms per call, best / median of the calls (rounds of each candidate in turn)")
    print(f"{'obstacles':>9} {'in range':>8} {'raycast':>13} {'image':>13} {'groups':>13} "
          f"{'brute':>13} {'cull':>11} {'sdf 3072':>13} {'speedup':>7} {'hit rays':>8}")
    for count in (50, 200, 1000):
        trunks = [Cylinder(tuple(rng.uniform(-20.0, 20.0, 2)), rng.uniform(0.25, 0.5),
                           rng.uniform(3.0, 5.0)) for _ in range(count)]
        world = World((-20.0, -20.0, 0.0), (20.0, 20.0, 6.0), trunks)
        blocks = world._blocks
        near = world.cull(origin, max_range)
        image = cast_single_origin(blocks, origin, rays, max_range)
        groups = cast_angular_groups(blocks, origin, rays, max_range)
        brute = cast_brute(blocks, origin[None], rays)
        within = brute <= max_range
        assert np.array_equal(image[within], brute[within]) and np.array_equal(
            groups[within], brute[within]), "drivers disagree"
        hits = np.isfinite(world.raycast(origin, rays, max_range)).sum()
        points = origin + rays * rng.uniform(0.0, 5.0, (len(rays), 1))
        t = round_robin_ms({
            "raycast": lambda: world.raycast(origin, rays, max_range),
            "image": lambda: cast_single_origin(blocks, origin, rays, max_range),
            "groups": lambda: cast_angular_groups(blocks, origin, rays, max_range),
            "cull": lambda: world.cull(origin, max_range),
        }, args.repeats)
        t.update(round_robin_ms({"brute": lambda: cast_brute(blocks, origin[None], rays),
                                 "sdf": lambda: world.signed_distance(points)},
                                max(1, args.repeats // 10)))
        cells = " ".join(f"{t[k][0]:>6.3f}/{t[k][1]:<6.3f}"
                         for k in ("raycast", "image", "groups", "brute"))
        print(f"{count:>9} {len(near.obstacles):>8} {cells} "
              f"{t['cull'][0]:>5.3f}/{t['cull'][1]:<5.3f} {t['sdf'][0]:>6.3f}/{t['sdf'][1]:<6.3f}"
              f" {t['groups'][0] / t['image'][0]:>6.1f}x {hits:>8}")


if __name__ == "__main__":
    main()
