"""params.py: descriptors from config dataclasses, validation with reasons, and the shipped YAML."""
import math
from pathlib import Path

import pytest
import yaml

from planner_pkg.nodes.params import ParameterConfigError, build_config, flatten_yaml_block, param_specs
from planner_pkg.nodes.planner_node import PlannerNodeConfig, PlannerNode
from planner_pkg.nodes.sim_bridge import SimBridgeConfig
from planner_pkg.nodes.traj_server import TrajServer, TrajServerConfig
from planner_pkg.nodes.policy_node import PolicyNodeConfig
from planner_pkg.planning.ego_planner import EgoConfig

ROOT = Path(__file__).resolve().parents[3]
NODE_CONFIGS = {"sim_bridge": [(SimBridgeConfig, "")], "traj_server": [(TrajServerConfig, "")],
                "planner": [(PlannerNodeConfig, ""), (EgoConfig, "ego.")], "policy": [(PolicyNodeConfig, "")]}


def test_specs_cover_fields_with_types_ranges_and_descriptions():
    specs = {s.name: s for s in param_specs(TrajServerConfig)}
    assert specs["rate_hz"].kind == "double" and specs["rate_hz"].range == (1.0, 1000.0)
    assert specs["yaw_mode"].choices == ("velocity", "trajectory")
    assert all(s.description for s in specs.values())
    planner = {s.name: s for s in param_specs(PlannerNodeConfig)}
    assert planner["geofence_min_m"].kind == "double_array"
    assert planner["max_vel_mps"].optional and math.isnan(planner["max_vel_mps"].default)
    assert planner["camera.width_px"].kind == "integer"  # nested dataclass -> dotted names


def test_build_config_refuses_with_a_reason_naming_the_parameter():
    specs = param_specs(PlannerNodeConfig)
    cfg = build_config(PlannerNodeConfig, specs, {"max_vel_mps": math.nan, "rate_hz": 20.0})
    assert cfg.max_vel_mps is None and cfg.rate_hz == 20.0
    with pytest.raises(ValueError, match="geofence"):
        build_config(PlannerNodeConfig, specs, {"geofence_min_m": [0.0, 0.0, 5.0], "geofence_max_m": [1.0, 1.0, 1.0]})
    with pytest.raises(ValueError, match=r"^odom_timeout_s must be a finite number in 0\.01\.\.10, got -1\.0$"):
        build_config(PlannerNodeConfig, specs, {"odom_timeout_s": -1.0})
    with pytest.raises(ValueError, match=r"^planner must be one of \(.*'ego'.*\), got 'rrt'$"):
        build_config(PlannerNodeConfig, specs, {"planner": "rrt"})
    with pytest.raises(ValueError, match="unknown parameter"):
        build_config(PlannerNodeConfig, specs, {"max_velocity": 2.0})


def test_ego_parameters_are_validated_by_egoconfig():
    specs = param_specs(EgoConfig, prefix="ego.")
    names = {s.name for s in specs}
    assert {"ego.max_vel_mps", "ego.map.resolution_m"} <= names
    with pytest.raises(ValueError, match="ego.max_vel_mps"):
        build_config(EgoConfig, specs, {"ego.max_vel_mps": -2.0})


@pytest.mark.parametrize("name", ["sim.yaml", "gazebo.yaml", "hardware.yaml"])
def test_shipped_yaml_keys_are_declared_parameters_and_values_valid(name):
    data = yaml.safe_load((ROOT / "config" / name).read_text())
    for key, block in data.items():
        assert key.startswith("/**/"), f"{name}: use '/**/{key}' so namespaced nodes get the values"
        node = key[len("/**/"):]
        if node not in NODE_CONFIGS:
            continue  # e.g. fcu_bridge: checked by its own issue's tests
        flat = flatten_yaml_block(block["ros__parameters"])
        flat.pop("use_sim_time", None)
        known = {}
        for cls, prefix in NODE_CONFIGS[node]:
            known.update({s.name: (cls, prefix) for s in param_specs(cls, prefix=prefix)})
        unknown = sorted(set(flat) - set(known))
        assert not unknown, f"{name}: {node} has no parameter(s) {unknown} (typos are silently dropped by ROS)"
        for cls, prefix in NODE_CONFIGS[node]:
            mine = {k: v for k, v in flat.items() if known[k][0] is cls}
            specs = param_specs(cls, prefix=prefix)
            kinds = {s.name: s.kind for s in specs}
            for k, v in mine.items():  # ROS parameters are typed: 2 is not a double
                if kinds[k] == "double":
                    assert isinstance(v, float), f"{name}: {node}.{k} = {v!r} must be written as a double"
            build_config(cls, specs, mine)


