"""Onboard quadrotor autonomy: embedded simulator, EGO-style planner, learned depth policy.

Subpackages are imported on demand (``planner_pkg.sim``, ``planner_pkg.world``, ...) so that
``python -m planner_pkg`` and the ROS nodes start without loading what they do not use.
Conventions everywhere: SI units, world frame ENU (z up), body frame FLU, quaternions stored
``(x, y, z, w)`` like ROS and scipy.
"""

__version__ = "0.1.0"
