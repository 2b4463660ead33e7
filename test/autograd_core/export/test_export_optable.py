"""The op table's invariants: every graph op the tracer can emit has a NumPy kernel in the
runtime and an ONNX mapping (or an explicit reason why not), every kernel has a table entry,
every trace rule names a real entry point, and a rule cannot emit an op it does not declare —
so an op cannot be half-added."""
import types

import numpy as np
import pytest

import autograd_core as ag
import autograd_core.nn  # noqa: F401  (loads the nn entry points the rules name)
from autograd_core import export, runtime
from autograd_core.export import TraceError
from autograd_core.export.optable import OPS, RECORDER_EMITS, RULES, Rule, emittable_ops, resolve
from autograd_core.export.optable import _table
from autograd_core.runtime import _kernels


def test_every_emittable_op_has_a_kernel_and_an_onnx_mapping_or_reason():
    emitted = emittable_ops()
    assert RECORDER_EMITS <= emitted and {"conv2d", "gru_cell", "add", "reshape"} <= emitted
    for name in sorted(emitted):
        assert name in OPS, f"the tracer can emit {name!r} but the op table has no entry for it"
        spec = OPS[name]
        assert spec.kernel is _kernels.BUILDERS[name], f"{name!r} has no runtime kernel"
        if spec.onnx is None:
            assert isinstance(spec.not_onnx, str) and spec.not_onnx.strip(), f"{name!r}: no ONNX mapping, no reason"
        else:
            assert callable(spec.onnx) and spec.not_onnx is None


def test_runtime_kernels_and_the_op_table_list_the_same_ops():
    assert set(_kernels.BUILDERS) == set(OPS)
    assert runtime.supported_ops() == sorted(OPS)
    # ops a file may hold that no rule emits today (kept for files written by other producers)
    assert set(OPS) - emittable_ops() == {"identity"}
    assert OPS["identity"].traced_by == []
    assert "autograd_core.nn._functional_cnn:conv1d" in OPS["conv2d"].traced_by


def test_every_rule_names_a_real_entry_point():
    dead = [k for k in RULES if not callable(resolve(k))]
    assert dead == [], f"trace rules for names that do not exist: {dead}"
    assert export.supported_ops() == sorted(RULES)


def test_a_rule_cannot_emit_an_op_it_does_not_declare(monkeypatch):
    key = "autograd_core.ops.pointwise:exp"
    real = RULES[key]
    monkeypatch.setitem(RULES, key, Rule(key, real.lower, emits=()))
    with pytest.raises(TraceError, match="does not declare"):
        export.trace(lambda x: x.exp(), (ag.ones(2, 3),))
    monkeypatch.setitem(RULES, key, real)
    g = export.trace(lambda x: x.exp(), (ag.ones(2, 3),))
    assert g.ops() == ["exp"]


def test_an_op_without_onnx_export_says_why():
    pytest.importorskip("onnx")
    g = export.trace(lambda x, y: ag.atan2(x, y), (ag.ones(2), ag.ones(2)))
    np.testing.assert_allclose(g(np.ones(2, np.float32), -np.ones(2, np.float32)), np.arctan2(1.0, -1.0) * np.ones(2),
                               rtol=1e-6)
    with pytest.raises(NotImplementedError, match="atan2.*no ONNX export: ONNX has no two-argument arctangent"):
        g.to_onnx()


def test_registering_an_op_or_rule_twice_is_refused(monkeypatch):
    monkeypatch.setattr(_table, "OPS", dict(OPS))
    monkeypatch.setattr(_table, "RULES", dict(RULES))
    with pytest.raises(RuntimeError, match="registered twice"):
        _table.op("add", "Add")
    with pytest.raises(RuntimeError, match="registered twice"):
        _table.rule("autograd_core.ops.pointwise:exp", emits={"exp"})(lambda rec, v, out: None)
    with pytest.raises(ValueError, match="exactly one"):
        _table.OpSpec("new_op")
    with pytest.raises(ValueError, match="exactly one"):
        _table.OpSpec("new_op", "Abs", not_onnx="both")
    a = types.SimpleNamespace(__name__="a", KERNELS={"x": object()})
    b = types.SimpleNamespace(__name__="b", KERNELS={"x": object()})
    with pytest.raises(RuntimeError, match="defined twice"):
        _kernels._merge(a, b)


def test_in_place_masked_fill_is_recorded():
    def f(x):
        y = x * 1
        y.masked_fill_(y > 0, 0.5)
        return y
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    g = export.trace(f, (ag.tensor(x),))
    assert "where" in g.ops()
    np.testing.assert_array_equal(g(x), np.where(x > 0, np.float32(0.5), x))
