"""Engine behaviour: deep graphs, graph freeing, hooks, in-place semantics, custom Functions,
grad mode, and clear errors for misuse."""
import sys
import threading

import numpy as np
import pytest

import autograd_core as ag


def test_10000_step_rollout_backpropagates_without_recursion():
    x = ag.tensor([1.0], dtype=ag.float64, requires_grad=True)
    y = x
    for _ in range(10000):
        y = y * 1.0001 + 0.001
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # an iterative engine does not care
    try:
        y.sum().backward()
    finally:
        sys.setrecursionlimit(limit)
    assert x.grad.item() == pytest.approx(1.0001 ** 10000, rel=1e-9)


def test_graph_is_freed_and_second_backward_raises():
    a = ag.tensor([2.0], requires_grad=True)
    y = (a * a).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_add_only_graph_can_backward_twice_like_torch():
    a = ag.tensor([2.0], requires_grad=True)
    y = (a + 1).sum()  # nothing saved: torch allows it too
    y.backward()
    y.backward()
    assert a.grad.item() == 2.0


def test_gradients_accumulate_and_fan_in_sums():
    a = ag.tensor([1.0, 2.0], requires_grad=True)
    (a * 3).sum().backward()
    (a * a).sum().backward()
    assert a.grad.tolist() == [3 + 2, 3 + 4]


def test_accumulated_grad_is_not_aliased_between_leaves():
    a = ag.tensor([1.0], requires_grad=True)
    b = ag.tensor([1.0], requires_grad=True)
    (a + b).sum().backward()
    a.grad.add_(5)
    assert b.grad.item() == 1.0


def test_tensor_hook_and_retain_grad():
    a = ag.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    a.register_hook(lambda g: seen.append(g.tolist()) or g * 2)
    h = a * 3
    h.retain_grad()
    h.sum().backward()
    assert seen == [[3.0, 3.0]]
    assert a.grad.tolist() == [6.0, 6.0]
    assert h.grad.tolist() == [1.0, 1.0]


def test_inplace_on_non_leaf_rebases_history():
    a = ag.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    b.mul_(a)  # b = 2a * a
    b.sum().backward()
    assert a.grad.tolist() == [4.0, 8.0]
    assert type(b.grad_fn).__name__ == "MulBackward0"


def test_setitem_records_copyslices():
    x = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    buf = ag.zeros(2, 3)
    buf[0] = x * 2
    buf[1, 1:] = x[:2]
    buf.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 2.0]
    assert type(buf.grad_fn).__name__ == "CopySlices"


def test_inplace_through_view_updates_base_history():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    buf = ag.zeros(2, 2)
    row = buf[0]
    row.add_(x * 3)
    assert buf.tolist() == [[3.0, 6.0], [0.0, 0.0]]
    buf.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_version_counter_shared_with_views():
    a = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    c = b * b
    view = b[1:]
    with ag.no_grad():
        view.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def test_weight_update_under_no_grad():
    w = ag.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    with ag.no_grad():
        w -= 0.5 * w.grad
        w.grad.zero_()
    assert w.tolist() == [0.0, 0.0] and w.is_leaf and w.requires_grad


def test_grad_mode_context_decorator_and_threads():
    x = ag.tensor([1.0], requires_grad=True)
    with ag.no_grad():
        assert not (x * 2).requires_grad
        with ag.enable_grad():
            assert (x * 2).requires_grad

    @ag.no_grad()
    def f():
        return x * 2

    assert not f().requires_grad
    ag.set_grad_enabled(False)
    assert not ag.is_grad_enabled()
    ag.set_grad_enabled(True)
    # Grad mode is thread-local: a no_grad block in one thread does not affect another.
    results = {}
    inside = threading.Event()
    release = threading.Event()

    def worker():
        with ag.no_grad():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(5)
    results["main"] = (x * 2).requires_grad
    release.set()
    t.join()
    assert results["main"] is True


def test_custom_function_api():
    class ScaledExp(ag.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            y = (x * scale).exp()
            ctx.save_for_backward(y)
            ctx.scale = scale
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            assert ctx.needs_input_grad == (True, False)
            return g * y * ctx.scale, None

    x = ag.tensor([0.0, 1.0], dtype=ag.float64, requires_grad=True)
    y = ScaledExp.apply(x, 2.0)
    assert type(y.grad_fn).__name__ == "ScaledExpBackward"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([0.0, 2.0]))


def test_autograd_grad_does_not_touch_leaf_grads_and_reports_unused():
    a = ag.tensor([1.0, 2.0], requires_grad=True)
    b = ag.tensor([3.0], requires_grad=True)
    y = (a * a).sum()
    (g,) = ag.autograd.grad(y, a, retain_graph=True)
    assert g.tolist() == [2.0, 4.0] and a.grad is None
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        ag.autograd.grad(y, [a, b], retain_graph=True)
    ga, gb = ag.autograd.grad(y, [a, b], allow_unused=True)
    assert gb is None


def test_non_leaf_grad_access_warns():
    a = ag.tensor([1.0], requires_grad=True)
    b = a * 2
    b.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf"):
        assert b.grad is None


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        ag.ones(2, 3) @ ag.ones(2, 3)
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        ag.ones(6).reshape(4, 2)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        ag.cat([ag.ones(2, 3), ag.ones(2, 2)], 0)
    with pytest.raises(IndexError):
        ag.ones(3)[5]
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(ag.ones(3))
    with pytest.raises(TypeError, match="not picklable"):
        import pickle
        pickle.dumps(ag.ones(2))


def test_create_graph_gives_differentiable_gradients():
    x = ag.tensor([1.0, -2.0], dtype=ag.float64, requires_grad=True)
    (g,) = ag.autograd.grad((x * x * x).sum(), x, create_graph=True)
    assert g.requires_grad and g.tolist() == [3.0, 12.0]
    (h,) = ag.autograd.grad(g.sum(), x)
    assert h.tolist() == [6.0, -12.0]


def test_manual_seed_reproducible():
    ag.manual_seed(3)
    a = ag.randn(5), ag.rand(2), ag.randint(0, 10, (4,))
    ag.manual_seed(3)
    b = ag.randn(5), ag.rand(2), ag.randint(0, 10, (4,))
    for x, y in zip(a, b):
        assert x.tolist() == y.tolist()
    assert a[0].dtype == ag.float32 and a[2].dtype == ag.int64


def test_repr_and_item_like_torch():
    assert repr(ag.tensor([12.0])) == "tensor([12.])"
    assert repr(ag.tensor([1.5], requires_grad=True)) == "tensor([1.5000], requires_grad=True)"
    assert ag.tensor(3).item() == 3 and isinstance(ag.tensor(3.5).item(), float)
    assert str(ag.float32) == "torch.float32"
    assert ag.zeros(2, 3).shape == (2, 3) and repr(ag.zeros(2, 3).shape) == "torch.Size([2, 3])"
