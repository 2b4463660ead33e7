"""The example worlds shipped in config/worlds load, round-trip, and match their generator call."""
import pathlib

import numpy as np
import pytest

from planner_pkg.world import (GENERATOR_PARAMS, World, generate_world, load_world, save_world,
                               to_sdf)

WORLDS = pathlib.Path(__file__).resolve().parents[3] / "config" / "worlds"

# File -> the generate_world call written in its header comment.
SHIPPED = {
    "forest_small.yaml": ("forest", 1, dict(size_x=30.0, size_y=12.0, density=0.12,
                                            start=(-12.0, 0.0, 1.0), goal=(12.0, 0.0, 1.0))),
    "cluttered.yaml": ("cluttered", 2, {}),
    "walls.yaml": ("walls", 3, dict(windows_per_wall=2)),
    "gates.yaml": ("gates", 4, {}),
}


def test_every_shipped_world_is_listed():
    assert sorted(p.name for p in WORLDS.glob("*.yaml")) == sorted(SHIPPED)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_world_loads_and_round_trips(name, tmp_path):
    world = load_world(WORLDS / name)
    kind, seed, params = SHIPPED[name]
    assert world == generate_world(kind, seed, **params)
    assert f"generate_world({kind!r}, seed={seed}" in (WORLDS / name).read_text()
    for suffix in (".yaml", ".json"):
        save_world(world, tmp_path / f"copy{suffix}")
        assert load_world(tmp_path / f"copy{suffix}") == world
    assert to_sdf(world).count("<model ") == len(world.obstacles) + 1
    # Nothing solid at the start of the documented route.
    defaults = GENERATOR_PARAMS[kind](**params)
    start = (defaults.track_radius_x, 0.0, defaults.gate_height) if kind == "gates" \
        else defaults.start
    assert World(world.bounds_min, world.bounds_max, world.obstacles,
                 ground=False).signed_distance(np.array(start)) > 1.0
