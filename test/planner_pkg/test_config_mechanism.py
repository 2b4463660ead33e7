"""Every config dataclass of planner_pkg goes through the one mechanism (planner_pkg.config_schema.Config).

Found by introspection (every module imported, every dataclass named like a configuration), so a
new config that hand-writes its checks or its from_dict fails here. For each: the plain view
round-trips, and a NaN, an out-of-range value and an unknown key are refused with the dotted key
named. The shipped parameter files list only values that differ from the defaults, and the
defaults issue 14 counted (max_vel 2.0, timeout 60 s, goal tolerance 0.5 m) are written once.
"""
import ast
import dataclasses
import importlib
import json
import math
import pkgutil
import re
import typing
from pathlib import Path

import pytest
import yaml

import planner_pkg
from planner_pkg.config_schema import Config, ConfigError, config_classes, unwrap_optional

ROOT = Path(__file__).resolve().parents[2]
CONFIG_NAME = re.compile(r"(Config|Params|Options|Weights|Gains|Envelope|Intrinsics)$")


def _import_everything():
    skipped = []
    for info in pkgutil.walk_packages(planner_pkg.__path__, "planner_pkg."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError as exc:  # an optional dependency (rclpy, mcap) missing here
            skipped.append(f"{info.name}: {exc}")
    return skipped


SKIPPED = _import_everything()
CONFIGS = sorted(config_classes(), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _all_dataclasses():
    import sys

    out = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("planner_pkg") or module is None:
            continue
        for obj in vars(module).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == name:
                out.append(obj)
    return sorted(set(out), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def test_every_config_dataclass_uses_the_mechanism():
    named = [c for c in _all_dataclasses() if CONFIG_NAME.search(c.__name__)]
    assert len(named) >= 30, [c.__name__ for c in named]
    outside = [f"{c.__module__}.{c.__name__}" for c in named if not issubclass(c, Config)]
    assert not outside, f"config dataclasses outside planner_pkg.config_schema.Config: {outside}"
    for cls in CONFIGS:
        assert cls.__post_init__ is Config.__post_init__, f"{cls.__name__} hand-writes __post_init__ (use _check)"
        for name in ("from_dict", "to_dict", "with_overrides"):
            assert getattr(cls, name) is getattr(Config, name) or getattr(cls, name).__func__ is \
                getattr(Config, name).__func__, f"{cls.__name__} hand-writes {name}"


def test_no_hand_written_from_dict_in_the_package():
    offenders = []
    for path in (ROOT / "planner_pkg").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == "from_dict":
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == ["planner_pkg/config_schema.py"]


def _example(cls):
    """The default instance (a value type without defaults: a typical one)."""
    if cls.__name__ == "CameraIntrinsics":
        return cls.from_fov(64, 48, math.radians(90.0), 0.2, 10.0)
    return cls()


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_plain_view_round_trips(cls):
    default = _example(cls)
    data = default.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain: YAML / JSON as it is
    assert cls.from_dict(data) == default
    assert cls.from_dict(json.loads(json.dumps(data))) == default
    assert default.with_overrides({}) == default


def _scalar_fields(cls):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint, _ = unwrap_optional(hints[f.name])
        if hint in (int, float) and not dataclasses.is_dataclass(hint):
            yield f, hint


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_nan_out_of_range_and_unknown_keys_are_refused_naming_the_key(cls):
    prefix = cls._config_prefix
    checked = 0
    for f, hint in _scalar_fields(cls):
        key = re.escape(prefix + f.name)
        if hint is float:
            with pytest.raises(ConfigError, match=key):
                cls.from_dict({f.name: math.nan})
            with pytest.raises(ConfigError, match=key):
                cls.from_dict({f.name: "1"})
            checked += 1
        low, high = f.metadata.get("range", (-math.inf, math.inf))
        for bad in ([high + 1] if high < math.inf else []) + ([low - 1] if low > -math.inf else []):
            with pytest.raises(ConfigError, match=key):
                cls.from_dict({f.name: hint(bad)})
            checked += 1
    with pytest.raises(ConfigError, match=rf"unknown (.*key|parameter).*{re.escape(prefix)}no_such_key.*known"):
        cls.from_dict({"no_such_key": 1})
    assert checked or not list(_scalar_fields(cls))


def test_nested_errors_name_the_full_dotted_key_and_list_the_known_keys():
    from planner_pkg.planning.ego_config import EgoConfig

    with pytest.raises(ConfigError, match=r"^EgoConfig\.map\.inflation_m must be a finite number >= 0, got nan$"):
        EgoConfig.from_dict({"map": {"inflation_m": math.nan}})
    with pytest.raises(ConfigError, match=r"^EgoConfig\.optimizer\.astar\.tie_breaker must be a finite number >= 1"):
        EgoConfig.from_dict({"optimizer.astar.tie_breaker": 0.5})  # a dotted key reaches the same field
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['EgoConfig\.map\.inflation'\]; known in "
                                          r"EgoConfig\.map: \[.*'inflation_m'"):
        EgoConfig.from_dict({"map": {"inflation": 0.3}})
    with pytest.raises(ConfigError, match=r"^ego\.max_vel_mps must be a positive finite number, got -1\.0$"):
        EgoConfig().with_overrides({"max_vel_mps": -1.0}, prefix="ego.")  # the ROS spelling
    # what the EGO planner sets itself is refused, not silently dropped
    with pytest.raises(ConfigError, match=r"EgoConfig\.optimizer\.max_vel_mps: set by EgoConfig\.max_vel_mps"):
        EgoConfig.from_dict({"optimizer": {"max_vel_mps": 3.0}})
    cfg = EgoConfig.from_dict({"max_vel_mps": 3, "map": {"unknown": "occupied"}, "retry_offset_m": [0.5, 1]})
    assert cfg.max_vel_mps == 3.0 and isinstance(cfg.max_vel_mps, float)
    assert cfg.map.unknown.value == "occupied" and cfg.retry_offset_m == (0.5, 1.0)
    assert cfg.with_overrides({"map.inflation_m": 0.25}).map == dataclasses.replace(
        EgoConfig().map, inflation_m=0.25, unknown=cfg.map.unknown)


def test_a_section_given_in_part_keeps_the_enclosing_configs_default_for_the_rest():
    """EgoConfig's map defaults to a 0.3 m cylinder, not GridMapConfig's own 0.2 m cube: a YAML
    that sets one map key must not silently bring the class defaults back for the others."""
    from planner_pkg.planning.ego_config import EgoConfig
    from planner_pkg.planning.grid_map import GridMapConfig, InflationShape

    default = EgoConfig().map
    assert default != GridMapConfig()
    assert (default.inflation_m, default.inflation_shape) == (0.3, InflationShape.CYLINDER)
    for cfg in (EgoConfig.from_dict({"map": {"max_ray_m": 6.0}}), EgoConfig.from_dict({"map.max_ray_m": 6.0}),
                EgoConfig().with_overrides({"map": {"max_ray_m": 6.0}})):
        assert cfg.map == dataclasses.replace(default, max_ray_m=6.0)
    assert EgoConfig.from_dict({"map": None}).map == default  # None: the section's defaults
    cube = EgoConfig.from_dict({"map": {"inflation_shape": "cube", "inflation_m": 0.2}}).map
    assert cube == dataclasses.replace(GridMapConfig(), free_space_erosion_px=default.free_space_erosion_px)
    assert default.free_space_erosion_px == 2 != GridMapConfig().free_space_erosion_px  # EgoConfig's, kept


def _param_files():
    out = []
    for path in sorted((ROOT / "config").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if isinstance(data, dict) and data and all(isinstance(b, dict) and "ros__parameters" in b
                                                   for b in data.values()):
            out.append(path)
    return out


def test_shipped_parameter_files_list_only_values_that_differ_from_the_defaults():
    pytest.importorskip("rclpy")
    from planner_pkg.nodes.bringup import node_parameter_configs
    from planner_pkg.nodes.params import flatten_yaml_block, param_specs

    configs = node_parameter_configs()
    files = _param_files()
    assert {p.name for p in files} >= {"sim.yaml", "gazebo.yaml", "hardware.yaml"}
    for path in files:
        for key, block in yaml.safe_load(path.read_text()).items():
            node = key.rstrip("/").split("/")[-1]
            specs = {s.name: s for cls, prefix in configs[node] for s in param_specs(cls, prefix=prefix)}
            flat = flatten_yaml_block(block["ros__parameters"] or {})
            same = sorted(k for k, v in flat.items() if k in specs and v == specs[k].default)
            assert not same, f"{path.name} {key}: {same} equal the defaults; list only what differs"


# -- each default written once ----------------------------------------------------------------
CONCEPTS = {"max_vel": {"max_vel_mps", "max_vel", "--max-vel"},
            "timeout": {"timeout_s", "timeout", "--timeout"},
            "goal_tolerance": {"goal_tolerance_m", "goal_tolerance", "--goal-tolerance", "tolerance_m"}}


def _literal(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Call):  # setting(2.0, ...), positive(2.0), field(default=2.0, ...)
        for kw in node.keywords:
            if kw.arg == "default":
                return _literal(kw.value)
        if node.args:
            return _literal(node.args[0])
    return None


def literal_defaults(root: Path):
    """``[(concept, value, where)]``: every numeric literal written as the default of a field,
    argument or command-line option whose name is one of CONCEPTS."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        where = str(path.relative_to(root.parent))
        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                pairs.append((node.target.id, node.value))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.args + node.args.kwonlyargs
                defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + list(node.args.defaults) \
                    + list(node.args.kw_defaults)
                pairs += [(a.arg, d) for a, d in zip(args, defaults) if d is not None]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                pairs += [(node.args[0].value, kw.value) for kw in node.keywords if kw.arg == "default"]
            for name, value in pairs:
                for concept, names in CONCEPTS.items():
                    literal = _literal(value)
                    if name in names and literal is not None:
                        found.append((concept, literal, f"{where}:{node.lineno}"))
    return found


def test_issue_14_defaults_are_written_once():
    by_value = {}
    for concept, value, where in literal_defaults(ROOT / "planner_pkg"):
        by_value.setdefault((concept, value), []).append(where)
    for key in (("max_vel", 2.0), ("timeout", 60.0), ("goal_tolerance", 0.5)):
        assert len(by_value.get(key, [])) <= 1, f"{key} written {len(by_value[key])} times: {by_value[key]}"
    repeated = {k: v for k, v in by_value.items() if len(v) > 1}
    assert not repeated, f"defaults written more than once: {repeated}"


if __name__ == "__main__":  # the scan, printed: python test/planner_pkg/test_config_mechanism.py
    for row in literal_defaults(ROOT / "planner_pkg"):
        print(*row)
