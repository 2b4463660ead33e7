"""World files: YAML or JSON, validated on load, written so that loading gives back an equal World.

Format (metres, ENU, ground at z = 0)::

    bounds: {min: [x, y, z], max: [x, y, z]}     # required, min < max on every axis
    ground: true                                 # optional, default true: z <= 0 is solid
    ceiling: null                                # optional, null or a height: z >= h is solid
    obstacles:                                   # optional, default empty
      - {type: cylinder, center: [x, y], radius: r, height: h}     # stands on z = 0
      - {type: box, center: [x, y, z], size: [sx, sy, sz], yaw: 0.0} # yaw optional, radians
      - {type: sphere, center: [x, y, z], radius: r}

Loading never runs code (``safe_yaml.safe_load``, ``json.loads``). Every problem raises
``WorldFormatError`` naming where it is, e.g.
``obstacle 3 (box): key 'size' must be 3 positive finite numbers, got [1, -2, 3]``.

Size caps (memory): a file of at most ``MAX_WORLD_FILE_BYTES``, at most ``MAX_OBSTACLES``
obstacles, bounds within +-``MAX_EXTENT_M`` (the flight envelope) on every axis.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any, Optional, Union

import yaml

from planner_pkg import safe_yaml

from .primitives import OBSTACLE_TYPES, FieldError, allowed_keys, real_vector, required_keys
from .world import MAX_EXTENT_M, MAX_OBSTACLES, World

__all__ = ["WorldFormatError", "world_from_dict", "load_world", "save_world", "MAX_WORLD_FILE_BYTES"]

#: Largest world file read, bytes: a world at the obstacle cap written by ``save_world`` takes
#: about 5 MB; a bigger file is refused before it is read.
MAX_WORLD_FILE_BYTES = 64 * 1024 * 1024

PathLike = Union[str, "os.PathLike[str]"]

_TOP_LEVEL_KEYS = ("bounds", "ground", "ceiling", "obstacles")
_YAML_SUFFIXES = (".yaml", ".yml")
_JSON_SUFFIXES = (".json",)


class WorldFormatError(ValueError):
    """A world file or mapping is malformed.

    index: position of the offending obstacle in ``obstacles``, or None for top-level problems.
    key: the offending key, or None.
    """

    def __init__(self, message: str, index: Optional[int] = None, key: Optional[str] = None):
        super().__init__(message)
        self.index = index
        self.key = key


def _type_name(value: Any) -> str:
    return type(value).__name__


def _check_keys(mapping: Mapping, allowed: tuple, where: str, index: Optional[int] = None) -> None:
    for key in mapping:
        if key not in allowed:
            raise WorldFormatError(f"{where}unknown key {key!r} (allowed: {', '.join(allowed)})",
                                   index, str(key))


def _bounds(value: Any) -> tuple:
    if not isinstance(value, Mapping):
        raise WorldFormatError(f"key 'bounds' must be a mapping {{min: [x, y, z], max: [x, y, z]}}"
                               f", got {value!r}", key="bounds")
    _check_keys(value, ("min", "max"), "bounds: ")
    corners = []
    for name in ("min", "max"):
        if name not in value:
            raise WorldFormatError(f"bounds: missing key '{name}'", key=name)
        try:
            corners.append(real_vector(value[name], 3, name))
        except ValueError as exc:
            raise WorldFormatError(f"bounds: {exc}", key=name) from None
    low, high = corners
    far = max(abs(v) for v in (*low, *high))
    if far > MAX_EXTENT_M:
        raise WorldFormatError(f"bounds: coordinates must lie within +-{MAX_EXTENT_M:g} m (the flight envelope), "
                               f"got min {list(low)} max {list(high)}", key="bounds")
    if not all(a < b for a, b in zip(low, high)):
        raise WorldFormatError(f"bounds: 'min' must be < 'max' on every axis, got min {list(low)} "
                               f"max {list(high)}", key="bounds")
    return low, high


def _obstacle(index: int, item: Any):
    if not isinstance(item, Mapping):
        raise WorldFormatError(f"obstacle {index}: must be a mapping with a 'type' key, "
                               f"got {_type_name(item)} {item!r}", index)
    if "type" not in item:
        raise WorldFormatError(f"obstacle {index}: missing key 'type' "
                               f"(one of: {', '.join(OBSTACLE_TYPES)})", index, "type")
    kind = item["type"]
    if not isinstance(kind, str) or kind not in OBSTACLE_TYPES:
        raise WorldFormatError(f"obstacle {index}: unknown type {kind!r} "
                               f"(one of: {', '.join(OBSTACLE_TYPES)})", index, "type")
    cls = OBSTACLE_TYPES[kind]
    where = f"obstacle {index} ({kind}): "
    _check_keys(item, allowed_keys(cls), where, index)
    for key in required_keys(cls):
        if key not in item:
            raise WorldFormatError(f"{where}missing key '{key}'", index, key)
    fields = {k: v for k, v in item.items() if k != "type"}
    try:
        return cls(**fields)
    except FieldError as exc:
        raise WorldFormatError(f"{where}{exc}", index, exc.key) from None


def world_from_dict(data: Any) -> World:
    """Build a World from a world-file mapping (see the module docstring).

    Raises WorldFormatError naming the obstacle index and key for any malformed input.
    """
    if not isinstance(data, Mapping):
        raise WorldFormatError("a world must be a mapping with keys 'bounds' and 'obstacles', "
                               f"got {_type_name(data)}")
    _check_keys(data, _TOP_LEVEL_KEYS, "")
    if "bounds" not in data:
        raise WorldFormatError("missing key 'bounds' ({min: [x, y, z], max: [x, y, z]}, metres)",
                               key="bounds")
    low, high = _bounds(data["bounds"])
    ground = data.get("ground", True)
    if not isinstance(ground, bool):
        raise WorldFormatError(f"key 'ground' must be true or false, got {ground!r}", key="ground")
    ceiling = data.get("ceiling")
    if ceiling is not None:
        if isinstance(ceiling, bool) or not isinstance(ceiling, (int, float)) \
                or not math.isfinite(ceiling) or not ceiling > 0:
            raise WorldFormatError(f"key 'ceiling' must be null or a positive finite height in "
                                   f"metres, got {ceiling!r}", key="ceiling")
    items = data.get("obstacles")
    if items is None:
        items = []
    if not isinstance(items, (list, tuple)):
        raise WorldFormatError(f"key 'obstacles' must be a list, got {_type_name(items)}",
                               key="obstacles")
    if len(items) > MAX_OBSTACLES:
        raise WorldFormatError(f"key 'obstacles' has {len(items)} obstacles, more than the {MAX_OBSTACLES} a world "
                               f"may have", key="obstacles")
    obstacles = [_obstacle(i, item) for i, item in enumerate(items)]
    return World(low, high, obstacles, ground=ground, ceiling=ceiling)


def _format(path: PathLike) -> str:
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix in _YAML_SUFFIXES:
        return "yaml"
    if suffix in _JSON_SUFFIXES:
        return "json"
    raise WorldFormatError(f"{os.fspath(path)}: unknown world file extension {suffix!r}; "
                           "use .yaml, .yml or .json")


def load_world(path: PathLike) -> World:
    """Load a world file; the format (YAML or JSON) follows the extension.

    Raises WorldFormatError (prefixed with the path) for malformed content, text that is not
    UTF-8 or a world above the size caps, FileNotFoundError when the file is missing.
    """
    kind = _format(path)
    with open(path, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > MAX_WORLD_FILE_BYTES:
            raise WorldFormatError(f"{os.fspath(path)}: {size} bytes, more than the {MAX_WORLD_FILE_BYTES} a world "
                                   f"file may have")
        raw = stream.read(MAX_WORLD_FILE_BYTES + 1)
    if len(raw) > MAX_WORLD_FILE_BYTES:  # a pipe or a file that grew: fstat could not tell
        raise WorldFormatError(f"{os.fspath(path)}: more than the {MAX_WORLD_FILE_BYTES} bytes a world file may have")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorldFormatError(f"{os.fspath(path)}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset "
                               f"{exc.start}); a world file is YAML or JSON in UTF-8") from None
    try:
        data = safe_yaml.safe_load(text) if kind == "yaml" else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise WorldFormatError(f"{os.fspath(path)}: malformed {kind.upper()}: {exc}") from None
    try:
        return world_from_dict(data)
    except WorldFormatError as exc:
        raise WorldFormatError(f"{os.fspath(path)}: {exc}", exc.index, exc.key) from None


def save_world(world: World, path: PathLike) -> None:
    """Write ``world`` to ``path`` as YAML or JSON (by extension); ``load_world`` gives it back
    equal, float for float."""
    kind = _format(path)
    data = world.to_dict()
    text = _yaml_text(data) if kind == "yaml" else _json_text(data)
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(text)


class _OneLine(dict):
    """A mapping the YAML writer puts on one line (one obstacle per line keeps files diffable)."""


class _WorldDumper(yaml.SafeDumper):
    pass


_WorldDumper.add_representer(
    _OneLine, lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data.items(),
                                                            flow_style=True))


def _yaml_text(data: dict) -> str:
    data = dict(data, obstacles=[_OneLine(o) for o in data["obstacles"]])
    return yaml.dump(data, Dumper=_WorldDumper, sort_keys=False, default_flow_style=None,
                     width=1000)


def _json_text(data: dict) -> str:
    def dumps(value: Any) -> str:
        return json.dumps(value, allow_nan=False)

    head = [f'  "{key}": {dumps(data[key])}' for key in ("bounds", "ground", "ceiling")]
    rows = ",\n".join(f"    {dumps(o)}" for o in data["obstacles"])
    obstacles = f'  "obstacles": [\n{rows}\n  ]' if rows else '  "obstacles": []'
    return "{\n" + ",\n".join(head + [obstacles]) + "\n}\n"
