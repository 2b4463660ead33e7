"""Typed configuration from mappings (YAML, JSON, dotted keys): one builder and one set of checks.

A configuration is a frozen dataclass (nested dataclasses for its sections). :meth:`Schema.build`
makes one from a mapping: unknown keys are errors, every value is type-checked against the field's
annotation (``bool``, ``int``, ``float`` (an int is accepted and stored as float), ``str``,
fixed-length tuples of those, mappings, ``Optional[...]``, nested dataclasses) and every error
names the dotted key (``loss.collision``). :meth:`Schema.validate`, called from a dataclass's
``__post_init__``, checks a built (or directly constructed) instance against its fields' metadata,
the same metadata :mod:`planner_pkg.nodes.params` turns into ROS parameter descriptors:

``range``: ``(low, high)`` inclusive bounds (``math.inf`` for none); for tuples, of every element.
``low_open``: the low bound is exclusive (``> low``).
``choices``: the allowed values.
``pair``: a ``(low, high)`` tuple whose first element may not exceed the second.
``description``: what the field means (documentation, ROS descriptors).

:func:`setting` writes such a field. Floats must be finite wherever a field is validated.
Cross-field rules stay in the dataclass's ``__post_init__``, written with the checks below
(:meth:`Schema.number`, :meth:`Schema.integer`, :meth:`Schema.choice`, :meth:`Schema.vector`).

A :class:`Schema` only decides how errors are worded (each configuration keeps the wording its
users know): ``key: must be ...`` or ``key must be ...``, and how unknown keys are reported.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import functools
import math
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

__all__ = ["ConfigError", "Schema", "setting", "unwrap_optional", "nest_dotted"]

_INF = math.inf


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range (names the key)."""


def setting(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
            range: Optional[Tuple[float, float]] = None, low_open: bool = False,  # noqa: A002 - the metadata key
            choices: Optional[Sequence[Any]] = None, pair: bool = False, description: str = "", **metadata):
    """A dataclass field whose metadata :meth:`Schema.validate` checks (see the module doc)."""
    meta: Dict[str, Any] = dict(metadata)
    if range is not None:
        meta["range"] = tuple(range)
    if low_open:
        meta["low_open"] = True
    if choices is not None:
        meta["choices"] = tuple(choices)
    if pair:
        meta["pair"] = True
    if description:
        meta["description"] = description
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


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


def _bounds_text(low, high, low_open: bool) -> str:
    """``>= 0``, ``> 0 and <= 1``, ``in 1..255``, ``<= 5`` or "" (no bound)."""
    if low > -_INF and high < _INF and not low_open:
        return f"in {_num_text(low)}..{_num_text(high)}"
    parts = []
    if low > -_INF:
        parts.append(f"{'>' if low_open else '>='} {_num_text(low)}")
    if high < _INF:
        parts.append(f"<= {_num_text(high)}")
    return " and ".join(parts)


def _unknown_keys(keys: Sequence[str], known: Sequence[str], section: str) -> str:
    return f"unknown key(s) {list(keys)}; known in {section or 'the top level'}: {list(known)}"


def _is_tuple_hint(tp) -> bool:
    return tp is tuple or typing.get_origin(tp) is tuple


