"""planner_pkg.config_schema: typed config dataclasses from mappings, errors naming the dotted key."""
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Tuple

import pytest

from planner_pkg.config_schema import ConfigError, Schema, nest_dotted, setting

SCHEMA = Schema()
BRIDGE_STYLE = Schema(sep=" ", finite_and=True,
                      unknown=lambda keys, known, section: f"unknown config key {keys[0]!r}")


@dataclass(frozen=True)
class Inner:
    rate_hz: float = setting(10.0, range=(0.0, math.inf), low_open=True)
    mode: str = setting("fast", choices=("fast", "slow"))
    span: Tuple[float, float] = setting((1.0, 2.0), range=(0.0, 10.0), pair=True)

    def __post_init__(self):
        SCHEMA.validate(self, "inner.")


@dataclass(frozen=True)
class Outer:
    count: int = setting(3, range=(1, 100))
    enabled: bool = True
    gain: float = 0.5
    size: Tuple[int, int] = setting((4, 5), range=(1, math.inf))
    extra: Mapping[str, Any] = field(default_factory=dict)
    limit: Optional[float] = None
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self):
        SCHEMA.validate(self)


def test_defaults_and_a_full_build():
    assert SCHEMA.build(Outer, {}) == Outer() == SCHEMA.build(Outer, None)
    cfg = SCHEMA.build(Outer, {"count": 7, "gain": 2, "size": [2, 3], "extra": {"a": 1}, "limit": 1,
                               "inner": {"rate_hz": 5, "mode": "slow", "span": [0, 10]}})
    assert cfg.count == 7 and cfg.gain == 2.0 and isinstance(cfg.gain, float)
    assert cfg.size == (2, 3) and cfg.extra == {"a": 1} and cfg.limit == 1.0
    assert cfg.inner == Inner(rate_hz=5.0, mode="slow", span=(0.0, 10.0))
    assert SCHEMA.build(Outer, {"inner": None}).inner == Inner()  # an empty YAML section keeps the defaults


@pytest.mark.parametrize("values, message", [
    ({"cout": 1}, r"unknown key\(s\) \['cout'\]; known in the top level: \['count'"),
    ({"inner": {"rate": 1, "mod": 2}}, r"unknown key\(s\) \['inner\.mod', 'inner\.rate'\]; known in inner"),
    ({"count": "3"}, r"^count: must be an integer, got '3'$"),
    ({"gain": "0.5"}, r"^gain: must be a number, got '0.5'$"),
    ({"size": [1]}, r"^size: must be 2 integers, got \[1\]$"),
    ({"size": "ab"}, r"^size: must be 2 integers, got 'ab'$"),
    ({"size": [1, 2.5]}, r"^size\[1\]: must be an integer, got 2\.5$"),
    ({"extra": [1]}, r"^extra: must be a mapping"),
    ({"inner": 3}, r"^inner: must be a mapping, got int$"),
    ({"count": 0}, r"^count: must be in 1\.\.100, got 0$"),
    ({"count": 101}, r"^count: must be in 1\.\.100, got 101$"),
    ({"size": [0, 5]}, r"^size\[0\]: must be >= 1, got 0$"),
    ({"inner": {"rate_hz": 0}}, r"^inner\.rate_hz: must be > 0, got 0\.0$"),
    ({"inner": {"mode": "medium"}}, r"^inner\.mode: must be one of \('fast', 'slow'\), got 'medium'$"),
    ({"inner": {"mode": 1}}, r"^inner\.mode: must be a string, got 1$"),
    ({"inner": {"span": [3, 2]}}, r"^inner\.span: low 3 exceeds high 2$"),
    ({"inner": {"span": [-1, 2]}}, r"^inner\.span\[0\]: must be in 0\.\.10, got -1\.0$"),
])
def test_errors_name_the_dotted_key(values, message):
    with pytest.raises(ConfigError, match=message):
        SCHEMA.build(Outer, values)


def test_bool_and_int_are_not_interchangeable():
    with pytest.raises(ConfigError, match=r"^count: must be an integer, got True$"):
        SCHEMA.build(Outer, {"count": True})
    with pytest.raises(ConfigError, match=r"^gain: must be a number, got False$"):
        SCHEMA.build(Outer, {"gain": False})
    with pytest.raises(ConfigError, match=r"^enabled: must be true or false, got 1$"):
        SCHEMA.build(Outer, {"enabled": 1})
    assert SCHEMA.build(Outer, {"enabled": False}).enabled is False


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinities_are_refused(bad):
    with pytest.raises(ConfigError, match=r"^gain: must be a finite number, got"):
        SCHEMA.build(Outer, {"gain": bad})
    with pytest.raises(ConfigError, match=r"^inner\.rate_hz: must be a finite number, got"):
        SCHEMA.build(Outer, {"inner": {"rate_hz": bad}})
    with pytest.raises(ConfigError, match=r"^inner\.span\[1\]: must be a finite number"):
        SCHEMA.build(Outer, {"inner": {"span": [1.0, bad]}})
    with pytest.raises(ConfigError, match="finite"):
        Inner(rate_hz=bad)  # direct construction is validated too


def test_direct_construction_is_validated_and_normalised():
    with pytest.raises(ConfigError, match=r"^count: must be in 1\.\.100"):
        Outer(count=0)
    cfg = Outer(gain=1, size=[2, 2], extra={"k": 1})
    assert cfg.gain == 1.0 and isinstance(cfg.gain, float) and cfg.size == (2, 2) and type(cfg.extra) is dict
    with pytest.raises(ConfigError, match=r"^inner: must be a Inner instance"):
        Outer(inner={"rate_hz": 1.0})


def test_dotted_keys_and_refused_keys():
    cfg = SCHEMA.build(Outer, {"inner.mode": "slow", "inner": {"rate_hz": 2.0}}, dotted=True)
    assert cfg.inner.mode == "slow" and cfg.inner.rate_hz == 2.0
    with pytest.raises(ConfigError, match="unknown key"):
        SCHEMA.build(Outer, {"inner.mode": "slow"})  # dotted keys only when asked for
    with pytest.raises(ConfigError, match=r"^inner\.secret: never here$"):
        SCHEMA.build(Outer, {"inner": {"secret": 1}}, refuse={"secret": "never here"})
    assert nest_dotted({"a.b": 1, "a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}
    with pytest.raises(ConfigError, match="conflicts with a scalar"):
        nest_dotted({"a": 1, "a.b": 2})


def test_the_schema_chooses_the_wording():
    with pytest.raises(ConfigError, match=r"^x must be finite and > 0, got -1$"):
        BRIDGE_STYLE.number("x", -1, (0.0, math.inf), low_open=True)
    with pytest.raises(ConfigError, match=r"^x must be finite and >= 0, got nan$"):
        BRIDGE_STYLE.number("x", math.nan, (0.0, math.inf))
    with pytest.raises(ConfigError, match=r"^x: must be >= 0, got -1$"):
        SCHEMA.number("x", -1, (0.0, math.inf))
    with pytest.raises(ConfigError, match=r"^unknown config key 'nope'$"):
        BRIDGE_STYLE.build(Outer, {"nope": 1})
    with pytest.raises(ConfigError, match=r"^v must be 3 finite numbers, got \[1, 2\]$"):
        BRIDGE_STYLE.vector("v", (1, 2), 3)
    assert issubclass(ConfigError, ValueError)
