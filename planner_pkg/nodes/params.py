"""ROS parameters as a view of a component's config dataclass (one source of defaults and checks).

:func:`param_specs` walks a :class:`~planner_pkg.config_schema.Config` (nested sections become
dotted names: ``ego.map.resolution_m``) and gives one :class:`ParamSpec` per field it can express
as a ROS parameter: ``float`` -> double, ``int`` -> integer, ``bool``, ``str``, ``enum.Enum`` ->
string (the member values), ``Optional[float]`` -> double with NaN meaning None, and tuples of
numbers or strings -> arrays. Description, range and choices are the field's own metadata
(:mod:`planner_pkg.config_schema`); a section's ``derived`` sub-fields (set by the parent) are
not parameters.

:class:`ConfigParameters` declares them on a node with a ``ParameterDescriptor`` each (range and
choices included), builds the config from the declared values (YAML overrides), and validates
every runtime change by building the candidate config with ``Config.with_overrides``: the
config's own checks are the only validator, so a bad value is refused with its message (naming
the parameter) in ``SetParametersResult.reason``. At startup a bad value raises
:class:`ParameterConfigError` naming the parameter, and the node's ``main`` exits with code 2
(the bringup does not restart a node for that).
"""
from __future__ import annotations

import dataclasses
import enum
import math
import sys
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from planner_pkg.config_schema import Config, bounds_text, field_descriptions, unwrap_optional

__all__ = ["ParamSpec", "ParameterConfigError", "param_specs", "build_config", "ConfigParameters",
           "config_from_mapping", "flatten_yaml_block"]


class ParameterConfigError(ValueError):
    """A parameter value was refused (startup); the message names the parameter and the reason."""


@dataclass(frozen=True)
class ParamSpec:
    """One ROS parameter mirroring one dataclass field.

    name: ROS name (dotted for nested configs); path: field names from the root config;
    kind: double | integer | bool | string | double_array | integer_array | string_array;
    default: the ROS value of the dataclass default; optional: NaN / "" stands for None;
    range / choices / bounds: what the descriptor advertises (from the field's metadata);
    prefix: the ROS name of the root config (``"ego."``).
    """

    name: str
    path: Tuple[str, ...]
    kind: str
    default: Any
    description: str = ""
    range: Optional[Tuple[float, float]] = None
    choices: Optional[Tuple[str, ...]] = None
    optional: bool = False
    read_only: bool = False
    bounds: str = ""
    prefix: str = ""


def _kind_of(tp, default) -> Optional[str]:
    """ROS kind for a (non-optional) type hint and its default, or None if not expressible."""
    if tp is bool:
        return "bool"
    if tp is int:
        return "integer"
    if tp is float:
        return "double"
    if tp is str:
        return "string"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "string"
    origin = typing.get_origin(tp)
    if tp is tuple or origin in (tuple, list, Sequence) or tp is list:
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        elem = args[0] if args and all(a == args[0] for a in args) else None
        sample = list(default) if isinstance(default, (tuple, list)) else []
        if elem is str or (elem is None and sample and all(isinstance(v, str) for v in sample)):
            return "string_array"
        if elem is int or (elem is None and sample and all(isinstance(v, int) and not isinstance(v, bool)
                                                          for v in sample)):
            return "integer_array"
        if elem in (float, None) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in sample):
            return "double_array"
    return None


def _to_ros(spec_kind: str, value, optional: bool):
    if value is None and optional:
        return math.nan if spec_kind == "double" else ""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if spec_kind == "double":
        return float(value)
    if spec_kind == "integer":
        return int(value)
    if spec_kind == "double_array":
        return [float(v) for v in value]
    if spec_kind == "integer_array":
        return [int(v) for v in value]
    if spec_kind == "string_array":
        return [str(v) for v in value]
    return value


