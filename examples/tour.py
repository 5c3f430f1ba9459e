"""A short tour of tessera_array on the default device (the CPU unless told otherwise).

Run: python examples/tour.py
"""

import numpy as np

import tessera_array as xp

info = xp.__array_namespace_info__()
print(f"tessera_array {xp.__version__}, Array API {xp.__array_api_version__}")
print(f"default device: {info.default_device()}, devices: {info.devices()}")

# Arrays, dtypes and the standard's type promotion.
x = xp.arange(6, dtype=xp.float32)
y = xp.reshape(x, (2, 3))
print("x =", x)
print("y.T @ y =", y.T @ y)
print("int8 + int16 ->", (xp.ones(2, dtype=xp.int8) + xp.ones(2, dtype=xp.int16)).dtype)

# Elementwise math, reductions, sorting, sets.
z = xp.linspace(0, 1, 5)
print("sum(sin(z)) =", xp.sum(xp.sin(z)))
print("sort:", xp.sort(xp.asarray([3, 1, 2])), "unique:", xp.unique_values(xp.asarray([1, 1, 2])))

# Linear algebra extension.
rng = np.random.default_rng(0)
a = xp.asarray(rng.standard_normal((4, 4)) + 4 * np.eye(4))
b = xp.asarray(rng.standard_normal(4))
sol = xp.linalg.solve(a, b)
print("||A x - b|| =", float(xp.linalg.vector_norm(a @ sol - b)))

# The kernel registry: every backend registers its kernels by (op, backend, dtype, variant).
from tessera_array._dispatch import registry

print(registry.matrix())

# NumPy interop: host arrays convert, and NumPy functions keep tessera arrays.
print("np.asarray(x):", np.asarray(x))
print("np.exp(x) is a tessera Array:", isinstance(np.exp(x), xp.Array))
