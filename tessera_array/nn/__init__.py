"""Neural-network ops: attention and its dropout mask."""

from ._attention import attention, attention_backward
from ._dropout import dropout_mask

__all__ = ["attention", "attention_backward", "dropout_mask"]
