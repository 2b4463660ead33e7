"""The EGO-style planner and the direct baseline (ROS-free)."""

#: EGO-Planner's default speed and acceleration limits (max_vel, max_acc), m/s and m/s^2: the
#: defaults of :class:`~planner_pkg.planning.ego_config.EgoConfig`, its optimiser's and the direct
#: baseline's (like-for-like comparisons). Written here once.
EGO_MAX_VEL_MPS = 2.0
EGO_MAX_ACC_MPS2 = 3.0
