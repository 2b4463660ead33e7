"""Typed configuration: every config dataclass declares each field once, with its checks.

A configuration is a frozen dataclass deriving from :class:`Config` (nested dataclasses for its
sections). Each field is written once, with :func:`setting`: its default and its validation
metadata. Everything else reads that metadata: construction (``__post_init__``), mappings
(:meth:`Config.from_dict`, YAML, dotted keys ``"map.resolution_m"``), overrides
(:meth:`Config.with_overrides`, CLI and ROS parameter changes), the plain view
(:meth:`Config.to_dict`) and the ROS parameter descriptors (:mod:`planner_pkg.nodes.params`:
description, ranges, choices). Unknown keys are errors listing the known ones; every value is
type-checked against the field's annotation (``bool``, ``int``, ``float`` (an int is accepted and
stored as float), ``str``, ``enum.Enum`` (a member or its value), fixed-length tuples of those,
mappings, ``Optional[...]``, nested dataclasses) and every error names the dotted key
(``EgoConfig.map.resolution_m``, ``loss.collision``; under ROS ``ego.map.resolution_m``).

Field metadata (what :func:`setting` writes):

``range``: ``(low, high)`` inclusive bounds (``math.inf`` for none); for tuples, of every element.
``low_open``, ``high_open``: the low / high bound is exclusive (``> low``, ``< high``).
``choices``: the allowed values.
``pair``: a ``(low, high)`` tuple whose first element may not exceed the second.
``description``: what the field means (documentation, ROS descriptors); without it, the
    ``name: text`` line of the class docstring (:func:`field_descriptions`).
``derived``: on a nested section, ``{sub-field: reason}`` for sub-fields the parent sets itself
    (refused in a mapping, not declared as ROS parameters).
``read_only``: a ROS parameter that cannot change at run time.

Floats must be finite wherever a field is validated. Cross-field rules go in the class's
``_check`` method (run after the fields' checks), written with :meth:`Config._error` /
:meth:`Config._key` and the checks below (:meth:`Schema.number`, :meth:`Schema.integer`, :meth:`Schema.choice`,
:meth:`Schema.vector`).

A :class:`Schema` only decides how errors are worded (each configuration keeps the wording its
users know): ``key: must be ...``, ``key must be finite and > 0`` or ``key must be a positive
finite number``, and how unknown keys are reported.
"""
from __future__ import annotations

import collections.abc
import contextvars
import dataclasses
import enum
import functools
import math
import numbers
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["ConfigError", "Schema", "Config", "PLAIN", "setting", "positive", "non_negative", "unwrap_optional",
           "nest_dotted", "field_descriptions", "config_classes", "bounds_text"]

_INF = math.inf


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range (names the key)."""


def _field_default(f: dataclasses.Field):
    """A dataclass field's default value (None when it has none)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def setting(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
            range: Optional[Tuple[float, float]] = None, low_open: bool = False,  # noqa: A002 - the metadata key
            high_open: bool = False,
            choices: Optional[Sequence[Any]] = None, pair: bool = False, description: str = "",
            derived: Optional[Mapping[str, str]] = None, **metadata):
    """A dataclass field whose metadata :meth:`Schema.validate` checks (see the module doc)."""
    meta: Dict[str, Any] = dict(metadata)
    if derived:
        meta["derived"] = dict(derived)
    if range is not None:
        meta["range"] = tuple(range)
    if low_open:
        meta["low_open"] = True
    if high_open:
        meta["high_open"] = True
    if choices is not None:
        meta["choices"] = tuple(choices)
    if pair:
        meta["pair"] = True
    if description:
        meta["description"] = description
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


def positive(default: Any = dataclasses.MISSING, **kwargs):
    """A :func:`setting` that must be finite and > 0 (each element, for a tuple)."""
    return setting(default, range=(0.0, _INF), low_open=True, **kwargs)


def non_negative(default: Any = dataclasses.MISSING, **kwargs):
    """A :func:`setting` that must be finite and >= 0 (each element, for a tuple)."""
    return setting(default, range=(0.0, _INF), **kwargs)