def param_specs(config_cls, default=None, prefix: str = "", _path: Tuple[str, ...] = (),
                _skip: Sequence[str] = ()) -> List[ParamSpec]:
    """Parameter specs for every expressible field of ``config_cls`` (defaults from ``default``)."""
    default = config_cls() if default is None else default
    hints = typing.get_type_hints(config_cls)
    docs = field_descriptions(config_cls)
    root = prefix[: len(prefix) - len(".".join(_path)) - (1 if _path else 0)]
    specs: List[ParamSpec] = []
    for f in dataclasses.fields(config_cls):
        if f.name.startswith("_") or not f.init or f.name in _skip:
            continue
        value = getattr(default, f.name)
        tp, optional = unwrap_optional(hints.get(f.name, type(value)))
        name = f"{prefix}{f.name}"
        meta = f.metadata or {}
        if dataclasses.is_dataclass(tp) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
            sub_cls = type(value) if value is not None else tp
            specs.extend(param_specs(sub_cls, value, name + ".", _path + (f.name,), tuple(meta.get("derived") or ())))
            continue
        kind = _kind_of(tp, value)
        if kind is None or (optional and kind not in ("double", "string")):
            continue  # not expressible as a ROS parameter: keeps its dataclass default
        choices = meta.get("choices")
        if isinstance(tp, type) and issubclass(tp, enum.Enum) and choices is None:
            choices = tuple(str(m.value) for m in tp)
        desc = docs.get(f.name, "")
        if optional:
            desc = (desc + " " if desc else "") + ("(NaN = none)" if kind == "double" else "(empty = none)")
        specs.append(ParamSpec(
            name=name, path=_path + (f.name,), kind=kind, default=_to_ros(kind, value, optional),
            description=desc, range=meta.get("range"), choices=tuple(str(c) for c in choices) if choices else None,
            optional=optional, read_only=bool(meta.get("read_only", False)), bounds=bounds_text(meta),
            prefix=root,
        ))
    return specs


def _from_ros(spec: ParamSpec, value):
    """ROS value -> the value the config reads (NaN / "" -> None for optional fields)."""
    if spec.optional and ((spec.kind == "double" and isinstance(value, float) and math.isnan(value))
                          or (spec.kind == "string" and value == "")):
        return None
    return value


def build_config(config_cls, specs: Sequence[ParamSpec], values: Dict[str, Any], base=None):
    """A new config: ``base`` (default: ``config_cls()``) with the ROS ``values`` ({name: value}) applied.

    Validation is the config's own (``Config.with_overrides``); a failure raises
    :class:`~planner_pkg.config_schema.ConfigError` (a ValueError) naming the parameter.
    """
    if not issubclass(config_cls, Config):
        raise TypeError(f"{config_cls.__name__} is not a planner_pkg.config_schema.Config")
    base = config_cls() if base is None else base
    by_name = {s.name: s for s in specs}
    nested: Dict[str, Any] = {}
    prefix = ""
    for name, value in values.items():
        spec = by_name.get(name)
        if spec is None:
            raise ValueError(f"unknown parameter {name!r}")
        prefix = spec.prefix
        node = nested
        for part in spec.path[:-1]:
            node = node.setdefault(part, {})
        node[spec.path[-1]] = _from_ros(spec, value)
    if not nested:
        return base
    return base.with_overrides(nested, prefix=prefix)


