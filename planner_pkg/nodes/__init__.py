"""ROS 2 nodes: thin shells that move messages between the plain-Python parts (DESIGN.md graph).

This is the only package that imports ``rclpy``. Modules:

    conversions        messages <-> core types (the one place that knows message layouts)
    markers            RViz markers: one marker, delete-all, a world's obstacles
    params             ROS parameters as a view of a config dataclass (descriptors, validation)
    common             QoS per topic, node ``main`` boilerplate, ``LockstepNode``, status (DiagnosticArray) helpers
    sim_bridge         node ``sim_bridge``: embedded simulator or Gazebo adapter
    sim_vehicle        one simulated vehicle's topics (odom, depth, cloud, step manifest), shared by
                       ``sim_bridge`` and ``swarm_sim``; the wall-clock stepping pace
    planner_node       node ``planner``: any planner of the registry (``app.planners``) (``ego``, ``direct``)
    traj_server        node ``traj_server``: trajectory -> 100 Hz setpoints
    policy_node        node ``policy``: the learned depth policy -> acceleration setpoints
    racer_node         node ``racer``: the gate-racing policy -> body-rate commands (``bringup sim --planner racer``)
    fcu_bridge         node ``fcu_bridge``: PX4 / ArduPilot over MAVLink (planner_pkg.bridges.mavlink)
    recorder           node ``recorder``: topics -> MCAP file (``bringup --record``)
    swarm_sim          node ``swarm_sim``: N embedded simulators, one per ``/drone<i>`` (docs/swarm.md)
    swarm_link         the planner node's side of ``/swarm/trajectories`` (EGO-Swarm broadcasts)
    supervisor         the bringup's process supervisor (start, restart rules, staged stop)
    bringup            ``python -m planner_pkg bringup``: the launch graph without ``ros2 launch``
    swarm_bringup      ``bringup sim --drones N`` / ``--drone-id I``: the swarm's graph

The plain-Python parts the nodes drive live with their parts: ``sim/embedded.py`` (the
embedded simulator advanced in slices), ``sim/swarm_embedded.py`` (N of them on one clock),
``planning/sampled_trajectory.py`` (a trajectory received as samples).
"""
