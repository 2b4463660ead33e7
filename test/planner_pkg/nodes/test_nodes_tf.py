"""The map -> base_link transform helper shared by sim_bridge and fcu_bridge. tf2_ros is not in
the PyPI wheels, so a stand-in module records what would be broadcast; with a real ROS 2 install
the same code path talks to tf2_ros.TransformBroadcaster."""
import sys
import types

import numpy as np
import pytest

from planner_pkg.nodes import common as c
from planner_pkg.nodes import conversions as conv
from planner_pkg.types import VehicleState, quaternion_from_yaw


class _RecordingBroadcaster:
    sent = []

    def __init__(self, node):
        self.node = node

    def sendTransform(self, tf):  # noqa: N802 - tf2_ros's name
        self.sent.append(tf)


@pytest.fixture
def fake_tf2(monkeypatch):
    module = types.ModuleType("tf2_ros")
    module.TransformBroadcaster = _RecordingBroadcaster
    _RecordingBroadcaster.sent = []
    monkeypatch.setitem(sys.modules, "tf2_ros", module)
    return _RecordingBroadcaster.sent


def test_tf_broadcaster_sends_the_pose_stamped_at_the_state_or_given_time(fake_tf2):
    send = c.tf_broadcaster(node=object())
    assert send is not None
    q = quaternion_from_yaw(0.7)
    state = VehicleState(t=12.25, position=np.array([1.0, -2.0, 3.5]), velocity=np.zeros(3), attitude=q,
                         angular_velocity=np.zeros(3))
    send(state, "map", "base_link")
    tf = fake_tf2[-1]
    assert (tf.header.frame_id, tf.child_frame_id) == ("map", "base_link")
    assert conv.stamp_to_seconds(tf.header.stamp) == pytest.approx(12.25)
    t, r = tf.transform.translation, tf.transform.rotation
    assert [t.x, t.y, t.z] == [1.0, -2.0, 3.5]
    assert [r.x, r.y, r.z, r.w] == pytest.approx(list(q))
    send(state, "map", "base_link", stamp=conv.seconds_to_stamp(99.5))
    assert conv.stamp_to_seconds(fake_tf2[-1].header.stamp) == pytest.approx(99.5)


def test_tf_broadcaster_is_none_without_tf2(monkeypatch):
    monkeypatch.setitem(sys.modules, "tf2_ros", None)  # import raises ImportError
    assert c.tf_broadcaster(node=object()) is None
