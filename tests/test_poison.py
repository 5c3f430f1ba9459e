"""tests/_poison.py, which the GPU launchers' tests put in place of ``_kernels.empty``:
checked here on the host, with NumPy as the array module."""

from __future__ import annotations

import numpy as np
from _poison import poisoned_empty


def test_poisoned_buffers_are_all_ones_bits():
    empty = poisoned_empty(np)
    a, b, c = empty((3, 2), np.float32), empty(5, np.int16), empty((), np.complex128)
    assert a.shape == (3, 2) and a.dtype == np.float32 and np.isnan(a).all()
    assert b.shape == (5,) and (b == -1).all()
    assert c.shape == () and np.isnan(c.real) and np.isnan(c.imag)
    assert empty([0, 4], np.float64).shape == (0, 4)
