"""Backward formulas in differentiable ops, used when the graph of the backward pass is recorded.

`backward(create_graph=True)` and `autograd.grad(..., create_graph=True)` run the engine's
graph-recording sweep (`_engine.run_backward_graph`), which calls `node.backward_t(grad)`
instead of `node.backward(grad)`: the same formula, on Tensors, with autograd_core's own ops, so
the gradients it returns have a history and can be differentiated again, to any order (each op
used here has a `backward_t` itself). The NumPy `backward` stays the fast first-order path.

A node's inputs are rebuilt from its saved arrays and its edges (`_inp`): a leaf input is the
leaf itself, a non-leaf input a Tensor on the saved array whose `grad_fn` is the input's node, so
gradients of a saved input flow where the input's would. A saved output is rebuilt on the node
itself (`_outp`), as torch's SavedVariable does for outputs.

Nodes without a formula here get `_no_double_backward`: first-order gradients are right, and
differentiating them again raises a clear error instead of silently returning zeros.

The formulas are grouped as the ops are: `arith`, `pointwise`, `reduction`, `shape` (with
indexing and in-place), `nn` (nn.functional's fused nodes, the losses, the distributions' special
functions), `cnn` (pooling, padding, convolution, normalisation) and `extra` (recurrent cells,
prod at zeros, tril/triu, sort/topk, scatter, embedding, Categorical); `_base` holds the helpers.
Importing the package attaches them all.
"""
from ._base import (IndexPutBackward, NotImplementedBackward, SumToSizeBackward,  # noqa: F401  (re-exported)
                    decomposed_grads, index_scatter, sum_to)
from . import arith, pointwise, reduction, shape, nn, cnn, extra  # noqa: F401  (each attaches its formulas)
from .cnn import LinearMapBackward, linear_map  # noqa: F401  (re-exported)
