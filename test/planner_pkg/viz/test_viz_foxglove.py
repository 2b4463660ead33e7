"""The Foxglove live view, checked with a real client: a ``websockets`` connection speaking the
Foxglove WebSocket protocol (test/planner_pkg/viz/foxglove_client.py, written from the protocol spec) to the
real server, during a real embedded-simulator flight. Messages are decoded with protobuf from the
schema the server advertised, and compared with what the planner itself was given: the odometry,
the depth frames and the trajectory at the same time stamp. No mock server."""
import math
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("foxglove")
pytest.importorskip("websockets")
pytest.importorskip("google.protobuf")

from foxglove_client import SUBPROTOCOLS, decoder, run_client  # noqa: E402

from planner_pkg.planning.direct import DirectPlanner  # noqa: E402
from planner_pkg.sim.runner import ClosedLoopRunner, RunnerConfig  # noqa: E402
from planner_pkg.types import quaternion_from_yaw  # noqa: E402
from planner_pkg.viz.config import LiveViewConfig  # noqa: E402
from planner_pkg.viz.foxglove_live import TOPICS, LiveView, VizServerError, VizUnavailableError  # noqa: E402
from planner_pkg.viz.tap import VizTap  # noqa: E402
from planner_pkg.world import Box, Cylinder, Sphere, World, save_world  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
NOT_TF = [t for t in TOPICS if t != "/tf"]
START, GOAL = np.array([-6.0, 0.0, 1.0]), np.array([2.0, 0.0, 1.0])


def small_world() -> World:
    # one obstacle of each kind, all off the straight line from START to GOAL
    return World((-10.0, -6.0, 0.0), (10.0, 6.0, 4.0), [
        Cylinder((0.0, 3.0), 0.5, 3.0), Box((3.0, -3.0, 1.0), (1.0, 2.0, 2.0), 0.3), Sphere((-3.0, -3.0, 2.0), 0.5)])


class Recording:
    """A planner in the loop that remembers what it was given, keyed by the time stamp in ns."""

    def __init__(self, planner):
        self.planner, self.rate_hz = planner, planner.rate_hz
        self.odom, self.frames, self.results = {}, {}, {}

    def reset(self, start, goal):
        self.planner.reset(start, goal)

    def observe(self, frame):
        self.frames[round(frame.t * 1e9)] = frame

    def update(self, state, sensors):
        result = self.planner.update(state, sensors)
        self.odom[round(state.t * 1e9)] = state
        self.results[round(state.t * 1e9)] = result
        return result


def stamp_ns(ts) -> int:
    return ts.seconds * 1_000_000_000 + ts.nanos


def decoded(session, topic):
    channel = next(ch for ch in session.channels.values() if ch["topic"] == topic)
    decode = decoder(channel)
    return [(m.log_time_ns, decode(m.payload)) for m in session.messages if m.topic == topic]


@pytest.fixture
def flown():
    """Fly START -> GOAL with the direct planner while a client watches; (session, recording, log)."""
    world = small_world()
    view = LiveView(LiveViewConfig(port=0))
    url = view.start()
    assert re.fullmatch(r"ws://127\.0\.0\.1:\d+", url) and view.port > 0
    view.set_world(world)
    recording = Recording(DirectPlanner())
    out = {}

    def fly():
        try:
            if view.wait_for_subscriber("/tf", timeout_s=120.0):
                runner = ClosedLoopRunner(world, VizTap(recording, view), RunnerConfig(timeout_s=10.0))
                out["result"] = runner.run(START, GOAL)
        finally:
            view.stop()  # closes the connection: the client's loop ends

    thread = threading.Thread(target=fly)
    thread.start()
    try:
        session = run_client(url, NOT_TF, ["/tf"], timeout_s=300.0)
    finally:
        thread.join(300.0)
    assert "result" in out, "the flight did not run (no client subscription reached the server?)"
    return session, recording, out["result"], view


