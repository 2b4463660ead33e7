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

ROOT = Path(__file__).resolve().parents[3]


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


INSTALLED = {"planner_pkg": str(ROOT)}  # package -> share directory; a test may add one (rviz2)


def _share(package):
    if package in INSTALLED:
        return INSTALLED[package]
    raise _PackageNotFoundError(package)


class _ExecuteProcess(_Recorded):
    """launch >= 3.1 (Jazzy, Kilted): takes respawn_max_retries."""

    def __init__(self, *, respawn=False, respawn_delay=None, respawn_max_retries=-1, on_exit=None, **kwargs):
        super().__init__(**kwargs)


class _ExecuteProcessHumble(_Recorded):
    """launch 1.x (Humble): no respawn_max_retries (passing it would be a TypeError)."""

    def __init__(self, *, respawn=False, respawn_delay=None, on_exit=None, **kwargs):
        super().__init__(**kwargs)


class _LaunchConfig:
    log_dir = None  # set per test: this launch run's log folder


def _install_standins(monkeypatch, execute_process, log_dir):
    modules = {
        "launch": {"LaunchDescription": _Recorded},
        "launch.actions": dict({n: type(n, (_Recorded,), {}) for n in
                                ("DeclareLaunchArgument", "OpaqueFunction", "LogInfo", "IncludeLaunchDescription",
                                 "EmitEvent")}, ExecuteProcess=execute_process),
        "launch.conditions": {"IfCondition": _Recorded, "UnlessCondition": _Recorded},
        "launch.events": {"Shutdown": type("Shutdown", (_Recorded,), {})},
        "launch.logging": {"launch_config": _LaunchConfig},
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
    log_dir.mkdir()
    monkeypatch.setattr(_LaunchConfig, "log_dir", str(log_dir))


@pytest.fixture
def standin_launch(monkeypatch, tmp_path):
    """Install stand-ins for launch (a current one), launch_ros and ament_index_python.packages."""
    _install_standins(monkeypatch, _ExecuteProcess, tmp_path / "launch_log")


@pytest.fixture
def standin_launch_humble(monkeypatch, tmp_path):
    """The same with Humble's launch: no respawn_max_retries."""
    _install_standins(monkeypatch, _ExecuteProcessHumble, tmp_path / "launch_log")


def _launch(profile, **arguments):
    """Run launch/<profile>.launch.py with the stand-ins: {node name: Node kwargs} of our nodes."""
    return {a.kwargs["name"]: a.kwargs for a in _actions(profile, **arguments)
            if type(a).__name__ == "Node" and a.kwargs.get("package") == "planner_pkg"}


def _actions(profile, **arguments):
    """Every action launch/<profile>.launch.py's OpaqueFunction returns (with the stand-ins)."""
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
    return opaque[0].kwargs["function"](context)


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
    ("sim", {"planner": "racer", "track": str(ROOT / "config" / "race" / "track_example.yaml")},
     ["--planner", "racer", "--track", str(ROOT / "config" / "race" / "track_example.yaml")]),
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
                a, b = Path(launch_overrides.pop(key)).resolve(), Path(overrides.pop(key)).resolve()
                # the racer's world is written for each run (the launch log folder / a temporary one)
                assert a == b or (arguments.get("planner") == "racer" and a.read_text() == b.read_text())
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


# ---------------------------------------------------------------------------------------------
# restarts (launch/node_supervision.py), RViz2, the Gazebo world file
# ---------------------------------------------------------------------------------------------
class _Exited:
    def __init__(self, returncode):
        self.returncode = returncode


class _Context:
    def __init__(self, is_shutdown=False):
        self.is_shutdown = is_shutdown


def _stops_the_launch(actions) -> bool:
    """The handler's actions end the launch as a failure: the last one raises (launch then shuts
    down in order and `ros2 launch` exits 1; a Shutdown event would exit 0), with the logged reason."""
    actions = list(actions or [])
    if not actions or type(actions[-1]).__name__ != "OpaqueFunction":
        return False
    logged = [a.kwargs["msg"] for a in actions if type(a).__name__ == "LogInfo"]
    with pytest.raises(RuntimeError) as raised:
        actions[-1].kwargs["function"]({})
    return type(raised.value).__name__ == "NodeGaveUp" and any(str(raised.value) in m for m in logged)


ALL_GRAPHS = [("sim", {}), ("sim", {"planner": "policy"}), ("gazebo", {"world": "forest_small.yaml"}),
              ("hardware", {}), ("hardware", {"planner": "policy"})]


@pytest.mark.parametrize("profile,arguments", ALL_GRAPHS, ids=[f"{p}-{a.get('planner', 'ego')}" for p, a in ALL_GRAPHS])
def test_nodes_restart_like_bringup_at_most_max_restarts_and_never_after_a_refused_parameter(standin_launch, profile,
                                                                                              arguments):
    """The launch files used to respawn every node forever, also one that exits 2 on a bad parameter
    (it can never come up). Now: bringup's rules (respawn per NodeSpec, 1 s apart, at most
    MAX_RESTARTS times; exit 2 -> no restart, the launch stops)."""
    specs = {s.name: s for s in bringup.profile_specs(profile, arguments.get("planner"))}
    launched = _launch(profile, **arguments)
    assert set(launched) == set(specs)
    for name, kwargs in launched.items():
        spec = specs[name]
        assert kwargs["respawn"] is spec.respawn, name
        if spec.respawn:
            # > 0: the handler's Shutdown reaches launch during this delay, before it restarts the node
            assert kwargs["respawn_delay"] == spec.respawn_delay_s > 0
            assert kwargs["respawn_max_retries"] == bringup.MAX_RESTARTS
        on_exit = kwargs["on_exit"]
        assert _stops_the_launch(on_exit(_Exited(bringup.EXIT_CONFIG), _Context())), f"{name}: exit 2 must stop"
        # a stopping launch: every exit is expected, nothing more to do
        assert on_exit(_Exited(bringup.EXIT_CONFIG), _Context(is_shutdown=True)) is None
    if profile == "sim":
        assert launched["sim_bridge"]["respawn"] is False  # as bringup: the simulator is never restarted


def test_a_crashing_node_is_restarted_max_restarts_times_then_the_launch_stops(standin_launch_humble):
    """With Humble's launch (no respawn_max_retries, which must then not be passed) the exit handler
    itself ends the restarts: MAX_RESTARTS crashes are restarted, the next one stops the launch."""
    kwargs = _launch("hardware")["planner"]
    assert "respawn_max_retries" not in kwargs and kwargs["respawn"] is True
    on_exit = kwargs["on_exit"]
    for _ in range(bringup.MAX_RESTARTS):
        assert on_exit(_Exited(1), _Context()) is None  # launch respawns it
    actions = on_exit(_Exited(-11), _Context())
    assert _stops_the_launch(actions)
    message = next(a.kwargs["msg"] for a in actions if type(a).__name__ == "LogInfo")
    assert "planner" in message and str(bringup.MAX_RESTARTS + 1) in message


def test_exit_2_names_the_node_and_says_it_is_not_restarted(standin_launch):
    actions = _launch("sim")["traj_server"]["on_exit"](_Exited(2), _Context())
    message = next(a.kwargs["msg"] for a in actions if type(a).__name__ == "LogInfo")
    assert "traj_server" in message and "configuration" in message and "not restarting" in message


def test_rviz_true_without_rviz2_starts_the_graph_and_says_so(standin_launch):
    """``rviz:=true`` without rviz2 installed took the whole launch down ("package 'rviz2' not found")."""
    actions = _actions("sim", rviz="true")
    assert not [a for a in actions if type(a).__name__ == "Node" and a.kwargs.get("package") == "rviz2"]
    assert any(type(a).__name__ == "LogInfo" and "rviz2 is not installed" in a.kwargs["msg"] for a in actions)
    assert set(_launch("sim", rviz="true")) == {"sim_bridge", "planner", "traj_server"}


@pytest.mark.parametrize("planner", ["", "policy"])
def test_rviz_true_with_rviz2_installed_starts_it_with_our_config(standin_launch, monkeypatch, tmp_path, planner):
    monkeypatch.setitem(INSTALLED, "rviz2", str(tmp_path))
    rviz = [a.kwargs for a in _actions("sim", rviz="true", planner=planner)
            if type(a).__name__ == "Node" and a.kwargs.get("package") == "rviz2"]
    assert len(rviz) == 1 and rviz[0]["arguments"][-1] == str(ROOT / "config" / "planner.rviz")
    assert rviz[0]["parameters"] == [{"use_sim_time": True}]
    for off in ("false", "0"):
        assert not [a for a in _actions("sim", rviz=off, planner=planner) if type(a).__name__ == "Node"
                    and a.kwargs.get("package") == "rviz2"]


def test_gazebo_writes_the_world_sdf_into_the_launch_log_folder_not_a_temp_folder(standin_launch, monkeypatch):
    """It wrote to a fresh tempfile.mkdtemp() folder, never removed, not where its docstring said."""
    import tempfile

    def no_temp_folders(*args, **kwargs):
        raise AssertionError("gazebo.launch.py made a temporary folder")

    monkeypatch.setattr(tempfile, "mkdtemp", no_temp_folders)
    actions = _actions("gazebo", world="forest_small.yaml")
    message = next(a.kwargs["msg"] for a in actions if type(a).__name__ == "LogInfo" and ".sdf" in a.kwargs["msg"])
    sdf = Path(_LaunchConfig.log_dir) / "forest_small.sdf"
    assert str(sdf) in message and sdf.read_text().lstrip().startswith("<?xml")
    assert "<world" in sdf.read_text()


def test_swarm_launch_and_bringup_start_the_same_nodes_with_the_same_parameters(standin_launch, tmp_path):
    """launch/swarm.launch.py drones:=3 starts what ``bringup sim --drones 3`` starts: the swarm
    simulator and a planner + trajectory server in each of /drone0../drone2, same overrides."""
    import json

    from planner_pkg.nodes import swarm_bringup

    starts = [[-12.0, -1.0, 1.0], [-12.0, 0.0, 1.0], [-12.0, 1.0, 1.0]]
    (tmp_path / "s.json").write_text(json.dumps(starts))
    launched = [a.kwargs for a in _actions("swarm", drones="3", starts=str(tmp_path / "s.json"))
                if type(a).__name__ == "Node"]
    parser = bringup.build_parser()
    swarm_bringup.add_arguments(parser)
    args = parser.parse_args(["sim", "--drones", "3", "--starts", str(tmp_path / "s.json")])
    assert swarm_bringup._prepare(args) is None
    started = swarm_bringup._commands(args)
    assert len(launched) == len(started) == 7
    by_key = {(k["namespace"].strip("/"), k["name"]): k for k in launched}
    for key, (spec, cmd) in started.items():
        ns = key.split("_")[0] if key.startswith("drone") else ""
        kwargs = by_key[(ns, spec.name)]
        assert kwargs["executable"] == spec.executable
        # the command's -p overrides (the last one of a name wins, as in ROS)
        overrides = {}
        for i, a in enumerate(cmd):
            if a == "-p":
                name, _, value = cmd[i + 1].partition(":=")
                overrides[name] = yaml.safe_load(value)
        files, launch_overrides = _launch_overrides(kwargs)
        assert [Path(f).resolve() for f in files] == [Path(args.params).resolve()]
        for k in ("world_file",):
            if k in launch_overrides or k in overrides:
                assert Path(launch_overrides.pop(k)).resolve() == Path(overrides.pop(k)).resolve()
        assert launch_overrides == overrides, key
    assert {k["namespace"] for k in launched} == {"", "drone0", "drone1", "drone2"}
