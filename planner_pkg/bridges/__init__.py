"""Links between the plain-Python stack and the outside world: the flight controller (MAVLink,
``planner_pkg.bridges.mavlink``) and, later, Gazebo topic mappings.

Nothing here imports rclpy: the ROS nodes in ``planner_pkg.nodes`` are thin shells around these
classes. Subpackages are imported on demand, so importing ``planner_pkg.bridges`` is free.
"""