def unwrap_optional(tp) -> Tuple[Any, bool]:
    """``Optional[X]`` -> ``(X, True)``; anything else -> ``(tp, False)``."""
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def nest_dotted(values: Mapping[str, Any], error=ConfigError) -> Dict[str, Any]:
    """``{"a.b": 1, "a": {"c": 2}}`` -> ``{"a": {"b": 1, "c": 2}}`` (the ROS parameter spelling)."""
    nested: Dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise error(f"config keys must be strings, got {key!r}")
        parts = key.split(".")
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise error(f"config key {key!r} conflicts with a scalar value for {part!r}")
        if isinstance(value, Mapping):
            node.setdefault(parts[-1], {}).update(nest_dotted(value, error))
        else:
            node[parts[-1]] = value
    return nested


@functools.lru_cache(maxsize=None)
def _hints(cls) -> Dict[str, Any]:
    return typing.get_type_hints(cls)


def _num_text(x) -> str:
    return format(x, "g") if isinstance(x, float) else str(x)


def _bounds_text(low, high, low_open: bool, high_open: bool = False) -> str:
    """``>= 0``, ``> 0 and <= 1``, ``in 1..255``, ``<= 5`` or "" (no bound)."""
    if low > -_INF and high < _INF and not low_open and not high_open:
        return f"in {_num_text(low)}..{_num_text(high)}"
    parts = []
    if low > -_INF:
        parts.append(f"{'>' if low_open else '>='} {_num_text(low)}")
    if high < _INF:
        parts.append(f"{'<' if high_open else '<='} {_num_text(high)}")
    return " and ".join(parts)


def bounds_text(meta: Mapping[str, Any]) -> str:
    """The bounds a field's metadata sets, in words (``> 0``, ``in 1..255``; "" for none)."""
    rng = meta.get("range")
    if rng is None:
        return ""
    return _bounds_text(rng[0], rng[1], bool(meta.get("low_open")), bool(meta.get("high_open")))


def _unknown_keys(keys: Sequence[str], known: Sequence[str], section: str) -> str:
    return f"unknown key(s) {list(keys)}; known in {section or 'the top level'}: {list(known)}"


def _is_bool(value) -> bool:
    """``bool`` or NumPy's ``bool_`` (without importing NumPy)."""
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def _is_tuple_hint(tp) -> bool:
    return tp is tuple or typing.get_origin(tp) is tuple


