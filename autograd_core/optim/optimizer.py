"""`Optimizer`: torch's base class (param groups, lazy per-parameter state, state_dict) with a
flat-buffer step.

A step is pure in-place NumPy on the parameters' arrays: no Tensor ops, no graph. Subclasses
write one *kernel* on ndarrays; the base class runs it either

* flat: once per parameter group on flat buffers (gradients gathered with one `np.concatenate`,
  every parameter-shaped state in one array per name), then adds the resulting delta back to
  each parameter. Adam is then ~14 NumPy passes whatever the number of tensors: per tensor, a
  6-tensor MLP would pay ~80 calls of Python overhead, more than the arithmetic costs; or
* per tensor, exactly as torch's single-tensor loop, whenever the flat path does not apply.

Parameters are never moved: `p.data` stays the user's array, so aliases (`p.detach()`, views,
tensors saved for backward) see every update. Only optimizer state lives in the flat buffers;
`state[p]` still holds one Tensor per name (torch's names), each a view into its flat buffer.

The flat layout is checked by identity at every step (same parameters, same shapes and dtype,
every parameter has a gradient, the state tensors and their arrays are the ones the layout made).
If anything differs (a `.grad` is None, the user replaced `p.data` with another shape, assigned a
state tensor, `load_state_dict` ran) the layout is rebuilt, or the step runs per tensor when the
state is not uniform (e.g. steps differ between parameters). Both paths run the same kernel.
"""
from collections import defaultdict
from copy import deepcopy
from itertools import chain

import numpy as np

from .. import _dtype as D
from ..grad_mode import enable_grad
from ..tensor import Tensor, _wrap
from ._flat import Layout

__all__ = ["Optimizer"]


