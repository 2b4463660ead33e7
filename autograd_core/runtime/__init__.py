"""Onboard runtime for graphs exported with `autograd_core.export`: NumPy only, no autograd.

    from autograd_core import runtime        # or: copy this folder to the robot and `import <name>`
    model = runtime.load("policy.agc")       # one safetensors file: weights + graph JSON
    action, h = model(depth, state, h)       # NumPy in, NumPy out; shapes/dtypes checked per call

Imports: NumPy and the standard library only, and only this package's own modules (relative
imports), so the folder works as a stand-alone package on a companion computer without the
training code — `autograd_core.tensor`, `ops`, `nn`, `optim` are never imported from here, and the
file reader is built in (the `safetensors` package is not needed). `import autograd_core.runtime`
still executes `autograd_core/__init__.py` (which imports the engine); to deploy without the
training code, copy `autograd_core/runtime/` on its own, under any package name.

Limits: every array the runtime allocates for a graph is charged against `_model.MAX_BUFFER_BYTES`
(1 GiB) before it is allocated, so sizes in a file (pads, strides, shapes, output sizes) raise
`FormatError`, not MemoryError; weights (constants with at least one axis) must be finite.

Execution: `load` validates the file, then compiles the graph once into a flat list of NumPy
calls over buffers allocated at load time (`out=` everywhere, positional where NumPy allows it);
views (reshape, transpose, slicing, split) cost nothing per call, constant sub-graphs are folded,
and convolutions run channels-last with the bias folded into the GEMM. A call copies the inputs
into their buffers, runs the list, and returns copies of the outputs (`copy_outputs=False`
returns the buffers themselves, overwritten by the next call). Shapes are the traced ones.
Models are not re-entrant: one `Model` per thread. For batch-1 control loops, pin BLAS to one
thread (`OPENBLAS_NUM_THREADS=1`): threading these small GEMMs costs more than it saves,
badly so on a loaded CPU.
"""
from ._format import FORMAT_NAME, FORMAT_VERSION, FormatError
from ._kernels import BUILDERS as _BUILDERS
from ._model import Model, load, load_bytes

__all__ = ["load", "load_bytes", "Model", "FormatError", "FORMAT_NAME", "FORMAT_VERSION", "supported_ops"]


def supported_ops():
    """The op names this runtime can execute."""
    return sorted(_BUILDERS)