@dataclass(frozen=True)
class Schema:
    """Builds and checks config dataclasses; its fields only choose the wording of errors.

    sep: between the dotted key and the problem (``": "`` -> ``a.b: must be >= 0``).
    finite_and: number bounds read ``must be finite and > 0`` (else ``must be > 0``, and
        ``must be a finite number`` for NaN and infinities).
    words: bounds read ``must be a positive finite number`` / ``a finite number >= 0`` /
        ``an int >= 1``, for a wrong type too (the wording of :data:`PLAIN`).
    unknown: ``(unknown dotted keys, known names, section) -> message``.
    key_format: how the dotted key is written (``"parameter '{}'"``).
    """

    sep: str = ": "
    finite_and: bool = False
    words: bool = False
    unknown: Callable[[Sequence[str], Sequence[str], str], str] = _unknown_keys
    key_format: str = "{}"

    # ------------------------------------------------------------------------------------------
    # checks (each returns the value it accepts)
    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.key_format.format(key)}{self.sep}{problem}")

    def _number_need(self, low, high, low_open: bool, finite: bool, high_open: bool = False) -> str:
        bounds = _bounds_text(low, high, low_open, high_open)
        if self.words:
            if low == 0 and low_open and high == _INF:
                return "a positive finite number"
            return "a finite number" + (f" {bounds}" if bounds else "")
        if self.finite_and:
            return "finite" + (f" and {bounds}" if bounds else "")
        return bounds if finite and bounds else "a finite number"

    def number(self, key: str, value, range=(-_INF, _INF), low_open: bool = False,  # noqa: A002
               high_open: bool = False) -> float:
        """A finite int or float (not bool) within ``range``."""
        low, high = range
        if _is_bool(value) or not isinstance(value, numbers.Real):
            need = self._number_need(low, high, low_open, True, high_open) if self.words else "a number"
            raise self.error(key, f"must be {need}, got {value!r}")
        finite = math.isfinite(value)
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (finite and above and below):
            need = self._number_need(low, high, low_open, finite, high_open)
            raise self.error(key, f"must be {need}, got {value!r}")
        return value

    def integer(self, key: str, value, range=(-_INF, _INF), low_open: bool = False) -> int:  # noqa: A002
        """An int (not bool) within ``range``."""
        low, high = range
        if low_open:
            low = math.floor(low) + 1
        bounds = _bounds_text(low, high, False)
        if _is_bool(value) or not isinstance(value, numbers.Integral):
            need = ("an int" + (f" {bounds}" if bounds else "")) if self.words else "an integer"
            raise self.error(key, f"must be {need}, got {value!r}")
        if not low <= value <= high:
            raise self.error(key, f"must be {'an int ' if self.words else ''}{bounds}, got {value!r}")
        return int(value)

    def choice(self, key: str, value, choices: Sequence[Any]):
        if value not in tuple(choices):
            raise self.error(key, f"must be one of {tuple(choices)}, got {value!r}")
        return value

    def vector(self, key: str, value, n: int):
        """A tuple of ``n`` finite numbers."""
        if not (isinstance(value, tuple) and len(value) == n and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
            shown = list(value) if isinstance(value, (tuple, list)) else value
            raise self.error(key, f"must be {n} finite numbers, got {shown!r}")
        return value

    def coerce(self, key: str, hint, value, meta: Optional[Mapping[str, Any]] = None):
        """``value`` checked against the type ``hint`` and the field metadata ``meta`` (range,
        choices, pair); a list becomes a tuple, an int a float, an Enum's value its member."""
        meta = meta or {}
        hint, optional = unwrap_optional(hint)
        if value is None and optional:
            return None
        if _is_tuple_hint(hint):
            checked = self._coerce_tuple(key, hint, value, meta)
            if meta.get("pair") and len(checked) == 2 and checked[0] > checked[1]:
                raise self.error(key, f"low {_num_text(checked[0])} exceeds high {_num_text(checked[1])}")
            return checked
        rng = meta.get("range") or (-_INF, _INF)
        low_open, high_open = bool(meta.get("low_open")), bool(meta.get("high_open"))
        if hint is bool:
            if not _is_bool(value):
                raise self.error(key, f"must be true or false, got {value!r}")
            value = bool(value)
        elif hint is int:
            value = self.integer(key, value, rng, low_open)
        elif hint is float:
            if isinstance(value, numbers.Real) and not _is_bool(value) and type(value) is not float:
                try:
                    value = float(value)
                except OverflowError:
                    raise self.error(key, f"must be {self._number_need(*rng, low_open, False, high_open)}, "
                                          f"got {value!r}") from None
            value = self.number(key, value, rng, low_open, high_open)
        elif hint is str:
            if not isinstance(value, str):
                raise self.error(key, f"must be a string, got {value!r}")
        elif isinstance(hint, type) and issubclass(hint, enum.Enum):
            if not isinstance(value, hint):
                try:
                    value = hint(value)
                except (ValueError, TypeError):
                    raise self.error(key, f"must be one of {tuple(m.value for m in hint)}, got {value!r}") from None
        else:
            origin = typing.get_origin(hint) or hint
            if isinstance(origin, type) and issubclass(origin, collections.abc.Mapping):
                if not isinstance(value, Mapping):
                    raise self.error(key, f"must be a mapping, got {value!r}")
                return dict(value)
            if hint is Any and isinstance(value, (int, float)) and not isinstance(value, bool) and "range" in meta:
                value = self.number(key, value, rng, low_open, high_open)
        if meta.get("choices") is not None:
            self.choice(key, value, meta["choices"])
        return value

    def _coerce_tuple(self, key: str, hint, value, meta):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            elems = None
            elem_hints = (args[0],)
        else:
            elems = args or None
            elem_hints = args or (Any,)
        noun = "integers" if elem_hints[0] is int else "finite numbers" if elem_hints[0] is float else "values"
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (tuple, list)) or (
                elems is not None and len(value) != len(elems)):
            shown = list(value) if isinstance(value, (tuple, list)) else value
            need = f"{len(elems)} {noun}" if elems is not None else f"a list of {noun}"
            raise self.error(key, f"must be {need}, got {shown!r}")
        elem_meta = {k: v for k, v in meta.items() if k != "pair"}
        return tuple(self.coerce(f"{key}[{i}]", elem_hints[i] if elems is not None else elem_hints[0], v, elem_meta)
                     for i, v in enumerate(value))

    # ------------------------------------------------------------------------------------------
    # whole dataclasses
    def validate(self, obj, prefix: str = "") -> None:
        """Check every field of the dataclass instance ``obj`` against its annotation and metadata
        (:class:`Config` calls it from ``__post_init__``); lists, ints for floats, Enum values and
        mappings are stored normalised."""
        hints = _hints(type(obj))
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            key = prefix + f.name
            hint = hints[f.name]
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(hint):
                if not isinstance(value, hint):
                    raise self.error(key, f"must be a {hint.__name__} instance, got {value!r}")
                continue
            checked = self.coerce(key, hint, value, f.metadata)
            if checked is not value:
                object.__setattr__(obj, f.name, checked)

    def build(self, cls, values: Optional[Mapping[str, Any]], prefix: str = "", *, dotted: bool = False,
              refuse: Optional[Mapping[str, str]] = None, base=None):
        """An instance of the dataclass ``cls`` from ``values`` (missing keys keep their defaults,
        or ``base``'s values when given; ``None`` for a section means all defaults).

        dotted: keys may be dotted paths into nested sections (``"failsafe.geofence.kind"``).
        refuse: ``{key: reason}`` for keys that are never accepted, at any depth.
        """
        section = prefix.rstrip(".")
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise self.error(section or "config", f"must be a mapping, got {type(values).__name__}")
        if dotted:
            values = nest_dotted(values)
        known = {f.name: f for f in dataclasses.fields(cls) if f.init}
        for name in values:
            if refuse and name in refuse:
                raise ConfigError(f"{prefix}{name}: {refuse[name]}")
        unknown = sorted(str(k) for k in values if k not in known)
        if unknown:
            raise ConfigError(self.unknown([prefix + k for k in unknown], sorted(known), section))
        hints = _hints(cls)
        kwargs = {}
        for name, value in values.items():
            hint = hints[name]
            if dataclasses.is_dataclass(hint):
                derived = known[name].metadata.get("derived") or {}
                for sub in (value if isinstance(value, Mapping) else ()):
                    if sub in derived:
                        raise ConfigError(f"{prefix}{name}.{sub}: {derived[sub]}")
                schema = getattr(hint, "_config_schema", self)
                # missing keys of a section keep the enclosing config's default for it (a section
                # may default to other values than its class's: EgoConfig.map), or base's values
                kwargs[name] = schema.build(hint, value, f"{prefix}{name}.", dotted=dotted, refuse=refuse,
                                            base=getattr(base, name) if base is not None else _field_default(known[name]))
            else:
                kwargs[name] = self.coerce(prefix + name, hint, value, known[name].metadata)
        token = _BUILDING.set((cls, prefix))
        try:
            return dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)
        except TypeError as exc:  # a value of a type no check expected, tripping a comparison
            raise self.error(section or "config", str(exc)) from None
        finally:
            _BUILDING.reset(token)


