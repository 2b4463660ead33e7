"""ROS 2 graph over real DDS: cloud -> planning/trajectory latency and the rate the graph sustains.

    python benchmarks/ros_latency.py [--planner ego] [--seconds 12] [--rtf 1 4]

For each real-time factor it starts ``python -m planner_pkg bringup sim`` (sim_bridge, planner,
traj_server as processes; 64x48 depth camera at 30 Hz sim time), sends a goal across the forest
and listens for ``--seconds`` of wall time. Reported:

* latency: for every *new* trajectory (the planner stamps a trajectory with the stamp of the
  newest cloud it had used), wall time from that cloud's arrival here to the trajectory's arrival
  here; median and p95, ms. It includes the wait for the planner's next tick (10 Hz).
* rates, per wall second: /clock (achieved real-time factor), cloud, depth/image, odom, setpoint,
  new trajectories; and the camera rate in sim time (cloud count / sim seconds) which shows frames
  the graph dropped.

Prints a table; never passes or fails on time. Needs the ROS 2 wheels (AMENT_PREFIX_PATH is set to
this interpreter's prefix when unset).
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("AMENT_PREFIX_PATH", sys.prefix)
os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(101, 200)))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


def run_once(planner: str, rtf: float, seconds: float, goal) -> dict:
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image, PointCloud2
    from trajectory_msgs.msg import MultiDOFJointTrajectory

    from planner_pkg.nodes import common as c
    from planner_pkg.nodes import conversions as conv

    cmd = [sys.executable, "-m", "planner_pkg", "bringup", "sim", "--planner", planner, "--real-time-factor",
           str(rtf), "--log-level", "error"]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = Node("latency_probe", context=context)
    lock = threading.Lock()
    clouds: dict = {}
    counts = {"cloud": 0, "depth": 0, "odom": 0, "setpoint": 0, "trajectory": 0}
    latencies, clock = [], []
    last_stamp = [None]
    odom_seen = threading.Event()

    def count(key):
        def cb(msg):
            with lock:
                counts[key] += 1
                if key == "cloud":
                    clouds[conv.stamp_to_seconds(msg.header.stamp)] = time.perf_counter()
                elif key == "odom":
                    odom_seen.set()
        return cb

    def on_traj(msg):
        now = time.perf_counter()
        stamp = conv.stamp_to_seconds(msg.header.stamp)
        with lock:
            if stamp == last_stamp[0]:
                return  # a re-send of the same plan
            last_stamp[0] = stamp
            counts["trajectory"] += 1
            t_cloud = clouds.get(stamp)
            if t_cloud is not None:
                latencies.append(1e3 * (now - t_cloud))

    node.create_subscription(PointCloud2, c.TOPIC_CLOUD, count("cloud"), c.SENSOR_QOS)
    node.create_subscription(Image, c.TOPIC_DEPTH, count("depth"), c.SENSOR_QOS)
    node.create_subscription(Odometry, c.TOPIC_ODOM, count("odom"), c.ODOM_QOS)
    node.create_subscription(MultiDOFJointTrajectory, c.TOPIC_SETPOINT, count("setpoint"), c.SETPOINT_QOS)
    node.create_subscription(MultiDOFJointTrajectory, c.TOPIC_TRAJECTORY, on_traj, c.TRAJECTORY_QOS)
    node.create_subscription(Clock, "/clock", lambda m: clock.append((time.perf_counter(),
                                                                       conv.stamp_to_seconds(m.clock))),
                             c.CLOCK_QOS)
    goal_pub = node.create_publisher(PoseStamped, c.TOPIC_GOAL, c.GOAL_QOS)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and not (odom_seen.is_set() and goal_pub.get_subscription_count()):
            time.sleep(0.05)
        if not odom_seen.is_set():
            raise RuntimeError("the graph did not start within 30 s")
        time.sleep(1.0)  # let the planner see a few clouds
        with lock:
            for k in counts:
                counts[k] = 0
            del latencies[:]
        t0, n0 = time.perf_counter(), len(clock)
        goal_pub.publish(conv.goal_to_pose(goal))
        time.sleep(seconds)
        with lock:
            wall = time.perf_counter() - t0
            snap = dict(counts)
            lat = list(latencies)
            ck = clock[n0:]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        executor.shutdown()
        node.destroy_node()
        context.shutdown()
        thread.join(timeout=2)
    sim_s = (ck[-1][1] - ck[0][1]) if len(ck) > 1 else float("nan")
    achieved = sim_s / (ck[-1][0] - ck[0][0]) if len(ck) > 1 else float("nan")
    out = {"rtf_target": rtf, "rtf": achieved, "wall_s": wall, "sim_s": sim_s,
           "lat_med": float(np.median(lat)) if lat else float("nan"),
           "lat_p95": float(np.percentile(lat, 95)) if lat else float("nan"), "n_lat": len(lat),
           "camera_hz_sim": snap["cloud"] / sim_s if sim_s > 0 else float("nan")}
    out.update({f"{k}_hz": v / wall for k, v in snap.items()})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--planner", default="ego")
    p.add_argument("--seconds", type=float, default=12.0, help="wall seconds measured per run")
    p.add_argument("--rtf", type=float, nargs="+", default=[1.0, 4.0], help="real-time factors to try")
    p.add_argument("--goal", default="12,0,1")
    args = p.parse_args(argv)
    goal = [float(v) for v in args.goal.split(",")]
    rows = [run_once(args.planner, rtf, args.seconds, goal) for rtf in args.rtf]
    print(f"\nROS 2 graph over DDS (loopback), planner={args.planner}, depth camera 64x48 @ 30 Hz sim time, "
          f"{os.cpu_count()} CPUs")
    head = ("RTF target", "RTF got", "cloud->traj ms med", "p95", "n", "cloud Hz", "depth Hz", "odom Hz",
            "setpoint Hz", "new traj Hz", "camera Hz (sim)")
    print(" | ".join(head))
    for r in rows:
        print(" | ".join([f"{r['rtf_target']:.1f}", f"{r['rtf']:.2f}", f"{r['lat_med']:.1f}", f"{r['lat_p95']:.1f}",
                          str(r["n_lat"]), f"{r['cloud_hz']:.1f}", f"{r['depth_hz']:.1f}", f"{r['odom_hz']:.0f}",
                          f"{r['setpoint_hz']:.0f}", f"{r['trajectory_hz']:.1f}", f"{r['camera_hz_sim']:.1f}"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
