"""Neural-network ops: attention and its dropout mask."""

from ._dropout import dropout_mask

__all__ = ["dropout_mask"]