def test_a_real_client_gets_every_topic_with_foxglove_schemas(flown):
    session, _, result, view = flown
    assert session.subprotocol in SUBPROTOCOLS
    assert session.server_info["op"] == "serverInfo" and "time" in session.server_info["capabilities"]
    advertised = {ch["topic"]: ch for ch in session.channels.values()}
    assert set(advertised) == set(TOPICS)
    for topic, schema in TOPICS.items():
        ch = advertised[topic]
        if schema == "json":
            assert ch["encoding"] == "json"
        else:
            assert (ch["encoding"], ch["schemaEncoding"], ch["schemaName"]) == ("protobuf", "protobuf", schema)
    got = {m.topic for m in session.messages}
    assert got == set(TOPICS), f"no message on {set(TOPICS) - got}"
    assert result.summary.reached, result.summary
    assert session.closed  # the server ended the session when the flight was over
    assert view.stats.errors == 0 and view.stats.refused == 0
    # the server clock follows the flight's clock: sim time, never backwards
    assert session.times_ns and session.times_ns == sorted(session.times_ns)
    assert session.times_ns[-1] <= round(result.summary.time_s * 1e9)


def test_the_vehicle_pose_is_the_odometry_at_its_stamp(flown):
    session, rec, result, _ = flown
    poses = [(log, tf) for log, msg in decoded(session, "/tf") for tf in msg.transforms
             if tf.child_frame_id == "base_link"]
    assert len(poses) >= 3
    for log_ns, tf in poses:
        assert tf.parent_frame_id == "map"
        t_ns = stamp_ns(tf.timestamp)
        assert abs(log_ns - t_ns) <= 1
        state = rec.odom[min(rec.odom, key=lambda k: abs(k - t_ns))]
        assert abs(round(state.t * 1e9) - t_ns) <= 1
        p, q = tf.translation, tf.rotation
        assert [p.x, p.y, p.z] == state.position.tolist()
        assert [q.x, q.y, q.z, q.w] == state.attitude.tolist()
    # and the odometry is the flight: the logged position at that time (50 Hz log, odometry
    # without noise or latency by default) lies on the same spot
    log = result.log
    for _, tf in poses:
        t = stamp_ns(tf.timestamp) * 1e-9
        i = int(np.argmin(np.abs(log.t - t)))
        if abs(log.t[i] - t) < 1e-6:
            assert np.allclose(log.positions[i], [tf.translation.x, tf.translation.y, tf.translation.z], atol=1e-9)
    speeds = decoded(session, "/vehicle/state")
    assert speeds
    for log_ns, msg in speeds:
        state = rec.odom[min(rec.odom, key=lambda k: abs(k - log_ns))]
        assert msg["speed_mps"] == pytest.approx(float(np.linalg.norm(state.velocity)), rel=1e-12, abs=1e-12)
        assert msg["t_s"] == state.t


def test_depth_image_and_cloud_are_the_frames_the_planner_saw(flown):
    session, rec, _, _ = flown
    images = decoded(session, "/camera/depth")
    assert images
    for _, img in images:
        frame = rec.frames[stamp_ns(img.timestamp)]
        h, w = frame.depth.shape
        assert (img.width, img.height, img.encoding, img.step, img.frame_id) == (w, h, "32FC1", 4 * w, "camera_optical")
        assert len(img.data) == w * h * 4
        np.testing.assert_array_equal(np.frombuffer(img.data, "<f4").reshape(h, w), frame.depth)
    clouds = decoded(session, "/camera/cloud")
    assert clouds
    for _, cloud in clouds:
        frame = rec.frames[stamp_ns(cloud.timestamp)]
        assert cloud.point_stride == 12 and cloud.frame_id == "map"
        assert [(f.name, f.offset, f.type) for f in cloud.fields] == [("x", 0, 7), ("y", 4, 7), ("z", 8, 7)]  # FLOAT32
        pts = np.frombuffer(cloud.data, "<f4").reshape(-1, 3)
        expected = frame.points[np.isfinite(frame.points).all(axis=1)]
        assert len(pts) == len(expected) > 0
        np.testing.assert_array_equal(pts, expected)
    cams = [tf for _, msg in decoded(session, "/tf") for tf in msg.transforms if tf.child_frame_id == "camera_optical"]
    assert cams
    for tf in cams:
        frame = rec.frames[stamp_ns(tf.timestamp)]
        assert [tf.translation.x, tf.translation.y, tf.translation.z] == frame.camera_position.tolist()
        assert [tf.rotation.x, tf.rotation.y, tf.rotation.z, tf.rotation.w] == frame.camera_orientation.tolist()


