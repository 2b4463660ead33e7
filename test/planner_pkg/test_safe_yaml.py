"""The project's YAML loader (planner_pkg.safe_yaml): PyYAML's safe loader plus YAML 1.2's
exponent floats (``1e-4`` is a number, as in YAML 1.2, JSON and ROS 2's parameter parser)."""
import pytest
import yaml

from planner_pkg import safe_yaml
from planner_pkg.cli import _parse_params
from planner_pkg.world import load_world


@pytest.mark.parametrize("text, value", [("1e-4", 1e-4), ("-2E+3", -2000.0), ("5e3", 5000.0), (".5e-3", 5e-4),
                                         ("+1_0e1", 100.0), ("3.0e-4", 3e-4)])
def test_exponent_floats_are_numbers(text, value):
    got = safe_yaml.safe_load(text)
    assert isinstance(got, float) and got == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("text", ["1e-4x", "e5", "1e", "1e-", "0x1e3", "1.2.3e4", "1e-4 m", "'1e-4'"])
def test_what_is_not_an_exponent_float_stays_what_pyyaml_reads(text):
    got = safe_yaml.safe_load(text)
    assert got == yaml.safe_load(text) and not isinstance(got, float)


def test_everything_else_reads_as_yaml_safe_load():
    doc = """
    a: 1
    b: 1.5
    c: [true, no, null, ~, .inf, -.nan, 0o17, 0x1f, 2026-12-05, '3', "x"]
    d: {nested: {k: v}}
    e: 1:30
    """
    ours, theirs = safe_yaml.safe_load(doc), yaml.safe_load(doc)
    assert repr(ours) == repr(theirs)  # repr: the NaN compares unequal to itself
    assert safe_yaml.safe_load("tol: 1e-4\nn: 3") == {"tol": 1e-4, "n": 3}


def test_loading_never_runs_code():
    with pytest.raises(yaml.YAMLError):
        safe_yaml.safe_load("!!python/object/apply:os.system ['echo hacked']")


def test_a_cli_param_in_exponent_form_is_a_number():
    assert _parse_params(["optimizer.ftol=1e-4", "name=1e-4x"]) == {"optimizer.ftol": 1e-4, "name": "1e-4x"}


def test_a_world_file_in_exponent_form_loads(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("bounds: {min: [-5e0, -5, 0], max: [5, 5, 4e0]}\n"
                    "obstacles:\n- {type: cylinder, center: [1e0, 0], radius: 3e-1, height: 2}\n")
    world = load_world(path)
    assert world.signed_distance([1.0, 0.0, 1.0]) == pytest.approx(-0.3)


def test_key_values_reads_each_value_as_yaml_and_names_a_bad_item():
    got = safe_yaml.key_values(["map.inflation_shape=cylinder", " rest_plan_iterations = 200", "ftol=1e-4",
                                "retry_offset_m=[0.5, 1]", "seed=", "a=b=c"])
    assert got == {"map.inflation_shape": "cylinder", "rest_plan_iterations": 200, "ftol": 1e-4,
                   "retry_offset_m": [0.5, 1], "seed": None, "a": "b=c"}
    assert safe_yaml.key_values([]) == {}
    for bad in ("no_equals", "=3"):
        with pytest.raises(ValueError, match=repr(bad).replace("[", r"\[")):
            safe_yaml.key_values(["ok=1", bad])
    with pytest.raises(ValueError, match="not YAML"):
        safe_yaml.key_values(["k=[1, 2"])
