"""Neural-network ops: attention and its dropout mask, the affine map with fused operands."""

from ._attention import attention, attention_backward
from ._dropout import dropout_mask
from ._linear import linear, linear_backward

__all__ = ["attention", "attention_backward", "dropout_mask", "linear", "linear_backward"]
