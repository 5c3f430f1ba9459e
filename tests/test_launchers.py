"""tessera_array.launchers: the registry seam that benchmarks and tests time kernels by."""

from __future__ import annotations

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import launchers
from tessera_array._errors import KernelNotFoundError


def test_launcher_runs_the_registered_kernel_on_native_buffers(device):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((7, 5)).astype(np.float32)
    x = rng.standard_normal(5).astype(np.float32)
    a_t, x_t = xp.asarray(a, device=device), xp.asarray(x, device=device)
    assert "default" in launchers.variants("matvec", device, xp.float32)
    for variant in launchers.variants("matvec", device, xp.float32):
        mv = launchers.launcher("matvec", device, xp.float32, variant)
        y = mv(launchers.native(a_t), launchers.native(x_t))
        assert isinstance(y, type(launchers.native(a_t)))  # a native buffer, not an Array
        got = launchers.to_host(y, device)
        assert isinstance(got, np.ndarray) and got.shape == (7,)
        np.testing.assert_allclose(got, a.astype(np.float64) @ x, rtol=1e-5, atol=1e-5)


def test_native_shares_the_arrays_buffer(device):
    x = xp.asarray(np.arange(4.0, dtype=np.float32), device=device)
    buf = launchers.native(x)
    assert buf is launchers.native(x)
    np.testing.assert_array_equal(launchers.to_host(buf, device), [0, 1, 2, 3])


def test_lookups_fail_with_the_registry_s_errors(device):
    with pytest.raises(KernelNotFoundError, match=r"matvec: no kernel .*variant=no_such"):
        launchers.launcher("matvec", device, xp.float32, "no_such")
    with pytest.raises(ValueError, match=r"unknown op"):
        launchers.launcher("no_such_op", device, xp.float32)
    with pytest.raises(ValueError, match=r"variants: unknown op"):
        launchers.variants("no_such_op", device, xp.float32)
    with pytest.raises(TypeError, match=r"launcher: dtype must be a tessera_array dtype"):
        launchers.launcher("matvec", device, "float32")
    with pytest.raises(TypeError, match=r"native: expected a tessera_array Array"):
        launchers.native(np.zeros(3))
    assert launchers.variants("matvec", device, xp.bool) == ()
