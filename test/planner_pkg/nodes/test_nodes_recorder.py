"""The ``recorder`` node (MCAP, ROS 2 profile) over real DDS, reading recordings back, and
``bringup --record`` end to end (issue 6: recording and looking)."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mcap_ros2")

import yaml  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from mcap.reader import make_reader  # noqa: E402
from mcap_ros2.decoder import DecoderFactory  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from nodes_ros_harness import kill_leftovers, pid_alive, started_pids, wait_for  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from planner_pkg.nodes import common as c  # noqa: E402
from planner_pkg.nodes import conversions as conv  # noqa: E402
from planner_pkg.nodes.params import ParameterConfigError  # noqa: E402
from planner_pkg.nodes.recorder import KNOWN_TOPICS, McapFile, Recorder, message_definition  # noqa: E402
from planner_pkg.sim import mcap_log  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
OPEN_WORLD = """
bounds: {min: [-15.0, -6.0, 0.0], max: [15.0, 6.0, 5.0]}
obstacles:
- {type: cylinder, center: [-6.0, 3.0], radius: 0.4, height: 4.0}
- {type: box, center: [-3.0, -3.0, 1.0], size: [1.0, 1.0, 2.0], yaw: 0.3}
"""


def _odom_by_hand(t, x):
    msg = Odometry()
    msg.header.stamp = conv.seconds_to_stamp(t)
    msg.header.frame_id, msg.child_frame_id = "map", "base_link"
    msg.pose.pose.position.x, msg.pose.pose.position.y, msg.pose.pose.position.z = x, 0.5, 1.0
    msg.pose.pose.orientation.w = 1.0
    msg.twist.twist.linear.x = 1.5
    return msg


def _read(path):
    """{topic: [(log_time, publish_time, decoded)]}, channels, schemas, header profile, summary."""
    with open(path, "rb") as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        header = reader.get_header()
        summary = reader.get_summary()
        out = {}
        for _schema, channel, message, decoded in reader.iter_decoded_messages():
            out.setdefault(channel.topic, []).append((message.log_time, message.publish_time, decoded))
    return out, summary, header


def _recorder(ros, output, **params):
    overrides = [Parameter("output", value=str(output))] + [Parameter(k, value=v) for k, v in params.items()]
    return ros.add(Recorder(context=ros.context, parameter_overrides=overrides))


def test_recorder_writes_every_topic_and_messages_decode_back_to_what_was_published(ros, tmp_path):
    pub_node = ros.node("publisher")
    # latched map published *before* the recorder exists: transient local must still bring it
    pub_map = pub_node.create_publisher(MarkerArray, c.TOPIC_MAP_MARKERS, c.LATCHED_QOS)
    markers = MarkerArray(markers=[Marker(ns="obstacles", id=7, type=Marker.CYLINDER)])
    markers.markers[0].pose.position.x = 3.25
    pub_map.publish(markers)
    pubs = {
        "odom": pub_node.create_publisher(Odometry, c.TOPIC_ODOM, c.ODOM_QOS),
        "goal": pub_node.create_publisher(PoseStamped, c.TOPIC_GOAL, c.GOAL_QOS),
        "clock": pub_node.create_publisher(Clock, c.TOPIC_CLOCK, c.CLOCK_QOS),
        "depth": pub_node.create_publisher(Image, c.TOPIC_DEPTH, c.SENSOR_QOS),
        "status": pub_node.create_publisher(DiagnosticArray, c.TOPIC_STATUS, c.STATUS_QOS),
    }
    out = tmp_path / "sub" / "run.mcap"  # the parent folder is created
    rec = _recorder(ros, out)
    assert out.exists(), "the file exists as soon as the node is up"
    assert wait_for(lambda: all(p.get_subscription_count() >= 1 for p in pubs.values()), 10.0)
    assert wait_for(lambda: rec.counts().get("/map/markers", 0) == 1, 10.0), rec.counts()

    sent = [_odom_by_hand(10.0 + 0.01 * i, -5.0 + 0.1 * i) for i in range(30)]
    for msg in sent:
        pubs["odom"].publish(msg)
    pubs["goal"].publish(conv.goal_to_pose(np.array([4.0, -2.0, 1.5]), stamp_s=12.5))
    pubs["clock"].publish(Clock(clock=conv.seconds_to_stamp(10.3)))
    img = Image(height=2, width=3, encoding="32FC1", step=12, data=bytes(range(24)))
    img.header.stamp = conv.seconds_to_stamp(10.2)
    pubs["depth"].publish(img)
    pubs["status"].publish(conv.make_status("planner", "ok", "tracking", [("replan_ms_median", "3.5")], 10.4))
    assert wait_for(lambda: rec.counts().get("/odom", 0) == 30 and rec.counts().get("/goal_pose", 0) == 1
                    and rec.counts().get("/clock", 0) >= 1 and rec.counts().get("/depth/image", 0) == 1
                    and rec.counts().get("/status", 0) >= 1, 10.0), rec.counts()
    rec.close()
    rec.close()  # idempotent

    messages, summary, header = _read(out)
    assert header.profile == "ros2"
    channels = {ch.topic: ch for ch in summary.channels.values()}
    for topic, (full_type, _qos) in KNOWN_TOPICS.items():
        name = topic if topic.startswith("/") else "/" + topic
        if name not in channels:
            continue
        ch = channels[name]
        schema = summary.schemas[ch.schema_id]
        assert ch.message_encoding == "cdr" and schema.encoding == "ros2msg" and schema.name == full_type
        assert schema.data.decode() == message_definition(full_type)
        profiles = yaml.safe_load(ch.metadata["offered_qos_profiles"])
        assert profiles and profiles[0]["reliability"] in ("reliable", "best_effort")
    assert {"/odom", "/goal_pose", "/clock", "/depth/image", "/status", "/map/markers"} <= set(channels)
    assert yaml.safe_load(channels["/map/markers"].metadata["offered_qos_profiles"])[0]["durability"] \
        == "transient_local"
    assert summary.statistics.message_count == sum(len(v) for v in messages.values())

    odom = messages["/odom"]
    assert len(odom) == 30
    for (log_time, publish_time, got), want in zip(odom, sent):
        assert publish_time == want.header.stamp.sec * 10 ** 9 + want.header.stamp.nanosec  # header stamp
        assert got.header.frame_id == "map" and got.child_frame_id == "base_link"
        assert (got.pose.pose.position.x, got.pose.pose.position.y, got.pose.pose.position.z) == \
            (want.pose.pose.position.x, 0.5, 1.0)
        assert got.twist.twist.linear.x == 1.5 and got.pose.pose.orientation.w == 1.0
    assert [m[0] for m in odom] == sorted(m[0] for m in odom)  # receive times, in order
    (_, goal_pub_t, goal), = messages["/goal_pose"]
    assert (goal.pose.position.x, goal.pose.position.y, goal.pose.position.z) == (4.0, -2.0, 1.5)
    assert goal_pub_t == 12_500_000_000
    assert messages["/clock"][0][2].clock.sec == 10 and messages["/clock"][0][1] == 10_300_000_000
    (_, _, image), = messages["/depth/image"]
    assert image.encoding == "32FC1" and bytes(image.data) == bytes(range(24)) and image.width == 3
    (_, _, latched), = messages["/map/markers"]
    assert latched.markers[0].id == 7 and latched.markers[0].pose.position.x == 3.25
    status = [m[2] for m in messages["/status"] if m[2].status[0].name == "planner"]
    assert status[0].status[0].values[0].value == "3.5"

    # the ROS-free reader turns the same file into the flight log and goal
    run = mcap_log.read_run(out)
    assert len(run.log) == 30 and run.goal.tolist() == [4.0, -2.0, 1.5] and run.replan_ms == [3.5]
    assert np.allclose(run.log.positions[-1], [-5.0 + 2.9, 0.5, 1.0]) and np.allclose(run.log.velocities[0],
                                                                                      [1.5, 0, 0])


def test_recorder_refuses_a_bad_output_path(ros, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    for bad, words in ((tmp_path, "directory"), (blocker / "run.mcap", "cannot write"), ("", "output")):
        with pytest.raises(ParameterConfigError, match=words):
            Recorder(context=ros.context, parameter_overrides=[Parameter("output", value=str(bad))])
    with pytest.raises(ParameterConfigError, match="topics"):
        Recorder(context=ros.context, parameter_overrides=[Parameter("output", value=str(tmp_path / "x.mcap")),
                                                           Parameter("topics", value=["odom", "odom"])])


def test_a_write_error_stops_the_recording_but_not_the_node(ros, tmp_path):
    rec = _recorder(ros, tmp_path / "run.mcap", status_rate_hz=20.0)
    pub_node = ros.node("publisher")
    pub = pub_node.create_publisher(Odometry, c.TOPIC_ODOM, c.ODOM_QOS)
    statuses = []
    pub_node.create_subscription(DiagnosticArray, c.TOPIC_STATUS,
                                 lambda m: statuses.append(conv.status_values(m)), c.STATUS_QOS)
    assert wait_for(lambda: pub.get_subscription_count() >= 1, 10.0)

    def disk_full(*_a, **_k):
        raise OSError(28, "No space left on device")

    rec.file._writer.add_message = disk_full
    pub.publish(_odom_by_hand(1.0, 0.0))
    assert wait_for(lambda: rec.state == "write error", 10.0)
    assert "No space left" in rec.error
    n = len(statuses)
    assert wait_for(lambda: any(s.get("name") == "recorder" and s.get("message") == "write error"
                                for s in statuses[n:]), 10.0), "the node keeps running and reports the error"
    pub.publish(_odom_by_hand(1.1, 0.0))  # ignored, no exception
    rec.close()


def test_recorder_process_finishes_the_file_on_sigterm(tmp_path):
    out = tmp_path / "run.mcap"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "planner_pkg.nodes.recorder", "--ros-args", "-p",
                             f"output:={out}", "-p", "topics:=[status]"], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # the recorder records its own status (1 Hz): wait for the file, then a couple of seconds
        assert wait_for(lambda: out.exists(), 30.0)
        import time

        time.sleep(2.5)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0, output
        assert "wrote" in output
        messages, summary, _ = _read(out)
        assert summary is not None and summary.statistics.message_count >= 1, "finished file has its summary"
        assert any(m[2].status[0].name == "recorder" for m in messages["/status"])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    bad = subprocess.run([sys.executable, "-m", "planner_pkg.nodes.recorder", "--ros-args", "-p",
                          f"output:={tmp_path}"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == c.EXIT_CONFIG and "directory" in bad.stderr


def _synthetic_recording(path, goal=(6.0, 0.0, 1.0)):
    """A recording written with the recorder's writer, no DDS: a straight flight to the goal."""
    f = McapFile(Path(path), chunk_size=16 * 1024)
    odom_ch = f.add_channel("/odom", "nav_msgs/msg/Odometry", message_definition("nav_msgs/msg/Odometry"), "")
    goal_ch = f.add_channel("/goal_pose", "geometry_msgs/msg/PoseStamped",
                            message_definition("geometry_msgs/msg/PoseStamped"), "")
    for i in range(400):  # 4 s at 100 Hz, 2 m/s from x = -2
        t = i * 0.01
        msg = _odom_by_hand(t, -2.0 + 2.0 * t)
        msg.pose.pose.position.y = 0.0
        msg.twist.twist.linear.x = 2.0
        f.write(odom_ch, serialize_message(msg), int(t * 1e9), int(t * 1e9), i)
        if i == 50:
            f.write(goal_ch, serialize_message(conv.goal_to_pose(np.array(goal))), int(t * 1e9), 0, 0)
    f.finish()


