"""`Layout`: one parameter group's optimizer state in flat buffers (see optimizer.py for why).

Per state name one flat array over all the group's parameters; `state[p][name]` is a Tensor
view into it, so torch's per-parameter state (and state_dict) is unchanged. All views of a
layout share one version counter, bumped once per step.
"""
from operator import is_

import numpy as np

from ..tensor import _wrap

__all__ = ["Layout"]


class Layout:
    """Flat buffers for one parameter group: state, a gathered gradient `g`, scratch `w`."""

    __slots__ = ("group", "params", "shapes", "dtype", "offsets", "state_dicts", "names", "tensors", "arrays",
                 "flats", "steps", "vc", "g", "w", "p", "views")

    def __init__(self, group, params, dtype):
        self.group = group
        self.params = list(params)
        self.shapes = [p._data.shape for p in params]
        self.dtype = dtype
        sizes = [p._data.size for p in params]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
        n = self.offsets[-1]
        self.flats = {}           # state name -> flat ndarray
        self.steps = None         # flat step counts, one per parameter, or None
        self.vc = [0]             # one version counter shared by every state view of this layout
        self.state_dicts = []     # the state dict object of each parameter
        self.names = []           # state names in the order their tensors were made
        self.tensors = []         # every state Tensor the layout made ...
        self.arrays = []          # ... and its array, for the identity check
        self.g = np.empty(n, dtype)   # gathered gradient (the kernel may overwrite it)
        self.w = np.empty(n, dtype)   # scratch
        self.p = None                 # gathered parameter values, made when a kernel needs them
        self.views = {}               # id(flat array) -> (flat array, per-parameter views)

    def split(self, flat):
        """Per-parameter views of `flat`; cached for the layout's own buffers only (ids of
        temporaries could be reused by later arrays)."""
        hit = self.views.get(id(flat))
        if hit is not None and hit[0] is flat:
            return hit[1]
        o = self.offsets
        views = [flat[o[i]:o[i + 1]].reshape(s) for i, s in enumerate(self.shapes)]
        if flat is self.g or flat is self.w or any(flat is f for f in self.flats.values()):
            self.views[id(flat)] = (flat, views)
        return views

    def add_state(self, name, flat):
        """Expose `flat` as `state[p][name]` for every parameter (views sharing one version counter)."""
        self.flats[name] = flat
        self.names.append(name)
        for st, view in zip(self.state_dicts, self.split(flat)):
            t = _wrap(view, vc=self.vc)
            st[name] = t
            self.tensors.append(t)
            self.arrays.append(view)

    def add_steps(self, steps):
        self.steps = steps
        self.names.append("step")
        for i, st in enumerate(self.state_dicts):
            view = steps[i:i + 1].reshape(())
            t = _wrap(view, vc=self.vc)
            st["step"] = t
            self.tensors.append(t)
            self.arrays.append(view)

    def valid(self, group, state):
        """(param arrays, grad arrays) if this layout still describes `group`, else None."""
        params = group["params"]
        if group is not self.group or len(params) != len(self.params) or not all(map(is_, params, self.params)):
            return None
        datas, grads = [], []
        dtype = self.dtype
        for p, shape, st in zip(params, self.shapes, self.state_dicts):
            g = p._grad
            d = p._data
            if g is None or d.shape != shape or d.dtype != dtype or state.get(p) is not st:
                return None
            datas.append(d)
            grads.append(g._data)
        # Every state tensor is still the one the layout made, over the same array, and no other
        # state was added.
        cur = [st.get(k) for k in self.names for st in self.state_dicts]
        if (not all(map(is_, cur, self.tensors)) or not all(map(is_, map(_data_of, self.tensors), self.arrays))
                or any(len(st) != len(self.names) for st in self.state_dicts)):
            return None
        return datas, grads


def _data_of(t):
    return t._data