@dataclass(frozen=True)
class Schema:
    """Builds and checks config dataclasses; its fields only choose the wording of errors.

    sep: between the dotted key and the problem (``": "`` -> ``a.b: must be >= 0``).
    finite_and: number bounds read ``must be finite and > 0`` (else ``must be > 0``, and
        ``must be a finite number`` for NaN and infinities).
    unknown: ``(unknown dotted keys, known names, section) -> message``.
    """

    sep: str = ": "
    finite_and: bool = False
    unknown: Callable[[Sequence[str], Sequence[str], str], str] = _unknown_keys

    # ------------------------------------------------------------------------------------------
    # checks (each returns the value it accepts)
    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{key}{self.sep}{problem}")

    def number(self, key: str, value, range=(-_INF, _INF), low_open: bool = False) -> float:  # noqa: A002
        """A finite int or float (not bool) within ``range``."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"must be a number, got {value!r}")
        low, high = range
        finite = math.isfinite(value)
        if not (finite and (value > low if low_open else value >= low) and value <= high):
            bounds = _bounds_text(low, high, low_open)
            if self.finite_and:
                need = "finite" + (f" and {bounds}" if bounds else "")
            else:
                need = bounds if finite else "a finite number"
            raise self.error(key, f"must be {need}, got {value!r}")
        return value

    def integer(self, key: str, value, range=(-_INF, _INF)) -> int:  # noqa: A002
        """An int (not bool) within ``range``."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {value!r}")
        low, high = range
        if not low <= value <= high:
            raise self.error(key, f"must be {_bounds_text(low, high, False)}, got {value!r}")
        return value

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

    def coerce(self, key: str, hint, value):
        """``value`` checked against the type ``hint`` (a list becomes a tuple, an int a float)."""
        hint, optional = unwrap_optional(hint)
        if value is None and optional:
            return None
        if hint is bool:
            if not isinstance(value, bool):
                raise self.error(key, f"must be true or false, got {value!r}")
            return value
        if hint is int:
            return self.integer(key, value)
        if hint is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(key, f"must be a number, got {value!r}")
            return float(value)
        if hint is str:
            if not isinstance(value, str):
                raise self.error(key, f"must be a string, got {value!r}")
            return value
        if _is_tuple_hint(hint):
            return self._coerce_tuple(key, hint, value)
        origin = typing.get_origin(hint) or hint
        if isinstance(origin, type) and issubclass(origin, collections.abc.Mapping):
            if not isinstance(value, Mapping):
                raise self.error(key, f"must be a mapping, got {value!r}")
            return dict(value)
        return value

    def _coerce_tuple(self, key: str, hint, value):
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
        return tuple(self.coerce(f"{key}[{i}]", elem_hints[i] if elems is not None else elem_hints[0], v)
                     for i, v in enumerate(value))

    # ------------------------------------------------------------------------------------------
    # whole dataclasses
    def validate(self, obj, prefix: str = "") -> None:
        """Check every field of the dataclass instance ``obj`` against its annotation and metadata
        (call from ``__post_init__``); lists, ints for floats and mappings are stored normalised."""
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
            checked = self.coerce(key, hint, value)
            if checked is not None:
                self._check_metadata(key, checked, f.metadata)
            if checked is not value:
                object.__setattr__(obj, f.name, checked)

    def _check_metadata(self, key: str, value, meta: Mapping[str, Any]) -> None:
        rng = meta.get("range")
        choices = meta.get("choices")
        items = list(enumerate(value)) if isinstance(value, tuple) else [(None, value)]
        for i, v in items:
            k = key if i is None else f"{key}[{i}]"
            if choices is not None:
                self.choice(k, v, choices)
            if isinstance(v, float):
                self.number(k, v, rng or (-_INF, _INF), bool(meta.get("low_open")))
            elif rng is not None and isinstance(v, int) and not isinstance(v, bool):
                low, high = rng
                if meta.get("low_open"):
                    self.number(k, v, rng, True)
                else:
                    self.integer(k, v, (low, high))
        if meta.get("pair") and value[0] > value[1]:
            raise self.error(key, f"low {_num_text(value[0])} exceeds high {_num_text(value[1])}")

    def build(self, cls, values: Optional[Mapping[str, Any]], prefix: str = "", *, dotted: bool = False,
              refuse: Optional[Mapping[str, str]] = None):
        """An instance of the dataclass ``cls`` from ``values`` (missing keys keep their defaults;
        ``None`` for a section means all defaults).

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
                kwargs[name] = self.build(hint, value, f"{prefix}{name}.", dotted=dotted, refuse=refuse)
            else:
                kwargs[name] = self.coerce(prefix + name, hint, value)
        try:
            return cls(**kwargs)
        except TypeError as exc:  # a value of a type no check expected, tripping a comparison
            raise self.error(section or "config", str(exc)) from None
