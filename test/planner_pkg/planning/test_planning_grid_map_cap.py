"""Issue 20 item 3: the grid map's voxel count is bounded when the config is built (a resolution
of 0.1 mm passed validation and then asked for 8 PiB at the planner's first goal)."""
import pytest

from planner_pkg.planning.grid_map_config import BYTES_PER_VOXEL, MAX_VOXELS, GridMapConfig


def test_a_window_above_the_memory_cap_is_refused_naming_both_keys():
    with pytest.raises(ValueError, match=r"resolution_m 0.0001 .*size_m.*memory cap") as info:
        GridMapConfig(resolution_m=0.0001)
    assert "PiB" in str(info.value)  # says how much it would have needed


def test_the_cap_is_a_voxel_count_whatever_the_shape():
    # 2**25 voxels exactly (0.1 m voxels): allowed; one layer more: refused
    side = 2**10  # 1024 x 1024 x 32 = 2**25
    ok = GridMapConfig(size_m=(side * 0.1, side * 0.1, 32 * 0.1))
    assert ok.size_m[2] == pytest.approx(3.2)
    with pytest.raises(ValueError, match="memory cap"):
        GridMapConfig(size_m=(side * 0.1, side * 0.1, 33 * 0.1))
    assert MAX_VOXELS * BYTES_PER_VOXEL < 2**30  # the documented cap stays below 1 GiB of arrays
    GridMapConfig()  # the default window is far below it


def test_the_ego_parameters_are_refused_at_startup_not_at_the_first_goal():
    from planner_pkg.nodes.params import build_config, param_specs
    from planner_pkg.planning.ego_planner import EgoConfig

    specs = param_specs(EgoConfig, prefix="ego.")
    with pytest.raises(ValueError, match="ego.map.resolution_m.*memory cap"):
        build_config(EgoConfig, specs, {"ego.map.resolution_m": 0.0001})
