"""Op implementations, attached to `Tensor` as methods and exported as `autograd_core.<name>`."""
from . import arith, extra, indexing, inplace, pointwise, reduction, shape  # noqa: F401
from ..tensor import Tensor
from .. import creation as _creation

_T = Tensor

# -- operators --------------------------------------------------------------------------------
_T.__add__ = arith.add
_T.__radd__ = arith.add
_T.__sub__ = arith.sub
_T.__rsub__ = arith.rsub
_T.__mul__ = arith.mul
_T.__rmul__ = arith.mul
_T.__truediv__ = arith.div
_T.__rtruediv__ = arith.rdiv
_T.__floordiv__ = arith.floordiv
_T.__rfloordiv__ = arith.rfloordiv
_T.__mod__ = arith.remainder
_T.__rmod__ = arith.rremainder
_T.__pow__ = arith.pow
_T.__rpow__ = arith.rpow
_T.__matmul__ = arith.matmul
_T.__rmatmul__ = arith.rmatmul
_T.__neg__ = arith.neg
_T.__pos__ = lambda self: self
_T.__abs__ = pointwise.abs
_T.__eq__ = pointwise.eq
_T.__ne__ = pointwise.ne
_T.__lt__ = pointwise.lt
_T.__le__ = pointwise.le
_T.__gt__ = pointwise.gt
_T.__ge__ = pointwise.ge
_T.__and__ = pointwise.bitwise_and
_T.__rand__ = pointwise.bitwise_and
_T.__or__ = pointwise.bitwise_or
_T.__ror__ = pointwise.bitwise_or
_T.__xor__ = pointwise.bitwise_xor
_T.__rxor__ = pointwise.bitwise_xor
_T.__invert__ = pointwise.invert
_T.__getitem__ = indexing.getitem
_T.__setitem__ = indexing.setitem
_T.__iadd__ = inplace.add_
_T.__isub__ = inplace.sub_
_T.__imul__ = inplace.mul_
_T.__itruediv__ = inplace.div_
_T.__ipow__ = inplace.pow_
_T.__hash__ = object.__hash__

# -- methods ----------------------------------------------------------------------------------
_METHODS = {
    arith: ["add", "sub", "mul", "div", "neg", "pow", "matmul", "mm", "bmm", "mv", "dot", "outer",
            "remainder"],
    pointwise: ["exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "abs", "sin", "cos", "tan",
                "asin", "acos", "atan", "sinh", "cosh", "tanh", "sigmoid", "reciprocal", "relu", "square",
                "sign", "floor", "ceil", "round", "trunc", "clamp", "clamp_min", "clamp_max", "maximum",
                "minimum", "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                "logical_xor", "logical_not", "isnan", "isinf", "isfinite", "equal", "allclose", "isclose",
                "atan2", "lerp", "nonzero", "leaky_relu", "softplus", "elu"],
    reduction: ["sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "all", "any", "norm", "var",
                "std", "prod", "cumsum", "logsumexp", "softmax", "log_softmax"],
    shape: ["reshape", "view", "view_as", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze",
            "transpose", "t", "permute", "movedim", "expand", "expand_as", "repeat", "clone", "contiguous",
            "to", "type_as", "double", "half", "long", "split", "chunk", "unbind", "flip", "roll", "narrow", "select"],
    indexing: ["gather", "index_select", "masked_fill", "take"],
    inplace: ["add_", "sub_", "mul_", "div_", "pow_", "neg_", "exp_", "log_", "sqrt_", "abs_", "tanh_",
              "sigmoid_", "relu_", "sin_", "cos_", "floor_", "ceil_", "round_", "clamp_", "clamp_min_",
              "clamp_max_", "masked_fill_", "addcmul", "addcdiv", "addcmul_", "addcdiv_", "copy_", "fill_",
              "zero_", "lerp_"],
    _creation: ["normal_", "uniform_", "bernoulli_", "exponential_", "random_"],
}
extra.attach(_T)  # tril/triu/topk/narrow/new_* (ops/extra.py)
for _mod, _names in _METHODS.items():
    for _n in _names:
        setattr(_T, _n, getattr(_mod, _n))

_T.float = shape.float_
_T.int = shape.int_
_T.bool = shape.bool_
_T.type = shape.type_
_T.where = lambda self, condition, other: pointwise.where(condition, self, other)
_T.T = property(shape._T)
_T.mT = property(shape._mT)
_T.absolute = pointwise.abs
_T.negative = arith.neg
_T.subtract = arith.sub
_T.multiply = arith.mul
_T.divide = arith.div
_T.true_divide = arith.div
_T.clip = pointwise.clamp
_T.clip_ = inplace.clamp_
_T.swapaxes = shape.transpose
_T.moveaxis = shape.movedim
_T.arctan2 = pointwise.atan2
_T.greater = pointwise.gt
_T.less = pointwise.lt
