"""Grad mode: `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`.

Grad mode is thread-local, as in PyTorch: a ROS executor may run a policy under `no_grad` in one
thread while the planner records a graph in another.
"""
import functools
import threading

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled"]


class _GradState(threading.local):
    enabled = True


# Ops read `_state.enabled` directly: one attribute lookup, the cheapest thread-local check.
_state = _GradState()


def is_grad_enabled():
    """True when operations record a graph for backward."""
    return _state.enabled


class _GradModeContext:
    """Base for the grad-mode context managers; also usable as a function decorator."""

    _target = True

    def __enter__(self):
        self._prev = _state.enabled
        _state.enabled = self._target

    def __exit__(self, exc_type, exc, tb):
        _state.enabled = self._prev
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__._clone(self):
                return func(*args, **kwargs)

        return wrapper

    def _clone(self):
        return self.__class__()


class no_grad(_GradModeContext):
    """Disable graph recording: `with no_grad(): ...` or `@no_grad()`."""

    _target = False

    def __init__(self, orig_func=None):
        # `@no_grad` without parentheses is accepted by recent torch versions too.
        self._orig = orig_func
        if orig_func is not None:
            functools.update_wrapper(self, orig_func)

    def __call__(self, *args, **kwargs):
        if self._orig is not None:
            with no_grad():
                return self._orig(*args, **kwargs)
        return super().__call__(args[0])


class enable_grad(_GradModeContext):
    """Re-enable graph recording inside a `no_grad` block."""

    _target = True


class inference_mode(_GradModeContext):
    """Like `no_grad` (this engine has no separate inference tensors); `inference_mode(False)` is a no-op."""

    def __init__(self, mode=True):
        self._mode = bool(mode)
        self._target = False if self._mode else None

    def __enter__(self):
        self._prev = _state.enabled
        if self._mode:
            _state.enabled = False

    def _clone(self):
        return self.__class__(self._mode)


class set_grad_enabled(_GradModeContext):
    """`set_grad_enabled(False)` takes effect at once (as a call) and also works as a context manager."""

    def __init__(self, mode):
        self._prev = _state.enabled
        self._target = bool(mode)
        _state.enabled = self._target

    def __enter__(self):
        # The constructor already switched the mode; `_prev` is what __exit__ restores.
        pass

    def __call__(self, func):
        # Used as a decorator: undo the switch the constructor made, apply it per call instead.
        _state.enabled = self._prev
        return super().__call__(func)

    def _clone(self):
        return set_grad_enabled.__new__(set_grad_enabled)._init_deferred(self._target)

    def _init_deferred(self, mode):
        self._target = mode
        self._prev = _state.enabled
        _state.enabled = mode
        return self


def is_inference_mode_enabled():
    return False
