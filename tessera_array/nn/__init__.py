"""Neural-network ops: attention and its dropout mask, the affine map with fused operands.

Each op has its plain reference beside it (``*_reference``: the math in the inputs'
Array API namespace only, float64 in the tests), what every backend's kernels are
checked against.
"""

from ._attention import attention, attention_backward
from ._dropout import dropout_mask
from ._linear import linear, linear_backward
from ._reference import (
    attention_backward_reference,
    attention_reference,
    linear_backward_reference,
    linear_reference,
)

__all__ = [
    "attention",
    "attention_backward",
    "attention_backward_reference",
    "attention_reference",
    "dropout_mask",
    "linear",
    "linear_backward",
    "linear_backward_reference",
    "linear_reference",
]