def test_plot_command_draws_a_recorded_run(tmp_path):
    world = tmp_path / "open.yaml"
    world.write_text(OPEN_WORLD)
    rec = tmp_path / "run.mcap"
    _synthetic_recording(rec)
    from planner_pkg.cli import main

    png, summary, csv = tmp_path / "flight.png", tmp_path / "summary.json", tmp_path / "flight.csv"
    assert main(["plot", str(rec), "--world", str(world), "-o", str(png), "--summary", str(summary),
                 "--log", str(csv)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    result = json.loads(summary.read_text())
    assert result["reached"] and not result["collided"] and result["reason"] == "goal_reached"
    # goal at t = 0.5 s from x = -1; reached when x >= 5.5 (tolerance 0.5): t = 3.75 s
    assert result["time_s"] == pytest.approx(3.25, abs=0.011)
    assert result["path_length_m"] == pytest.approx(6.5, abs=0.03)
    rows = csv.read_text().splitlines()
    assert rows[0] == "t,x,y,z,vx,vy,vz" and float(rows[-1].split(",")[1]) == pytest.approx(5.5, abs=0.021)
    # a recorder killed outright leaves no summary: the chunks already on disk are still read
    data = rec.read_bytes()
    cut = tmp_path / "killed.mcap"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    partial = mcap_log.read_run(cut)
    assert 50 < len(partial.log) < 400 and partial.goal.tolist() == [6.0, 0.0, 1.0]
    assert np.all(np.diff(partial.log.t) > 0)
    # errors are one line, exit 2
    assert main(["plot", str(tmp_path / "missing.mcap"), "--world", str(world), "-o", str(png)]) == 2
    (tmp_path / "junk.mcap").write_bytes(b"not an mcap file at all")
    assert main(["plot", str(tmp_path / "junk.mcap"), "--world", str(world), "-o", str(png)]) == 2


# ---------------------------------------------------------------------------------------------
_pids = started_pids


_alive = pid_alive


def test_bringup_records_the_mission_to_mcap(tmp_path):
    world = tmp_path / "open.yaml"
    world.write_text(OPEN_WORLD)
    rec, summary, flight, png = (tmp_path / n for n in ("run.mcap", "summary.json", "flight.csv", "flight.png"))
    log = tmp_path / "bringup.log"
    cmd = [sys.executable, "-m", "planner_pkg", "bringup", "sim", "--world", str(world), "--planner", "direct",
           "--start=-12,0,1", "--goal=-4,0,1", "--timeout", "30", "--real-time-factor", "1.0",
           "--log-level", "warn", "--record", str(rec), "--summary", str(summary), "--log", str(flight)]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    try:
        code = proc.wait(timeout=120)
        text = log.read_text()
        assert code == 0, text
        pids = _pids(text)
        assert {n for n, _ in pids} == {"sim_bridge", "planner", "traj_server", "recorder"}
        assert not [p for _, p in pids if _alive(p)], "orphaned node processes"
        assert "recorder stopped (exit 0)" in text or text.count("stopped (exit 0)") == 4, text
        result = json.loads(summary.read_text())
        assert result["reached"], text[-2000:]

        messages, mcap_summary, _ = _read(rec)  # finished: it has its summary section
        assert mcap_summary is not None
        for topic in ("/odom", "/clock", "/goal_pose", "/setpoint", "/planning/trajectory", "/map/markers",
                      "/status", "/depth/image", "/cloud"):
            assert messages.get(topic), f"nothing recorded on {topic}: {sorted(messages)}"
        # the recorder was up before the goal went out: the goal is in the file
        assert len(messages["/goal_pose"]) == 1
        # the mission's last odometry sample (flight.csv) is in the recording, identical
        rows = flight.read_text().splitlines()
        t_last, *last = map(float, rows[-1].split(","))
        recorded = {round(m[1] * 1e-9, 6): m[2] for m in messages["/odom"]}
        got = recorded[round(t_last, 6)]
        assert [got.pose.pose.position.x, got.pose.pose.position.y, got.pose.pose.position.z] == last[:3]
        logged_t = {round(float(r.split(",")[0]), 6) for r in rows[1:]}
        assert len(logged_t & set(recorded)) >= 0.9 * len(logged_t)
        # and the plot command judges the recorded run as the mission did
        from planner_pkg.cli import main

        out_summary = tmp_path / "from_mcap.json"
        assert main(["plot", str(rec), "--world", str(world), "-o", str(png), "--summary", str(out_summary)]) == 0
        again = json.loads(out_summary.read_text())
        assert again["reached"] == result["reached"] and again["collided"] == result["collided"]
        assert again["time_s"] == pytest.approx(result["time_s"], abs=0.1)
        assert again["path_length_m"] == pytest.approx(result["path_length_m"], rel=0.02)
        assert again["final_goal_distance_m"] == pytest.approx(result["final_goal_distance_m"], abs=0.05)
        assert png.stat().st_size > 10_000
    finally:
        kill_leftovers(proc, log)


def test_a_topic_outside_the_graph_is_recorded_once_it_is_published(ros, tmp_path):
    from std_msgs.msg import String

    out = tmp_path / "extra.mcap"
    rec = _recorder(ros, out, topics=["odom", "extra/notes"], discovery_period_s=0.2)
    pub = ros.node("publisher").create_publisher(String, "extra/notes", c.LATCHED_QOS)
    pub.publish(String(data="latched before the recorder subscribed"))
    assert wait_for(lambda: rec.counts().get("/extra/notes", 0) == 1, 15.0), rec.counts()
    rec.close()
    messages, summary, _ = _read(out)
    ch = next(ch for ch in summary.channels.values() if ch.topic == "/extra/notes")
    assert summary.schemas[ch.schema_id].name == "std_msgs/msg/String"
    assert yaml.safe_load(ch.metadata["offered_qos_profiles"])[0]["durability"] == "transient_local"
    assert messages["/extra/notes"][0][2].data == "latched before the recorder subscribed"
