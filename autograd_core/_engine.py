"""The backward engine: the NumPy sweep of `backward()` and the graph-recording sweep of
`create_graph=True`, over the nodes of `_node.py`."""
from heapq import heappop, heappush

import numpy as np

from . import grad_mode as _gm
from ._node import _FREED, _freed_error, _hooks_registered, _node_hooks

# Every node gets a sequence number when it is created. A node consumes only tensors made before
# it, so every edge points from a higher to a lower sequence number: running the nodes that hold
# a gradient in decreasing sequence order is a valid reverse topological order (torch's engine
# uses the same rule). No dependency-counting pass, no recursion, a heap of pending nodes.

_wrap = None  # autograd_core.tensor._wrap, bound by tensor.py once it is defined


def _leaf_hooks(leaf, g, arrays):
    """`g` after the tensor hooks of `leaf`, each of which may return a replacement gradient.

    With `arrays`, `g` is a NumPy array (the hooks see and return Tensors); else a Tensor.
    """
    hooks = leaf._extra.get("hooks")
    if hooks:
        for fn in list(hooks):
            r = fn(_wrap(g) if arrays else g)
            if r is not None:
                g = r._data if arrays else r
    return g


def _accumulate_leaf(leaf, g):
    if leaf._extra is not None:
        g = _leaf_hooks(leaf, g, True)
    dt = leaf._data.dtype
    cur = leaf._grad
    if cur is None:
        # Copy: a node may hand the same array to several inputs (AddBackward0) or keep it.
        leaf._grad = _wrap(np.array(g, dtype=dt))
    else:
        if g.dtype is not dt:
            g = g.astype(dt)
        cur._data += g
        cur._vc[0] += 1


def _seed(fn, nr, g, buffers, heap):
    """Add the root gradient `g` of output `nr` of node `fn` to the pending gradients."""
    if fn not in buffers:
        heappush(heap, (-fn.seq, fn))
    if fn._multi:
        buf = buffers.get(fn)
        if buf is None:
            buf = buffers[fn] = [None] * fn.n_outputs
        buf[nr] = g if buf[nr] is None else buf[nr] + g
    else:
        prev = buffers.get(fn)
        buffers[fn] = g if prev is None else prev + g


def run_backward(roots, root_grads, retain_graph=False, capture=None, accumulate=True):
    """Reverse-mode sweep from `roots` (tensors) seeded with `root_grads` (arrays).

    With `capture` (a dict of capture keys -> None), gradients reaching those keys are stored
    there; a key is a leaf tensor's id or `(node, output_nr)` for a non-leaf. With
    `accumulate=False` leaves' `.grad` are left alone (autograd.grad).
    """
    buffers = {}
    heap = []
    for t, g in zip(roots, root_grads):
        fn = t._fn
        if fn is None:
            if not t._rg:
                raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
            if capture is not None and id(t) in capture:
                prev = capture[id(t)]
                capture[id(t)] = g if prev is None else prev + g
            if accumulate:
                _accumulate_leaf(t, g)
            continue
        _seed(fn, t._nr, g, buffers, heap)
    _execute(heap, buffers, retain_graph, capture, accumulate)


def backward_from(node, nr, grad, retain_graph):
    """Fast path of Tensor.backward(): one root, accumulate into leaves."""
    if node._multi:
        buf = [None] * node.n_outputs
        buf[nr] = grad
        grad = buf
    _execute([(-node.seq, node)], {node: grad}, retain_graph, None, True)


def _route(e, g, buffers, heap, leaf_grads):
    """Deliver gradient `g` along edge `e` (rare cases: multi-output targets)."""
    tgt = e[0]
    buf = buffers.get(tgt)
    if buf is None:
        buf = buffers[tgt] = [None] * tgt.n_outputs
        heappush(heap, (-tgt.seq, tgt))
    nr = e[1]
    buf[nr] = g if buf[nr] is None else buf[nr] + g


def _execute(heap, buffers, retain_graph, capture, accumulate):
    pop = heappop
    push = heappush
    bget = buffers.get
    bpop = buffers.pop
    leaf_grads = {}  # leaf -> summed gradient; accumulated into .grad once, after the sweep
    lget = leaf_grads.get
    freed = _FREED
    hooks_registered = _hooks_registered
    node = pop(heap)[1] if heap else None
    while node is not None:
        grad = bpop(node)
        saved = node.saved
        if saved is freed:
            raise _freed_error()
        if hooks_registered[0] or capture is not None:
            hooks = _node_hooks.get(node)
            grad = _apply_pre_hooks(node, grad, hooks[0] if hooks else None, capture, _wrap)
        else:
            hooks = None
        for rec in node.vc:
            if rec[0][0] != rec[1]:
                node._check_versions()
        grads = node.backward(grad)
        if hooks and hooks[1]:
            for fn in list(hooks[1]):
                fn(tuple(None if x is None else _wrap(x) for x in grads),
                   tuple(_wrap(x) for x in (grad if node._multi else (grad,)) if x is not None))
        if saved is not None and not retain_graph:
            node.saved = freed
        # Chains: when the only pending node is the one this node feeds, run it next without
        # going through the heap (it is then the highest-sequence pending node by definition).
        nxt = None
        for e, g in zip(node.next_edges, grads):
            if e is None or g is None:
                continue
            tgt = e[0]
            if tgt._is_node:
                if tgt._multi:
                    if nxt is not None:
                        push(heap, (-nxt.seq, nxt))
                        nxt = None
                    _route(e, g, buffers, heap, leaf_grads)
                    continue
                prev = bget(tgt)
                if prev is None:
                    buffers[tgt] = g
                    if nxt is None and not heap:
                        nxt = tgt
                    else:
                        if nxt is not None:
                            push(heap, (-nxt.seq, nxt))
                            nxt = None
                        push(heap, (-tgt.seq, tgt))
                else:
                    buffers[tgt] = prev + g
            else:
                prev = lget(tgt)
                leaf_grads[tgt] = g if prev is None else prev + g
        if nxt is not None:
            node = nxt
        else:
            node = pop(heap)[1] if heap else None
    _finish_leaves(leaf_grads, capture, accumulate, _accumulate_leaf)