def flatten_yaml_block(block: dict, prefix: str = "") -> Dict[str, Any]:
    """``{a: {b: 1}}`` -> ``{"a.b": 1}`` (how ROS reads nested keys under ros__parameters)."""
    out: Dict[str, Any] = {}
    for k, v in block.items():
        if isinstance(v, dict):
            out.update(flatten_yaml_block(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_from_mapping(config_cls, mapping: dict, default=None, prefix: str = ""):
    """Build a config from a (nested) YAML mapping the way the node would: unknown keys raise."""
    specs = param_specs(config_cls, default, prefix)
    flat = {k: v for k, v in flatten_yaml_block(mapping).items() if k.startswith(prefix)}
    return build_config(config_cls, specs, flat, default)


_INT64 = (-2 ** 63, 2 ** 63 - 1)


class ConfigParameters:
    """Declare a config dataclass's fields as parameters of ``node`` and keep ``self.config`` in sync.

    ``on_change(new_config)`` (optional) runs after an accepted runtime change. Several instances
    (different prefixes) may live on one node; each only looks at its own parameters.
    """

    def __init__(self, node, config_cls, default=None, prefix: str = "",
                 on_change: Optional[Callable[[Any], None]] = None):
        from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
        from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
        from rclpy.parameter import Parameter

        self.node = node
        self.config_cls = config_cls
        self.default = config_cls() if default is None else default
        self.specs = param_specs(config_cls, self.default, prefix)
        self._by_name = {s.name: s for s in self.specs}
        self._on_change = on_change
        types = {"double": Parameter.Type.DOUBLE, "integer": Parameter.Type.INTEGER, "bool": Parameter.Type.BOOL,
                 "string": Parameter.Type.STRING, "double_array": Parameter.Type.DOUBLE_ARRAY,
                 "integer_array": Parameter.Type.INTEGER_ARRAY, "string_array": Parameter.Type.STRING_ARRAY}
        values: Dict[str, Any] = {}
        for spec in self.specs:
            d = ParameterDescriptor(name=spec.name, type=types[spec.kind].value, description=spec.description,
                                    read_only=spec.read_only)
            if spec.range is not None and not spec.optional and spec.kind in ("double", "integer"):
                lo, hi = spec.range  # a descriptor range is closed and finite: the config's check is exact
                if spec.kind == "double":
                    d.floating_point_range = [FloatingPointRange(from_value=max(float(lo), -sys.float_info.max),
                                                                 to_value=min(float(hi), sys.float_info.max),
                                                                 step=0.0)]
                else:
                    d.integer_range = [IntegerRange(from_value=int(max(lo, _INT64[0])),
                                                    to_value=int(min(hi, _INT64[1])), step=1)]
            constraints = [f"must be {spec.bounds}"] if spec.bounds else []
            if spec.choices:
                constraints.append("one of: " + ", ".join(spec.choices))
            d.additional_constraints = "; ".join(constraints)
            try:
                if spec.kind.endswith("_array") and not spec.default:
                    param = node.declare_parameter(spec.name, types[spec.kind], d)
                else:
                    param = node.declare_parameter(spec.name, spec.default, d)
            except (InvalidParameterValueException, InvalidParameterTypeException) as exc:
                raise ParameterConfigError(f"parameter {spec.name!r} refused: {exc}") from None
            value = param.value
            if value is None:
                value = [] if spec.kind.endswith("_array") else spec.default
            if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
                value = list(value.tolist() if hasattr(value, "tolist") else value)
            values[spec.name] = value
        changed = {n: v for n, v in values.items() if v != self._by_name[n].default}
        try:
            self.config = build_config(config_cls, self.specs, changed, self.default)
        except ValueError as exc:
            raise ParameterConfigError(f"refused at startup: {exc}") from None
        self._pending = None
        node.add_on_set_parameters_callback(self._validate)
        node.add_post_set_parameters_callback(self._apply)

    @property
    def names(self) -> List[str]:
        return [s.name for s in self.specs]

    def _ours(self, params) -> Dict[str, Any]:
        out = {}
        for p in params:
            if p.name in self._by_name:
                v = p.value
                out[p.name] = list(v.tolist() if hasattr(v, "tolist") else v) if isinstance(v, (list, tuple)) \
                    or hasattr(v, "tolist") else v
        return out

    def _validate(self, params):
        from rcl_interfaces.msg import SetParametersResult

        ours = self._ours(params)
        if not ours:
            return SetParametersResult(successful=True)
        try:
            candidate = build_config(self.config_cls, self.specs, ours, self.config)
        except ValueError as exc:
            self.node.get_logger().warning(f"parameter change refused: {exc}")
            return SetParametersResult(successful=False, reason=str(exc))
        self._pending = candidate
        return SetParametersResult(successful=True)

    def _apply(self, params) -> None:
        if not self._ours(params) or self._pending is None:
            return
        self.config, self._pending = self._pending, None
        self.node.get_logger().info(f"parameters updated: {sorted(self._ours(params))}")
        if self._on_change is not None:
            self._on_change(self.config)


# ---------------------------------------------------------------------------------------------
# parameter files (the --params-file YAML every node of a graph reads)
# ---------------------------------------------------------------------------------------------
class ParamsFileError(ValueError):
    """A parameter file cannot be used; the message names the file and the problem."""


#: Parameters rclpy declares on every node itself.
BUILTIN_PARAMETERS = ("use_sim_time", "start_type_description_service")
_BUILTIN_PREFIXES = ("qos_overrides.",)


def read_params_file(path) -> Dict[str, dict]:
    """``{node key: ros__parameters mapping}`` of a ROS 2 parameter YAML (``/**/planner:
    {ros__parameters: {...}}``); ParamsFileError naming the file for text that is not UTF-8,
    malformed YAML, or anything but a mapping of node blocks. Loading never runs code."""
    from pathlib import Path

    import yaml

    from planner_pkg import safe_yaml

    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ParamsFileError(f"parameter file {where!r}: cannot read it: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParamsFileError(f"parameter file {where!r} is not UTF-8 text (byte {raw[exc.start]:#04x} at offset "
                              f"{exc.start})") from None
    try:
        data = safe_yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParamsFileError(f"parameter file {where!r} is not valid YAML{at}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParamsFileError(f"parameter file {where!r} must be a mapping of node blocks "
                              f"('/**/planner: {{ros__parameters: {{...}}}}'), got a {type(data).__name__}")
    blocks: Dict[str, dict] = {}
    for key, block in data.items():
        if not isinstance(key, str) or not key:
            raise ParamsFileError(f"parameter file {where!r}: node key {key!r} is not a node name")
        if not isinstance(block, dict) or set(block) != {"ros__parameters"}:
            got = sorted(map(str, block)) if isinstance(block, dict) else type(block).__name__
            raise ParamsFileError(f"parameter file {where!r}: block {key!r} must hold exactly "
                                  f"'ros__parameters: {{...}}', got {got}")
        params = block["ros__parameters"]
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise ParamsFileError(f"parameter file {where!r}: {key}.ros__parameters must be a mapping of "
                                  f"parameter names to values, got a {type(params).__name__}")
        blocks[key] = params
    return blocks


def node_of_key(key: str) -> str:
    """The node name a parameter-file key addresses (``/**/planner`` -> ``planner``); ``*`` for a
    key that addresses every node (``/**``)."""
    last = key.rstrip("/").split("/")[-1]
    return "*" if last in ("**", "*", "") else last


def _type_problem(spec: ParamSpec, value) -> Optional[str]:
    """Why ROS would refuse ``value`` for ``spec`` by type (ROS parameters are typed), or None."""
    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    scalar = {"double": lambda v: isinstance(v, float), "integer": is_int, "bool": lambda v: isinstance(v, bool),
              "string": lambda v: isinstance(v, str)}
    if spec.kind in scalar:
        if scalar[spec.kind](value):
            return None
        hint = f" (write {value}.0: ROS reads {value} as an integer)" if spec.kind == "double" and is_int(value) else ""
        return f"must be a {spec.kind}, got {value!r}{hint}"
    elem = spec.kind[: -len("_array")]
    if not isinstance(value, list) or not all(scalar[elem](v) for v in value):
        hint = " (write 1.0, not 1)" if elem == "double" and isinstance(value, list) and any(map(is_int, value)) \
            else ""
        return f"must be a list of {elem}s, got {value!r}{hint}"
    return None


def check_params_file(blocks: Dict[str, dict], node_configs: Dict[str, Sequence[Tuple[type, str]]],
                      path="parameter file") -> None:
    """ParamsFileError naming the file, block and key for: a block for a node that is not one of
    ``node_configs`` (node name -> its config classes and prefixes), a parameter a node does not
    declare (ROS would silently drop it), a value of the wrong type, or a value the node's config
    refuses. ``/**`` blocks may hold parameters of any of the nodes. A node listed with no config
    classes (its module could not be imported here) is not checked, nor are ``/**`` keys then."""
    import difflib

    where = f"parameter file {str(path)!r}"
    specs_of = {node: [(cls, prefix, param_specs(cls, prefix=prefix)) for cls, prefix in configs]
                for node, configs in node_configs.items()}
    for key, params in blocks.items():
        node = node_of_key(key)
        if node != "*" and node not in specs_of:
            close = difflib.get_close_matches(node, list(specs_of), 1)
            raise ParamsFileError(f"{where}: block {key!r} is for an unknown node {node!r}"
                                  f"{f' (did you mean {close[0]!r}?)' if close else ''}; the nodes are "
                                  f"{', '.join(sorted(specs_of))}")
        nodes = list(specs_of) if node == "*" else [node]
        if not all(specs_of[n] for n in nodes):
            continue  # nothing to check against
        flat = flatten_yaml_block(params)
        known = {s.name: s for n in nodes for _, _, specs in specs_of[n] for s in specs}
        unknown = [k for k in flat if k not in known and k not in BUILTIN_PARAMETERS
                   and not k.startswith(_BUILTIN_PREFIXES)]
        if unknown:
            hints = []
            for k in unknown[:5]:
                close = difflib.get_close_matches(k, list(known), 1)
                hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ParamsFileError(f"{where}: {key}: unknown parameter(s) {', '.join(hints)} - ROS would drop them "
                                  f"silently; fix the name or remove it")
        for name, value in flat.items():
            spec = known.get(name)
            problem = _type_problem(spec, value) if spec is not None else None
            if problem:
                raise ParamsFileError(f"{where}: {key}: parameter {name!r} {problem}")
        if node == "*":
            continue  # values are checked against each node's own block; a /** value may suit only some
        for cls, _prefix, specs in specs_of[node]:
            names = {s.name for s in specs}
            mine = {k: v for k, v in flat.items() if k in names}
            if not mine:
                continue
            try:
                build_config(cls, specs, mine)
            except (ValueError, TypeError) as exc:
                raise ParamsFileError(f"{where}: {key}: {exc}") from None