def test_node_refuses_out_of_range_parameters_at_startup_and_at_runtime(ros):
    from rclpy.parameter import Parameter

    with pytest.raises(ParameterConfigError, match="rate_hz"):
        TrajServer(context=ros.context, parameter_overrides=[Parameter("rate_hz", value=-5.0)])
    with pytest.raises(ParameterConfigError, match="geofence"):
        PlannerNode(context=ros.context, parameter_overrides=[
            Parameter("planner", value="direct"), Parameter("geofence_min_m", value=[5.0, 5.0, 5.0]),
            Parameter("geofence_max_m", value=[1.0, 1.0, 1.0])])
    node = ros.add(TrajServer(context=ros.context))
    bad = node.set_parameters([Parameter("rate_hz", value=5000.0)])[0]
    assert not bad.successful and "rate_hz" in bad.reason
    bad = node.set_parameters([Parameter("yaw_mode", value="sideways")])[0]
    assert not bad.successful and "yaw_mode must be one of" in bad.reason
    ok = node.set_parameters([Parameter("max_yaw_rate_rad_s", value=1.0)])[0]
    assert ok.successful and node.params.config.max_yaw_rate_rad_s == 1.0 and node.yaw.max_rate == 1.0
    described = node.describe_parameters(["rate_hz"])[0]
    assert described.description and described.floating_point_range[0].to_value == 1000.0


def test_planner_node_cross_field_check_at_runtime(ros):
    from rclpy.parameter import Parameter

    node = ros.add(PlannerNode(context=ros.context, parameter_overrides=[Parameter("planner", value="direct")]))
    res = node.set_parameters_atomically([Parameter("geofence_min_m", value=[0.0, 0.0, 200.0])])
    assert not res.successful and "geofence" in res.reason
    res = node.set_parameters([Parameter("planner", value="direct"), Parameter("rate_hz", value=20.0)])
    assert all(r.successful for r in res) and node.params.config.rate_hz == 20.0


def test_planner_node_speed_override_brings_the_acceleration_limit_for_it(ros):
    """The node's max_vel_mps means what fly --max-vel means: EGO flies 6 m/s with 7 m/s^2, not
    with the 3 m/s^2 its ego.max_acc_mps2 default chose for 2 m/s."""
    from rclpy.parameter import Parameter

    from planner_pkg.planning.ego_config import speed_scaled_max_acc

    node = ros.add(PlannerNode(context=ros.context, parameter_overrides=[Parameter("max_vel_mps", value=6.0)]))
    assert node.planner is not None, node.planner_error
    assert node.planner.config.max_vel_mps == 6.0
    assert node.planner.config.max_acc_mps2 == speed_scaled_max_acc(6.0) > EgoConfig().max_acc_mps2
    plain = ros.add(PlannerNode(context=ros.context, namespace="/plain",
                                parameter_overrides=[Parameter("ego.max_vel_mps", value=6.0)]))
    # the planner's own parameters are taken as given
    assert (plain.planner.config.max_vel_mps, plain.planner.config.max_acc_mps2) == (6.0, EgoConfig().max_acc_mps2)


def test_descriptors_carry_the_config_metadata_and_the_config_validates_changes(ros):
    """The ROS descriptors are read from the config's field metadata (one declaration): ranges,
    bounds text, choices, descriptions; the optimiser's speed limits, which EgoConfig sets itself,
    are not parameters; a change is validated by the config and refused naming the parameter."""
    from rclpy.parameter import Parameter

    from planner_pkg.nodes.params import ConfigParameters

    node = ros.node("config_descriptors")
    params = ConfigParameters(node, EgoConfig, prefix="ego.")
    assert "ego.optimizer.max_vel_mps" not in params.names and "ego.optimizer.max_acc_mps2" not in params.names
    assert "ego.optimizer.max_rebounds" in params.names
    names = ["ego.max_vel_mps", "ego.speed_headroom", "ego.max_consecutive_failures", "ego.map.unknown",
             "ego.unknown_space.margin_m", "ego.emergency_decel_mps2"]
    vel, headroom, failures, unknown, margin, decel = node.describe_parameters(names)
    assert vel.floating_point_range[0].from_value == 0.0 and vel.additional_constraints == "must be > 0"
    assert vel.description.startswith("speed and acceleration limits")  # the docstring line of the field
    assert (headroom.floating_point_range[0].from_value, headroom.floating_point_range[0].to_value) == (0.0, 0.5)
    assert failures.integer_range[0].from_value == 1 and failures.additional_constraints == "must be >= 1"
    assert unknown.additional_constraints == "one of: free, occupied"
    assert margin.floating_point_range[0].to_value == 10.0 and "unobserved" in margin.description
    assert not decel.floating_point_range and "(NaN = none)" in decel.description  # optional: NaN passes
    bad = node.set_parameters([Parameter("ego.max_vel_mps", value=0.0)])[0]  # inside the closed descriptor range
    assert not bad.successful and "ego.max_vel_mps must be a positive finite number" in bad.reason
    bad = node.set_parameters([Parameter("ego.map.prob_hit", value=0.4)])[0]  # a cross-field rule
    assert not bad.successful and "ego.map.prob_miss" in bad.reason
    ok = node.set_parameters([Parameter("ego.map.unknown", value="occupied"),
                              Parameter("ego.emergency_decel_mps2", value=math.nan)])
    assert all(r.successful for r in ok)
    assert params.config.map.unknown.value == "occupied" and params.config.emergency_decel_mps2 is None