def _finish_leaves(leaf_grads, capture, accumulate, acc):
    """Each leaf's summed gradient: into `capture` where asked for, and into `.grad` by `acc`."""
    for leaf, g in leaf_grads.items():
        if capture is not None and id(leaf) in capture:
            prev = capture[id(leaf)]
            capture[id(leaf)] = g if prev is None else prev + g
        if accumulate:
            acc(leaf, g)


def _apply_pre_hooks(node, grad, pre, capture, wrap):
    multi = node._multi
    grads = list(grad) if multi else [grad]
    if pre:
        for nr, fn in list(pre):
            if nr is None:  # node-level prehook: sees all output grads
                r = fn(tuple(None if g is None else wrap(g) for g in grads))
                if r is not None:
                    grads = [None if g is None else g._data for g in r]
            elif grads[nr] is not None:
                r = fn(wrap(grads[nr]))
                if r is not None:
                    grads[nr] = r._data
    if capture is not None:
        for nr, g in enumerate(grads):
            key = (node, nr)
            if g is not None and key in capture:
                prev = capture[key]
                capture[key] = g if prev is None else prev + g
    return grads if multi else grads[0]


# ---------------------------------------------------------------------------------------------
# The graph-recording engine (create_graph=True)
# ---------------------------------------------------------------------------------------------
#
# Same sweep as `_execute`, but gradients are Tensors and every node runs `backward_t`, its
# backward formula written in differentiable autograd_core ops (see `_double`), with grad
# recording on: the gradients carry a graph and can be differentiated again, to any order.
# The NumPy path above stays untouched for ordinary first-order backward passes.

def run_backward_graph(roots, root_grads, capture=None, accumulate=True, stop=False):
    """`run_backward` with Tensor gradients that record their own graph.

    `capture` maps capture keys (leaf id, or (node, output_nr)) to None and receives Tensors.
    With `stop`, captured non-leaf outputs are not propagated further (partial derivatives with
    respect to intermediate tensors, used by decomposed backward formulas).
    """
    from . import _double  # noqa: F401  (attaches backward_t to every node class)
    buffers = {}
    heap = []
    leaf_grads = {}
    for t, g in zip(roots, root_grads):
        fn = t._fn
        if fn is None:
            if not t._rg:
                raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
            prev = leaf_grads.get(t)
            leaf_grads[t] = g if prev is None else prev + g
            continue
        _seed(fn, t._nr, g, buffers, heap)
    prev_mode = _gm._state.enabled
    _gm._state.enabled = True
    try:
        _execute_graph(heap, buffers, leaf_grads, capture, stop)
    finally:
        _gm._state.enabled = prev_mode
    _finish_leaves(leaf_grads, capture, accumulate, _accumulate_leaf_graph)


def _accumulate_leaf_graph(leaf, g):
    if leaf._extra is not None:
        g = _leaf_hooks(leaf, g, False)
    if g._data.dtype != leaf._data.dtype:
        g = g.to(leaf.dtype)
    cur = leaf._grad
    if cur is None:
        # torch keeps the graph of a create_graph gradient in .grad
        leaf._grad = g if g._fn is not None else _wrap(np.array(g._data, dtype=leaf._data.dtype))
    else:
        leaf._grad = cur + g  # out of place, so that the old .grad (and its graph) stays valid


def _execute_graph(heap, buffers, leaf_grads, capture, stop):
    while heap:
        node = heappop(heap)[1]
        grad = buffers.pop(node)
        if node.saved is _FREED:
            raise _freed_error()
        multi = node._multi
        grads_in = list(grad) if multi else [grad]
        hooks = _node_hooks.get(node) if _hooks_registered[0] else None
        if hooks and hooks[0]:
            for nr, fn in list(hooks[0]):
                if nr is None:
                    r = fn(tuple(grads_in))
                    if r is not None:
                        grads_in = list(r)
                elif grads_in[nr] is not None:
                    r = fn(grads_in[nr])
                    if r is not None:
                        grads_in[nr] = r
        if capture is not None:
            hit = False
            for nr, g in enumerate(grads_in):
                key = (node, nr)
                if g is not None and key in capture:
                    prev = capture[key]
                    capture[key] = g if prev is None else prev + g
                    hit = True
            if hit and stop:
                continue
        for rec in node.vc:
            if rec[0][0] != rec[1]:
                node._check_versions()
        grads = node.backward_t(grads_in if multi else grads_in[0])
        if hooks and hooks[1]:
            for fn in list(hooks[1]):
                fn(tuple(grads), tuple(x for x in grads_in if x is not None))
        i = 0
        for e in node.next_edges:
            g = grads[i]
            i += 1
            if e is None or g is None:
                continue
            tgt = e[0]
            if tgt._is_node:
                if tgt._multi:
                    _route(e, g, buffers, heap, leaf_grads)
                    continue
                prev = buffers.get(tgt)
                if prev is None:
                    buffers[tgt] = g
                    heappush(heap, (-tgt.seq, tgt))
                else:
                    buffers[tgt] = prev + g
            else:
                prev = leaf_grads.get(tgt)
                leaf_grads[tgt] = g if prev is None else prev + g
