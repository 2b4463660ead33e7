"""ament_python package `planner_pkg`, shipping the `autograd_core` library beside it.

`pip install -e .` works on a plain Python 3.11 machine; `colcon build` works in a ROS 2 workspace.
The ROS 2 Kilted PyPI wheels are in the `ros` extra: a user with an apt ROS 2 install sources it
instead.
"""
from glob import glob
import os

from setuptools import find_packages, setup

PACKAGE = "planner_pkg"

ROS_WHEELS = [
    "ros-rclpy",
    "ros-std-msgs",
    "ros-geometry-msgs",
    "ros-nav-msgs",
    "ros-sensor-msgs",
    "ros-visualization-msgs",
    "ros-trajectory-msgs",
    "ros-diagnostic-msgs",
    "ros-std-srvs",
    "ros-rosgraph-msgs",
    "ros-rmw-fastrtps-cpp",
]


def _files(pattern):
    return sorted(p for p in glob(pattern) if os.path.isfile(p))


# Console scripts: one per ROS node (`ros2 run planner_pkg <name>`), plus the CLI.
CONSOLE_SCRIPTS = [
    "planner_pkg = planner_pkg.cli:main",
    "bringup = planner_pkg.nodes.swarm_bringup:main",  # bringup.main plus --drones / --drone-id
    # the nodes start through planner_pkg.nodes.run: a Ctrl-C during their imports exits 0 quietly
    "sim_bridge = planner_pkg.nodes.run:sim_bridge",
    "planner_node = planner_pkg.nodes.run:planner_node",
    "traj_server = planner_pkg.nodes.run:traj_server",
    "fcu_bridge = planner_pkg.nodes.run:fcu_bridge",
    "policy_node = planner_pkg.nodes.run:policy_node",
    "recorder = planner_pkg.nodes.run:recorder",
    "viz_node = planner_pkg.nodes.run:viz_node",
    "racer_node = planner_pkg.nodes.run:racer_node",
    "swarm_sim = planner_pkg.nodes.run:swarm_sim",
]

setup(
    name=PACKAGE,
    version="0.1.0",
    description="Onboard quadrotor autonomy: EGO-style B-spline planner, learned depth policy, "
    "embedded simulator, MAVLink bridge; on the autograd_core engine.",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["autograd_core", "autograd_core.*", "planner_pkg", "planner_pkg.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", _files("launch/*")),
        ("share/" + PACKAGE + "/config", _files("config/*")),
        ("share/" + PACKAGE + "/config/worlds", _files("config/worlds/*")),
        ("share/" + PACKAGE + "/config/policy", _files("config/policy/*")),
        ("share/" + PACKAGE + "/config/race", _files("config/race/*")),
        ("share/" + PACKAGE + "/config/systemd", _files("config/systemd/*")),
        ("share/" + PACKAGE + "/config/foxglove", _files("config/foxglove/*")),
        ("share/" + PACKAGE + "/rviz", _files("rviz/*")),
        ("share/" + PACKAGE + "/docs", _files("docs/*")),
    ],
    install_requires=[
        "numpy>=1.26",
        "scipy>=1.11",
        "pyyaml>=6.0",
        "pymavlink>=2.4.40",
        "safetensors>=0.4",
        "tqdm>=4.66",
        "threadpoolctl>=3.1",
    ],
    extras_require={
        "ros": ROS_WHEELS,
        # foxglove-sdk and websockets: the live-view tests talk to the real server with a real client
        "test": ["pytest>=8.0", "matplotlib>=3.8", "onnx>=1.16", "onnxruntime>=1.18",
                 "mcap-ros2-support>=0.5", "foxglove-sdk>=0.30,<0.31", "websockets>=14", "protobuf>=4.25"],
        "export": ["onnx>=1.16", "onnxruntime>=1.18"],
        "plots": ["matplotlib>=3.8"],
        # the live view: `fly --viz`, `bringup sim --viz` (a Foxglove WebSocket server; docs/viz.md)
        "viz": ["foxglove-sdk>=0.30,<0.31"],
        # MCAP recording (`bringup --record`, the recorder node) and `python -m planner_pkg plot RUN.mcap`.
        "record": ["mcap-ros2-support>=0.5"],
        # Ray rollout workers for `race train --workers N` (without it training runs in-process).
        "ray": ["ray>=2.9"],
        # Differential-test oracle only; never imported by the package itself.
        "oracle": ["torch==2.13.0"],
    },
    package_data={"planner_pkg.policy": ["models/*.agm"], "planner_pkg.racing": ["models/*.agm"]},
    zip_safe=True,
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