# State that has its parameter's shape in every optimiser here (checked by load_state_dict).
_PARAM_SHAPED = frozenset({"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "square_avg", "grad_avg"})


def _scalar_dtype():
    # torch keeps `state["step"]` as a float32 0-d tensor (float64 when that is the default dtype).
    return np.float64 if D.get_default_dtype().np == np.float64 else np.float32


class Optimizer:
    """Base class of the optimisers: `Optimizer(params, defaults)`.

    `params` is an iterable of tensors, of `(name, tensor)` pairs, or of dicts (param groups with
    per-group options overriding `defaults`). State is created lazily at the first step that
    sees a parameter with a gradient, as in torch.

    Subclasses set `_param_state` (names of the parameter-shaped state made at the first step),
    `_uses_step` (keep `state["step"]`) and implement `_check(options)` and `_kernel`.
    """

    _param_state = ()
    _uses_step = False
    _use_flat = True  # False forces the per-tensor path (benchmarks, tests)

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got " + _typename(params))
        if isinstance(params, (set, frozenset)):
            # Stricter than torch: set order changes between runs, so checkpoints (which map
            # parameters by order) would load into the wrong tensors.
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        self.state = defaultdict(dict)
        self.param_groups = []
        self._layouts = {}
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    # -- options ----------------------------------------------------------------------------------
    @classmethod
    def _check(cls, options):
        """Raise ValueError for an invalid option in `options` (a dict of group options)."""

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {group[k]}" for k in sorted(group) if k not in ("params", "param_names"))
        return "\n".join(lines) + "\n)"

    def add_param_group(self, param_group):
        """Add a param group (a dict with "params" and optional options) to `param_groups`."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError("a param group needs a 'params' entry (an iterable of tensors)")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        tensors, names = [], []
        for item in params:
            if isinstance(item, tuple):
                names.append(item[0])
                item = item[1]
            tensors.append(item)
        if names and len(names) != len(tensors):
            raise ValueError("all optimizer params should be with/without names. Some param names are missing")
        for i, p in enumerate(tensors):
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(p))
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        param_group["params"] = tensors
        if names:
            param_group["param_names"] = names
        for name, default in self.defaults.items():
            param_group.setdefault(name, default)
        self._check(param_group)

        ids = [id(p) for p in tensors]
        if len(set(ids)) != len(ids):
            raise ValueError("optimizer contains a parameter group with duplicate parameters: pass each tensor "
                             "once (a repeated tensor would be stepped twice)")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        for g in self.param_groups:
            if ("param_names" in g) != ("param_names" in param_group):
                raise ValueError("all optimizer param groups should be with/without names. cannot add param group "
                                 + ("with" if names else "without") + " names to the optimizer")
        self.param_groups.append(param_group)

    # -- gradients --------------------------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Reset the gradients: to None (default) or, with `set_to_none=False`, to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                if set_to_none:
                    p._grad = None
                else:
                    if g._fn is not None:
                        g.detach_()
                    else:
                        g._rg = False
                    g._data[...] = 0
                    g._vc[0] += 1

    # -- the step ---------------------------------------------------------------------------------
    def step(self, closure=None):
        """One optimisation step over every group; `closure()` re-evaluates the loss (returned)."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        state = self.state
        for group in self.param_groups:
            lay = self._layouts.get(id(group))
            found = lay.valid(group, state) if lay is not None else None
            if found is None and self._use_flat:
                lay = self._build_layout(group)
                found = lay.valid(group, state) if lay is not None else None
            if found is None:
                self._step_per_tensor(group)
            else:
                self._step_flat(group, lay, *found)
        return loss

    def _step_flat(self, group, lay, datas, grads):
        g = lay.g
        np.concatenate(grads, axis=None, out=g)
        p = None
        if self._needs_param(group):
            if lay.p is None:
                lay.p = np.empty_like(g)
            p = lay.p
            np.concatenate(datas, axis=None, out=p)
        step = None
        if lay.steps is not None:
            steps = lay.steps
            steps += 1
            step = float(steps[0])
        scale = self._param_scale(group)
        if scale is not None:
            for d in datas:
                np.multiply(d, scale, out=d)
        flats = dict(lay.flats)
        delta = self._kernel(group, g, p, flats, step, lay.w)
        for d, v in zip(datas, lay.split(delta)):
            np.add(d, v, out=d)
        for name, flat in flats.items():  # state the kernel created lazily (SGD's momentum buffer)
            if name not in lay.flats:
                lay.add_state(name, flat)
        lay.vc[0] += 1
        for q in group["params"]:
            q._vc[0] += 1

    def _step_per_tensor(self, group):
        # Steps may now differ between parameters: the next flat step re-checks from scratch.
        self._layouts.pop(id(group), None)
        state = self.state
        scale = self._param_scale(group)
        needs_param = self._needs_param(group)
        for q in group["params"]:
            gt = q._grad
            if gt is None:
                continue
            st = state[q]
            if not st:
                self._init_state(group, q, st)
            d = q._data
            g = np.array(gt._data, dtype=d.dtype)
            step = None
            if "step" in st:
                s = st["step"]
                s._data += 1
                step = float(s._data)
            if scale is not None:
                np.multiply(d, scale, out=d)
            arrays = {k: t._data for k, t in st.items() if k != "step"}
            delta = self._kernel(group, g, d if needs_param else None, arrays, step, np.empty_like(g))
            np.add(d, delta, out=d)
            q._vc[0] += 1
            for k, t in st.items():
                t._vc[0] += 1
            for k, a in arrays.items():
                if k not in st:
                    st[k] = _wrap(a)

    def _init_state(self, group, p, st):
        """torch's lazy per-parameter state: zeros for `_param_names(group)` and a 0-d step."""
        if self._uses_step:
            st["step"] = _wrap(np.zeros((), _scalar_dtype()))
        for name in self._param_names(group):
            st[name] = _wrap(np.zeros_like(p._data))

    def _build_layout(self, group):
        """Flat buffers for `group`, or None when the flat path does not apply this step."""
        self._layouts.pop(id(group), None)
        params = group["params"]
        state = self.state
        if not params or any(p._grad is None for p in params):
            return None
        dtype = params[0]._data.dtype
        if dtype.kind != "f" or any(p._data.dtype != dtype for p in params):
            return None
        sts = [state.get(p) for p in params]
        fresh = all(not st for st in sts)
        if not fresh:
            if any(not st for st in sts):
                return None  # state made for some parameters only: per tensor until uniform
            keys = set(sts[0])
            if any(set(st) != keys for st in sts):
                return None
            for st, p in zip(sts, params):
                for k, t in st.items():
                    if not isinstance(t, Tensor):
                        return None
                    want = () if k == "step" else p._data.shape
                    if t._data.shape != want or (k != "step" and t._data.dtype != dtype):
                        return None
            if "step" in keys:
                step_vals = [float(st["step"]._data) for st in sts]
                if any(s != step_vals[0] for s in step_vals):
                    return None
        lay = Layout(group, params, dtype)
        lay.state_dicts = [state[p] for p in params]
        if fresh:
            if self._uses_step:
                lay.add_steps(np.zeros(len(params), _scalar_dtype()))
            for name in self._param_names(group):
                lay.add_state(name, np.zeros(lay.offsets[-1], dtype))
        else:
            old = [dict(st) for st in sts]
            for name in sorted(keys - {"step"}):
                flat = np.concatenate([st[name]._data for st in old], axis=None).astype(dtype, copy=False)
                lay.add_state(name, flat)
            if "step" in keys:
                steps = np.array([st["step"]._data for st in old])
                lay.add_steps(steps)
        self._layouts[id(group)] = lay
        return lay

    # -- subclass hooks ---------------------------------------------------------------------------
    def _param_names(self, group):
        return self._param_state

    def _needs_param(self, group):
        """True when the kernel reads the parameter values (coupled weight decay)."""
        return group.get("weight_decay", 0) != 0

    def _param_scale(self, group):
        """A factor applied to the parameters before the kernel's delta (decoupled decay), or None."""
        return None

    def _kernel(self, group, g, p, st, step, w):
        """Update state arrays in `st` in place and return the delta to add to the parameter.

        g: the gradient (a scratch copy the kernel may overwrite); p: the parameter values when
        `_needs_param`, else None; st: state name -> ndarray (a new name may be added: it becomes
        state); step: the incremented step count (float) or None; w: a scratch array like g.
        """
        raise NotImplementedError

    # -- state_dict -------------------------------------------------------------------------------
    def state_dict(self):
        """torch's layout: {"state": {index: {name: value}}, "param_groups": [{..., "params": [index]}]}.

        Parameters are numbered in order over the groups, so a checkpoint maps parameters by
        order. The values are references to the live state, as in torch (save or copy them).
        """
        mapping = {}
        start = 0
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        # Empty entries (made by a lookup, e.g. SGD without momentum) are left out, as torch has none.
        packed_state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items() if v}
        return {"state": packed_state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a `state_dict()` (from this class, possibly another process or torch's layout).

        Parameters are matched by order; every group must have as many parameters as the saved
        one, and parameter-shaped state must have the parameter's shape. State tensors are copied
        (cast to the parameter's dtype except "step"), so the loaded dict is never aliased.
        """
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("optimizer state_dict must be a dict with 'state' and 'param_groups' entries "
                             "(as returned by Optimizer.state_dict())")
        groups = self.param_groups
        saved_groups = deepcopy(list(state_dict["param_groups"]))
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, s in zip(groups, saved_groups):
            if len(g["params"]) != len(s["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        shaped = set(self._param_state) | _PARAM_SHAPED

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                arr = value._data
                if key == "step":
                    if arr.size != 1:
                        raise ValueError(f"loaded optimizer state 'step' has shape {list(arr.shape)}; expected a "
                                         f"single value")
                    return _wrap(np.array(arr).reshape(()))
                if key in shaped and arr.shape != param._data.shape:
                    raise ValueError(f"loaded optimizer state {key!r} has shape {list(arr.shape)} but its parameter "
                                     f"has shape {list(param._data.shape)}: the checkpoint's parameters are not in "
                                     f"this optimizer's order")
                if param._data.dtype.kind == "f":
                    return _wrap(np.array(arr, dtype=param._data.dtype))
                return _wrap(np.array(arr))
            if isinstance(value, dict):
                return {k: cast(param, v, key=k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v)
            else:
                state[k] = v
        for g, s in zip(groups, saved_groups):
            for k, v in self.defaults.items():  # options a checkpoint from an older version lacks
                s.setdefault(k, v)
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
        self.state = state
        self.param_groups = saved_groups
        self._layouts = {}


def _typename(obj):
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
