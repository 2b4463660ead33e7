"""Export a World as a Gazebo SDF 1.9 world (``gz sim world.sdf``).

One static model per obstacle with identical <collision> and <visual> geometry; a ground plane
(when the world's ground is solid), a thin static slab for a ceiling, and a directional sun.
No <plugin> elements: Gazebo Sim then loads its default server systems (physics, scene
broadcaster, user commands), and a user who adds sensors adds the plugins they need.
Numbers are written with ``repr`` so the file carries the World's floats exactly.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from .primitives import Box, Cylinder, Sphere
from .world import World

__all__ = ["to_sdf", "CEILING_THICKNESS_M"]

#: Thickness of the slab that stands in for the solid half-space above a ceiling, metres.
CEILING_THICKNESS_M = 0.1
_COLOURS = {"cylinder": "0.35 0.25 0.15 1", "box": "0.6 0.6 0.65 1", "sphere": "0.8 0.3 0.2 1",
            "ground": "0.5 0.55 0.45 1", "ceiling": "0.7 0.7 0.7 0.3"}


def _num(value: float) -> str:
    return repr(float(value))


def _text(parent: ET.Element, tag: str, text: str) -> ET.Element:
    element = ET.SubElement(parent, tag)
    element.text = text
    return element


def _geometry(parent: ET.Element, shape: str, params: dict) -> None:
    geometry = ET.SubElement(ET.SubElement(parent, "geometry"), shape)
    for tag, value in params.items():
        _text(geometry, tag, value)


def _static_model(world: ET.Element, name: str, pose: tuple, shape: str, params: dict,
                  colour: str) -> None:
    model = ET.SubElement(world, "model", name=name)
    _text(model, "static", "true")
    _text(model, "pose", " ".join(_num(v) for v in pose))
    link = ET.SubElement(model, "link", name="link")
    _geometry(ET.SubElement(link, "collision", name="collision"), shape, params)
    visual = ET.SubElement(link, "visual", name="visual")
    _geometry(visual, shape, params)
    material = ET.SubElement(visual, "material")
    for tag in ("ambient", "diffuse"):
        _text(material, tag, colour)
    _text(material, "specular", "0.1 0.1 0.1 1")


def _sun(world: ET.Element) -> None:
    light = ET.SubElement(world, "light", type="directional", name="sun")
    _text(light, "cast_shadows", "true")
    _text(light, "pose", "0 0 10 0 0 0")
    _text(light, "diffuse", "0.8 0.8 0.8 1")
    _text(light, "specular", "0.2 0.2 0.2 1")
    attenuation = ET.SubElement(light, "attenuation")
    for tag, value in (("range", "1000"), ("constant", "0.9"), ("linear", "0.01"),
                       ("quadratic", "0.001")):
        _text(attenuation, tag, value)
    _text(light, "direction", "-0.5 0.1 -0.9")


def to_sdf(world: World, name: str = "planner_world") -> str:
    """Gazebo SDF 1.9 world text for ``world``.

    Models are named ``obstacle_<index>`` (index in ``world.obstacles``). Cylinders get a pose at
    z = height / 2 (SDF cylinders are centred on their origin), boxes carry their yaw in the
    pose's last angle, spheres their centre. Returns the XML document as a str.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    root = ET.Element("sdf", version="1.9")
    element = ET.SubElement(root, "world", name=name)
    _text(element, "gravity", "0 0 -9.81")
    _sun(element)
    extent = world.bounds_max - world.bounds_min
    centre = 0.5 * (world.bounds_max + world.bounds_min)
    # Pad the planes past the bounds so the edge of the world is not visible from inside it.
    plane = f"{_num(extent[0] + 20.0)} {_num(extent[1] + 20.0)}"
    if world.ground:
        model = ET.SubElement(element, "model", name="ground_plane")
        _text(model, "static", "true")
        link = ET.SubElement(model, "link", name="link")
        params = {"normal": "0 0 1", "size": plane}
        _geometry(ET.SubElement(link, "collision", name="collision"), "plane", params)
        visual = ET.SubElement(link, "visual", name="visual")
        _geometry(visual, "plane", params)
        material = ET.SubElement(visual, "material")
        for tag in ("ambient", "diffuse"):
            _text(material, tag, _COLOURS["ground"])
    if world.ceiling is not None:
        size = f"{_num(extent[0] + 20.0)} {_num(extent[1] + 20.0)} {_num(CEILING_THICKNESS_M)}"
        _static_model(element, "ceiling",
                      (centre[0], centre[1], world.ceiling + 0.5 * CEILING_THICKNESS_M, 0, 0, 0),
                      "box", {"size": size}, _COLOURS["ceiling"])
    for i, obstacle in enumerate(world.obstacles):
        label = f"obstacle_{i}"
        if isinstance(obstacle, Cylinder):
            x, y = obstacle.center
            _static_model(element, label, (x, y, 0.5 * obstacle.height, 0, 0, 0), "cylinder",
                          {"radius": _num(obstacle.radius), "length": _num(obstacle.height)},
                          _COLOURS["cylinder"])
        elif isinstance(obstacle, Box):
            _static_model(element, label, (*obstacle.center, 0, 0, obstacle.yaw), "box",
                          {"size": " ".join(_num(v) for v in obstacle.size)}, _COLOURS["box"])
        elif isinstance(obstacle, Sphere):
            _static_model(element, label, (*obstacle.center, 0, 0, 0), "sphere",
                          {"radius": _num(obstacle.radius)}, _COLOURS["sphere"])
        else:
            raise TypeError(f"obstacle {i}: cannot export {type(obstacle).__name__}")
    ET.indent(root, space="  ")
    return '<?xml version="1.0" ?>\n' + ET.tostring(root, encoding="unicode") + "\n"
