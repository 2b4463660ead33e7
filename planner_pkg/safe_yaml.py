"""YAML reading for every file and value the project takes: PyYAML's safe loader (no code runs,
only plain data) with YAML 1.2's rule for numbers in exponent form.

PyYAML resolves plain scalars by YAML 1.1, where a float needs a dot: ``1e-4``, ``2E+3`` and
``5e3`` are *strings* there, while YAML 1.2, JSON and ROS 2's own parameter parser read them as
numbers. So ``ftol: 1e-4`` in a config file, a ``--param`` or a ``bringup -p`` override in
single-process mode (where the value does not go through rcl) was refused as "not a number", or
kept as a string where a string is allowed. :class:`SafeLoader` adds the 1.2 rule; everything
else is ``yaml.SafeLoader``'s.
"""
from __future__ import annotations

import re

import yaml

__all__ = ["SafeLoader", "safe_load", "key_values"]

# a float in exponent form, with or without a dot or a sign (YAML 1.2 core schema); the 1.1 forms
# PyYAML already knows (with a dot) match too, and resolve the same
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


class SafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also reads ``1e-4``, ``-2E+3``, ``5e3`` and ``.5e-3`` as floats."""


SafeLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789."))


def safe_load(text):
    """The data of one YAML document (``str`` or bytes); raises ``yaml.YAMLError`` as ``yaml.safe_load``."""
    return yaml.load(text, Loader=SafeLoader)


def key_values(items) -> dict:
    """``KEY=VALUE`` strings (command-line overrides) -> ``{KEY: the value read as YAML}``.
    ValueError naming the item when one is not ``KEY=VALUE`` or its value is not YAML."""
    out = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"{item!r} is not KEY=VALUE")
        try:
            out[key] = safe_load(value)
        except yaml.YAMLError as exc:
            raise ValueError(f"{item!r}: the value is not YAML ({exc})") from None
    return out