def test_world_scene_and_trajectory_match_the_world_and_the_plan(flown):
    session, rec, _, _ = flown
    world = small_world()
    scenes = decoded(session, "/world")
    assert scenes
    entities = {e.id: e for e in scenes[-1][1].entities}
    assert {"obstacles", "bounds", "goal"} <= set(entities)
    obs = entities["obstacles"]
    assert obs.frame_id == "map"
    (cyl,), (cube,), (sphere,) = obs.cylinders, obs.cubes, obs.spheres
    assert [cyl.size.x, cyl.size.y, cyl.size.z] == [1.0, 1.0, 3.0]
    assert [cyl.pose.position.x, cyl.pose.position.y, cyl.pose.position.z] == [0.0, 3.0, 1.5]
    assert (cyl.bottom_scale, cyl.top_scale) == (1.0, 1.0)
    assert [cube.size.x, cube.size.y, cube.size.z] == [1.0, 2.0, 2.0]
    o = cube.pose.orientation
    assert [o.x, o.y, o.z, o.w] == pytest.approx(quaternion_from_yaw(0.3).tolist())
    assert [sphere.size.x, sphere.pose.position.x, sphere.pose.position.z] == [1.0, -3.0, 2.0]
    for prim in (cyl, cube, sphere):
        assert prim.color.a > 0  # visible
    edges = np.array([[p.x, p.y, p.z] for p in entities["bounds"].lines[0].points])
    assert edges.shape == (24, 3)
    assert np.array_equal(edges.min(axis=0), world.bounds_min) and np.array_equal(edges.max(axis=0), world.bounds_max)
    g = entities["goal"].spheres[0].pose.position
    assert [g.x, g.y, g.z] == GOAL.tolist()

    trajectories = decoded(session, "/planner/trajectory")
    assert trajectories
    for _, update in trajectories:
        (entity,) = update.entities
        t_ns = stamp_ns(entity.timestamp)
        plan = rec.results[t_ns]
        points = np.array([[p.x, p.y, p.z] for p in entity.lines[0].points])
        assert len(points) == LiveViewConfig().trajectory_samples
        assert np.allclose(points[0], plan.sample(t_ns * 1e-9).position, atol=1e-9)
        # the direct planner's line reports no end time: drawn for the configured horizon
        horizon = LiveViewConfig().trajectory_horizon_s
        assert np.allclose(points[-1], plan.sample(t_ns * 1e-9 + horizon).position, atol=1e-9)
    paths = decoded(session, "/vehicle/path")
    assert paths
    line = np.array([[p.x, p.y, p.z] for p in paths[-1][1].entities[0].lines[0].points])
    assert len(line) >= 2 and np.allclose(line[0], START, atol=0.05)
    assert np.all(np.linalg.norm(np.diff(line, axis=0), axis=1) >= LiveViewConfig().path_spacing_m - 1e-12)
    replans = decoded(session, "/planner/replan")
    assert replans and all(math.isfinite(m["replan_ms"]) and m["replan_ms"] >= 0 for _, m in replans)


def test_a_late_client_still_gets_the_world():
    with LiveView(LiveViewConfig(port=0)) as view:
        view.set_world(small_world())
        view.set_goal(GOAL)
        first = run_client(view.url, ["/world"], [], until=lambda s: len(s.messages) >= 1, timeout_s=120)
        late = run_client(view.url, ["/world"], [], until=lambda s: len(s.messages) >= 1, timeout_s=120)
    for session in (first, late):
        (_, scene), = decoded(session, "/world")[:1]
        ids = {e.id for e in scene.entities}
        assert {"obstacles", "bounds", "goal"} <= ids