#: The wording of most configurations: ``EgoConfig.max_vel_mps must be a positive finite number, got -1``.
PLAIN = Schema(sep=" ", words=True)

#: ``(class, key prefix)`` of the instance :meth:`Schema.build` is constructing (errors then name the
#: key the value came from, ``EgoConfig.map.resolution_m``; a directly built instance uses its
#: class's own prefix).
_BUILDING: contextvars.ContextVar = contextvars.ContextVar("config_building", default=None)


def _plain(value):
    if isinstance(value, Config):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


class Config:
    """Base of every configuration dataclass (``@dataclass(frozen=True) class X(Config): ...``).

    Fields are declared once with :func:`setting` (or a plain default: then only the annotation is
    checked). Construction validates every field against its annotation and metadata, then runs
    the class's ``_check`` (cross-field rules). Class keywords: ``schema`` (the wording of errors,
    default :data:`PLAIN`), ``prefix`` (how errors name a field of a directly built instance,
    default ``"ClassName."``), ``refuse`` (``{key: reason}`` never accepted in a mapping).
    """

    _config_schema: ClassVar[Schema] = PLAIN
    _config_prefix: ClassVar[str] = ""
    _config_refuse: ClassVar[Optional[Mapping[str, str]]] = None

    def __init_subclass__(cls, schema: Optional[Schema] = None, prefix: Optional[str] = None,
                          refuse: Optional[Mapping[str, str]] = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if schema is not None:
            cls._config_schema = schema
        cls._config_prefix = prefix if prefix is not None else f"{cls.__name__}."
        if refuse is not None:
            cls._config_refuse = dict(refuse)

    def __post_init__(self):
        self._config_schema.validate(self, self._key(""))
        self._check()

    def _check(self) -> None:
        """Cross-field rules (override; raise :class:`ConfigError` via ``self._config_schema``)."""

    def _key(self, name: str) -> str:
        """The dotted key errors use for field ``name`` (the key it was given under when built from
        a mapping, else ``prefix + name``)."""
        building = _BUILDING.get()
        prefix = building[1] if building is not None and building[0] is type(self) else self._config_prefix
        return prefix + name

    def _error(self, name: str, problem: str) -> ConfigError:
        """A :class:`ConfigError` about field ``name`` in this class's wording."""
        return self._config_schema.error(self._key(name), problem)

    @classmethod
    def from_dict(cls, values: Optional[Mapping[str, Any]], prefix: Optional[str] = None):
        """An instance from a nested mapping and/or dotted keys (YAML, JSON; missing keys keep
        their defaults). Errors name the dotted key, under ``prefix`` (default the class's)."""
        return cls._config_schema.build(cls, values, cls._config_prefix if prefix is None else prefix,
                                        dotted=True, refuse=cls._config_refuse)

    def with_overrides(self, values: Optional[Mapping[str, Any]], prefix: Optional[str] = None):
        """This instance with the (nested or dotted) ``values`` applied, validated as a whole."""
        cls = type(self)
        return cls._config_schema.build(cls, values, cls._config_prefix if prefix is None else prefix,
                                        dotted=True, refuse=cls._config_refuse, base=self)

    def to_dict(self) -> Dict[str, Any]:
        """The plain nested view (tuples as lists, Enums as values; a section's ``derived``
        sub-fields left out): ``from_dict(to_dict())`` is equal."""
        out = {}
        for f in dataclasses.fields(self):
            if f.init:
                out[f.name] = _plain(getattr(self, f.name))
                for sub in f.metadata.get("derived") or ():
                    out[f.name].pop(sub, None)
        return out


def config_classes(package: str = "planner_pkg") -> List[type]:
    """Every :class:`Config` subclass defined in ``package``'s already imported modules."""
    out, todo = [], list(Config.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] == package and cls not in out:
            out.append(cls)
    return out


_DOC_LINE = re.compile(r"^\s*([A-Za-z_][\w, ]*?)\s*:\s*(.+)$")


@functools.lru_cache(maxsize=None)
def _doc_descriptions(cls) -> Dict[str, str]:
    """``{field: text}`` from ``name: text`` / ``a, b: text`` lines of a class docstring."""
    out: Dict[str, str] = {}
    doc = cls.__doc__ or ""
    last: List[str] = []
    for line in doc.splitlines():
        m = _DOC_LINE.match(line)
        if m:
            names = [n.strip() for n in m.group(1).split(",")]
            if all(n.isidentifier() for n in names):
                for n in names:
                    out[n] = m.group(2).strip()
                last = names
                continue
        if last and line.startswith("        ") and line.strip():
            for n in last:
                out[n] += " " + line.strip()
            continue
        last = []
    return out


def field_descriptions(cls) -> Dict[str, str]:
    """``{field: description}``: the field's ``description`` metadata, else its docstring line."""
    docs = _doc_descriptions(cls)
    return {f.name: f.metadata.get("description") or docs.get(f.name, "") for f in dataclasses.fields(cls)}
