"""Embedded quadrotor simulator: dynamics, controllers, sensors, collision, closed-loop runner.

Plain Python + NumPy (no ROS, no autograd). SI units, world ENU, body FLU, quaternions
``(x, y, z, w)``. One concern per module:

    params       vehicle / controller / sensor parameters (frozen dataclasses, cited sources)
    dynamics     rigid-body quadrotor, RK4          point_mass   fast point-mass variant
    controller   SE(3) tracking controller          mixer        X-frame control allocation
    camera       depth camera + point cloud         odometry     delayed / noisy state
    collision    vehicle-ball collision monitor     runner       the closed loop, Planner protocol
    flight_log   flight.csv / summary.json          plot         flight.png (matplotlib, lazy)
    rotation     quaternion / SO(3) helpers         mcap_log     a recorded run read back
    mission_judge  the mission's judge (live and recorded)     lockstep  sim-time lockstep rules

The simulator knows no planner: the runner flies any object that follows its Planner protocol;
planner names are turned into planners by :mod:`planner_pkg.app.planners`.
"""
from planner_pkg.sim.camera import DepthCamera, depth_to_world_points
from planner_pkg.sim.collision import CollisionMonitor, clearance
from planner_pkg.sim.controller import PointMassController, SE3Controller, TranslationalController
from planner_pkg.sim.dynamics import RigidBodyQuadrotor
from planner_pkg.sim.flight_log import CSV_HEADER, EpisodeSummary, FlightLog
from planner_pkg.sim.mixer import Mixer
from planner_pkg.sim.odometry import Odometry
from planner_pkg.sim.params import (
    GRAVITY_MPS2,
    CameraParams,
    ControllerGains,
    OdometryParams,
    PointMassParams,
    QuadrotorParams,
)
from planner_pkg.sim.point_mass import AccelerationCommand, PointMassQuadrotor
from planner_pkg.sim.runner import ClosedLoopRunner, EpisodeResult, Planner, RunnerConfig, run_episode

__all__ = [
    "AccelerationCommand",
    "CSV_HEADER",
    "CameraParams",
    "ClosedLoopRunner",
    "CollisionMonitor",
    "ControllerGains",
    "DepthCamera",
    "EpisodeResult",
    "EpisodeSummary",
    "FlightLog",
    "GRAVITY_MPS2",
    "Mixer",
    "Odometry",
    "OdometryParams",
    "Planner",
    "PointMassController",
    "PointMassParams",
    "PointMassQuadrotor",
    "QuadrotorParams",
    "RigidBodyQuadrotor",
    "RunnerConfig",
    "SE3Controller",
    "TranslationalController",
    "clearance",
    "depth_to_world_points",
    "run_episode",
]
