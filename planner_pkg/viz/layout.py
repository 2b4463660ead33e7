"""The default Foxglove layout for the live view, built with the SDK's own layout model
(``foxglove.layouts``), so the file follows Foxglove's layout format.

    python -m planner_pkg.viz.layout > config/foxglove/planner_live.json

The shipped ``config/foxglove/planner_live.json`` is this output (a test checks they agree and that
every topic it names is one the server publishes); docs/viz.md describes it. Import it in Foxglove:
*Layouts* > *Import from file*.
"""
from __future__ import annotations

import json
import sys

__all__ = ["default_layout", "layout_json"]


def default_layout():
    """A ``foxglove.layouts.Layout``: the 3D view (left, two thirds) beside a column with the depth
    image and two plots (speed, replan time). Raises ImportError without foxglove-sdk."""
    import foxglove.layouts as fl

    scene = fl.BaseRendererSceneUpdateTopicSettings
    three_d = fl.ThreeDeePanel(title="flight (3D)", config=fl.ThreeDeeConfig(
        follow_tf="base_link", follow_mode="follow-position", fixed_frame="map",
        camera_state=fl.ThreeDeeCameraState(distance=18.0, perspective=True, phi=55.0, theta_offset=-90.0,
                                            target_offset=(0.0, 0.0, 0.0)),
        topics={
            "/world": scene(visible=True),
            "/planner/trajectory": scene(visible=True),
            "/vehicle/path": scene(visible=True),
            "/camera/cloud": fl.BaseRendererPointCloudTopicSettings(
                visible=True, point_size=3.0, color_mode="colormap", color_field="z", decay_time=0.0),
        },
        layers={"grid": fl.BaseRendererGridLayerSettings()},
    ))
    depth = fl.ImagePanel(title="depth (m)", config=fl.ImageConfig(image_mode=fl.ImageModeConfig(
        image_topic="/camera/depth", color_mode="colormap", color_map="turbo", min_value=0.0, max_value=10.0)))
    speed = fl.PlotPanel(title="speed (m/s)", config=fl.PlotConfig(
        paths=[fl.PlotSeries(value="/vehicle/state.speed_mps", label="speed m/s", timestamp_method="receiveTime",
                             enabled=True)],
        show_legend=True, x_axis_val="timestamp"))
    replan = fl.PlotPanel(title="replan time (ms)", config=fl.PlotConfig(
        paths=[fl.PlotSeries(value="/planner/replan.replan_ms", label="replan ms", timestamp_method="receiveTime",
                             enabled=True)],
        show_legend=True, x_axis_val="timestamp"))
    side = fl.SplitContainer(direction="column", items=[
        fl.SplitItem(proportion=1.2, content=depth), fl.SplitItem(content=speed), fl.SplitItem(content=replan)])
    return fl.Layout(content=fl.SplitContainer(direction="row", items=[
        fl.SplitItem(proportion=2, content=three_d), fl.SplitItem(proportion=1, content=side)]))


def layout_json() -> str:
    """The default layout as indented JSON text (what the shipped file holds)."""
    return json.dumps(json.loads(default_layout().to_json()), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(layout_json())
