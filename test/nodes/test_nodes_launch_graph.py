"""The launch files compute the same graph as ``bringup``: the same nodes (executable, name,
namespace) with the same parameter file and the same per-node overrides.

ROS 2's ``launch``/``launch_ros`` are not in the PyPI wheels, so the launch files run here against
small stand-ins of the few classes they use (recording their arguments); ``get_package_share_directory``
points at the source tree, whose ``config/`` and ``launch/`` mirror the installed share directory.
With a real ROS 2 install, test_nodes_launch.py also builds the real LaunchDescription.
"""
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import yaml

from planner_pkg.nodes import bringup

ROOT = Path(__file__).resolve().parents[2]


class _Recorded:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context[self.name]


class _PackageNotFoundError(KeyError):
    pass


def _share(package):
    if package == "planner_pkg":
        return str(ROOT)
    raise _PackageNotFoundError(package)


@pytest.fixture
def standin_launch(monkeypatch):
    """Install stand-ins for launch, launch_ros and ament_index_python.packages."""
    modules = {
        "launch": {"LaunchDescription": _Recorded},
        "launch.actions": {n: type(n, (_Recorded,), {}) for n in
                           ("DeclareLaunchArgument", "OpaqueFunction", "LogInfo", "IncludeLaunchDescription")},
        "launch.conditions": {"IfCondition": _Recorded, "UnlessCondition": _Recorded},
        "launch.substitutions": {"LaunchConfiguration": _LaunchConfiguration},
        "launch.launch_description_sources": {"PythonLaunchDescriptionSource": _Recorded},
        "launch_ros": {},
        "launch_ros.actions": {"Node": type("Node", (_Recorded,), {})},
        "ament_index_python": {},
        "ament_index_python.packages": {"get_package_share_directory": _share,
                                        "PackageNotFoundError": _PackageNotFoundError},
    }
    for name, attrs in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)


def _launch(profile, **arguments):
    """Run launch/<profile>.launch.py with the stand-ins: {node name: Node kwargs}."""
    path = ROOT / "launch" / f"{profile}.launch.py"
    spec = importlib.util.spec_from_file_location(f"launch_{profile}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    entities = description.args[0]
    context = {e.args[0]: e.kwargs.get("default_value", "") for e in entities
               if type(e).__name__ == "DeclareLaunchArgument"}
    context.update(arguments)
    opaque = [e for e in entities if type(e).__name__ == "OpaqueFunction"]
    assert len(opaque) == 1
    actions = opaque[0].kwargs["function"](context)
    return {a.kwargs["name"]: a.kwargs for a in actions
            if type(a).__name__ == "Node" and a.kwargs.get("package") == "planner_pkg"}


def _bringup(profile, argv):
    """What bringup starts: {node name: (executable, params file, overrides)}."""
    args = bringup.build_parser().parse_args([profile] + argv)
    assert bringup._prepare(args) is None
    out = {}
    for spec in args.specs:
        raw = bringup.node_overrides(profile, spec, args)
        overrides = {}
        for i in range(1, len(raw), 2):
            name, _, value = raw[i].partition(":=")
            overrides[name] = yaml.safe_load(value)
        out[spec.name] = (spec.executable, Path(args.params), overrides)
    return out


def _launch_overrides(kwargs):
    files = [p for p in kwargs["parameters"] if isinstance(p, str)]
    overrides = {}
    for p in kwargs["parameters"]:
        if isinstance(p, dict):
            overrides.update(p)
    return files, overrides


CASES = [
    ("sim", {}, []),
    ("sim", {"world": "forest_small.yaml", "start": "[-10.0, 1.0, 1.5]", "planner": "direct"},
     ["--world", "forest_small.yaml", "--start=-10,1,1.5", "--planner", "direct"]),
    ("sim", {"planner": "policy"}, ["--planner", "policy"]),
    ("gazebo", {"world": "forest_small.yaml", "start": "[-12.0, 0.0, 1.0]"},
     ["--world", "forest_small.yaml", "--start=-12,0,1"]),
    ("hardware", {}, []),
    ("hardware", {"planner": "policy"}, ["--planner", "policy"]),
]


@pytest.mark.parametrize("profile,arguments,argv", CASES,
                         ids=[f"{c[0]}-{'-'.join(c[1].values()) or 'default'}" for c in CASES])
def test_launch_file_and_bringup_start_the_same_nodes_with_the_same_parameters(standin_launch, profile,
                                                                                arguments, argv):
    launched = _launch(profile, **arguments)
    started = _bringup(profile, argv)
    assert set(launched) == set(started), f"{profile}.launch.py and bringup start different nodes"
    for name, (executable, params_file, overrides) in started.items():
        kwargs = launched[name]
        assert kwargs["executable"] == executable
        assert kwargs["namespace"] == ""
        files, launch_overrides = _launch_overrides(kwargs)
        assert [Path(f).resolve() for f in files] == [params_file.resolve()]
        assert launch_overrides.get("use_sim_time") == overrides.pop("use_sim_time"), name
        launch_overrides.pop("use_sim_time", None)
        if profile == "gazebo" and name == "sim_bridge":
            assert launch_overrides.pop("mode") == overrides.pop("mode") == "gazebo"
            # the launch file hands Gazebo the spawn pose; the sim bridge does no physics there
            overrides.pop("start_m", None)
        for key in ("world_file",):
            if key in launch_overrides or key in overrides:
                assert Path(launch_overrides.pop(key)).resolve() == Path(overrides.pop(key)).resolve()
        assert launch_overrides == overrides, f"{profile}: {name}'s overrides differ"


def test_launch_namespace_reaches_every_node(standin_launch):
    for profile in ("sim", "hardware"):
        for planner in ("", "policy"):
            for kwargs in _launch(profile, namespace="drone1", planner=planner).values():
                assert kwargs["namespace"] == "drone1"


def test_hardware_launch_policy_replaces_planner_and_traj_server(standin_launch):
    assert set(_launch("hardware")) == {"planner", "traj_server", "fcu_bridge"}  # default: the EGO graph
    launched = _launch("hardware", planner="policy")
    assert set(launched) == {"policy", "fcu_bridge"}
    assert launched["policy"]["executable"] == "policy_node"
    files, overrides = _launch_overrides(launched["policy"])
    assert [Path(f).name for f in files] == ["hardware.yaml"] and overrides == {"use_sim_time": False}
    # a known flying area bounds the policy's goals as it does the planner's
    world = _launch("hardware", planner="policy", world="forest_small.yaml")["policy"]
    assert {"geofence_min_m", "geofence_max_m"} <= set(_launch_overrides(world)[1])