def test_posting_never_queues_more_than_the_limits():
    view = LiveView(LiveViewConfig(port=0, pose_rate_hz=0.001, queue_size=4))
    with view:
        for i in range(2000):  # one pose per 1000 wall s: only the first passes the rate limit
            view.post_state(i * 0.01, (0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0), (1.0, 0.0, 0.0))
        assert view.stats.rate_dropped == 1999
        for i in range(100):  # the replan rate (20 Hz) lets few through; the queue never exceeds 4
            view.post_replan(i * 0.1, 1.0)
            assert len(view._queue) <= 4
        view.post_replan(float("nan"), 1.0)
    view2 = LiveView(LiveViewConfig(port=0, pose_rate_hz=1000.0))
    with view2:
        view2.post_state(0.0, (math.nan, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
        assert view2.stats.refused == 1 and view2.stats.posted == 0
    # after stop, posting is a no-op, not an error
    view2.post_state(1.0, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
    assert view2.stats.posted == 0


def test_a_taken_port_and_a_missing_sdk_are_clear_errors(monkeypatch):
    with LiveView(LiveViewConfig(port=0)) as first:
        with pytest.raises(VizServerError, match=f"{first.port}.*--viz-port"):
            LiveView(LiveViewConfig(port=first.port)).start()
    monkeypatch.setitem(sys.modules, "foxglove", None)
    with pytest.raises(VizUnavailableError, match=r"pip install 'planner_pkg\[viz\]'"):
        LiveView(LiveViewConfig(port=0)).start()


def test_fly_viz_prints_the_url_and_serves_the_flight(tmp_path):
    """The command line: ``fly --viz --viz-port 0 --viz-wait S`` prints the URL, waits for the
    client, flies; the poses the client gets lie on the flight log's path."""
    world_file = tmp_path / "w.yaml"
    save_world(small_world(), world_file)
    log, summary = tmp_path / "flight.csv", tmp_path / "summary.json"
    cmd = [sys.executable, "-m", "planner_pkg", "fly", "--world", str(world_file), "--start=-6,0,1", "--goal=2,0,1",
           "--planner", "direct", "--log", str(log), "--summary", str(summary),
           "--viz", "--viz-port", "0", "--viz-wait", "300"]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stderr:
            m = re.match(r"live view: (ws://127\.0\.0\.1:(\d+))\s", line)
            if m:
                url = m.group(1)
                break
        assert url is not None, "fly --viz printed no URL"
        session = run_client(url, NOT_TF, ["/tf"], timeout_s=300)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    flight = np.loadtxt(log, delimiter=",", skiprows=1)
    poses = [tf for _, msg in decoded(session, "/tf") for tf in msg.transforms if tf.child_frame_id == "base_link"]
    assert poses
    for tf in poses:
        t = stamp_ns(tf.timestamp) * 1e-9
        i = int(np.argmin(np.abs(flight[:, 0] - t)))
        assert abs(flight[i, 0] - t) < 1e-6  # planner ticks (10 Hz) fall on log samples (50 Hz)
        assert np.allclose(flight[i, 1:4], [tf.translation.x, tf.translation.y, tf.translation.z], atol=1e-5)
    assert {m.topic for m in session.messages} == set(TOPICS)


def test_the_view_does_not_change_the_flight(flown):
    _, _, with_view, _ = flown
    runner = ClosedLoopRunner(small_world(), DirectPlanner(), RunnerConfig(timeout_s=10.0))
    without = runner.run(START, GOAL)
    np.testing.assert_array_equal(with_view.log.as_array(), without.log.as_array())
    assert with_view.summary.reason == without.summary.reason


def test_fly_and_bringup_refuse_a_bad_or_taken_port_before_flying(tmp_path, capsys):
    import socket

    from planner_pkg.cli import main
    from planner_pkg.nodes.bringup import main as bringup_main

    world_file = tmp_path / "w.yaml"
    save_world(small_world(), world_file)
    args = ["fly", "--world", str(world_file), "--start=-6,0,1", "--goal=2,0,1", "--planner", "direct",
            "--log", str(tmp_path / "f.csv"), "--summary", str(tmp_path / "s.json"), "--viz"]
    assert main(args + ["--viz-port", "70000"]) == 2
    assert "expected a TCP port 0..65535" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(args + ["--viz-port", str(port)]) == 2
        err = capsys.readouterr().err
        assert f"127.0.0.1:{port}" in err and "--viz-port" in err
        assert not (tmp_path / "f.csv").exists()  # refused before flying
        assert bringup_main(["sim", "--world", str(world_file), "--viz", "--viz-port", str(port)]) == 2
        err = capsys.readouterr().err
        assert f"127.0.0.1:{port}" in err and "--viz-port" in err
