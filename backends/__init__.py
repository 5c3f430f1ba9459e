"""Built-in backends, shipped as ``tessera_array.backends``.

Each subpackage has the same file names and exposes ``backend``, an object that
implements :mod:`tessera_array._backend_api`.
"""
