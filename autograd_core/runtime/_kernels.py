"""The runtime's kernel table: graph op name -> builder, gathered from the kernel files.

A builder `build_<op>(c)` receives a `Ctx` (the node's input arrays, which are fixed objects:
constants, or buffers that the model refills in place on every call), validates the node's
attributes, allocates its output buffers (`c.out`) or declares an output a view of an input
(`c.alias`), and returns a list of zero-argument thunks that recompute the outputs in place
(`out=` everywhere). Views (reshape, transpose, slicing, expand, split) therefore cost nothing
at run time. Shapes are inferred here from the input arrays and checked against the shapes the
file declares; a mismatch, a bad attribute or an unknown op raises `FormatError`.

The kernels live by family (`_kernels_elementwise`, `_kernels_nn`, `_kernels_shape`,
`_kernels_reduce`), each with its own `KERNELS` table; this file only merges them (an op defined
twice is a bug, refused at import). The exporter's op table (`autograd_core.export.ops`) looks
each graph op's kernel up here, so the runtime stays a stand-alone NumPy package.
"""
from . import _kernels_elementwise, _kernels_nn, _kernels_reduce, _kernels_shape
from ._ctx import Ctx

__all__ = ["BUILDERS", "Ctx"]


def _merge(*modules):
    table = {}
    for mod in modules:
        for name, build in mod.KERNELS.items():
            if name in table:
                raise RuntimeError(f"runtime kernel {name!r} is defined twice ({mod.__name__})")
            table[name] = build
    return table


BUILDERS = _merge(_kernels_elementwise, _kernels_nn, _kernels_shape, _kernels_reduce)
