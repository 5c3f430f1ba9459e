"""Program families: the generated kernels built as a few programs, not one each.

A PoCL build costs about the same for one kernel as for a hundred, and a fresh CI
machine pays every build (PoCL compiles each program, then each kernel again at its
first launch, 0.1-0.6 s each). So the generated kernels (:mod:`._generate`) come in
families, one program each: per dtype its unary ops, its binary ops with ``where``, its
casts, its reductions, as the op modules register them (:func:`add_families`; read at
the first kernel asked for). A member's first use builds its whole family; a member
of no family is a program alone. A family whose program fails to build is split and
its members build alone (:func:`family_failures` lists it): slower, not wrong.

Measured (2-core EPYC shared with other jobs, load average 4-7; PoCL 3.0, LLVM 14;
fresh ``XDG_CACHE_HOME`` and ``POCL_CACHE_DIR``; builds and seconds logged by wrapping
``Program.build`` and each kernel's first enqueue), one program per kernel against
families::

    cold run (one pytest process)        builds  build s  first launches  launch s  wall s
    tests/test_opencl_backend.py
      one program per kernel               1327    917.8            1327     434.3  1376.0
      families                               78     48.3             603     356.5   423.6
    test_creation + test_data_type
      one program per kernel                166    126.8             166      61.9   201.2
      families                               46     44.7             160      89.5   145.2

A build, cold, same process (median of 3): one kernel alone 0.44 s, the binary float32
family (24 kernels) 0.74 s, the unary one (35) 0.68 s; a kernel's first launch costs the
same in a program of 1 or of 120 kernels (0.83 / 0.74 s). The kernels themselves run no
slower than the per-rank kernels they replaced (contiguous 1e6 float32 add 0.66-0.95 of
their time, transposed 1000x1000 add 0.87-0.95). The history is in benchmarks/NOTES.md.
"""

from __future__ import annotations

from tessera_array.backends._common import from_text, memo

from tessera_array._errors import KernelCompileError

from . import _compile
from ._generate import program_source

__all__ = ["add_families", "family_failures", "kernel_of", "source_of"]

_PROVIDERS: list = []  # callables giving lists of families (registrations, not a cache)
_LOADED = object()  # the key under which _family counts the providers it has read
_family = memo("opencl.families")  # member -> the tuple of members of its program
_source = memo("opencl.member_sources")  # member -> (KernelSource, kernel name prefix)
KERNELS = memo("opencl.member_kernels")  # (context, member, name pattern) -> pyopencl.Kernel
_failed = memo("opencl.family_failures")  # family -> the build error that split it


def add_families(provider) -> None:
    """Register ``provider``: a callable returning an iterable of families (lists of
    members), called at the first kernel a launcher asks for (and again after
    ``clear_all()``)."""
    _PROVIDERS.append(provider)


def _families() -> None:
    """Read the providers not read yet into ``_family``."""
    done = _family.get(_LOADED, 0)
    for provider in _PROVIDERS[done:]:
        for fam in provider():
            fam = tuple(dict.fromkeys(fam))
            if len(fam) > 1 and fam not in _failed:
                for m in fam:
                    _family.setdefault(m, fam)
    _family[_LOADED] = len(_PROVIDERS)


def source_of(member) -> tuple:
    """``(KernelSource, prefix)``: the program holding ``member``'s kernel and the index
    its kernel names carry there ("" alone)."""
    hit = _source.get(member)
    if hit is None:
        if _family.get(_LOADED, 0) != len(_PROVIDERS):
            _families()
        fam = _family.get(member)
        if fam is None:
            hit = _source[member] = (from_text(program_source((member,), False)), "")
        else:
            src = from_text(program_source(fam, True), f"generated program ({len(fam)} kernels)")
            for idx, m in enumerate(fam):
                if _family.get(m) is fam:
                    _source[m] = (src, str(idx))
            hit = _source[member]
    return hit


def kernel_of(ctx, member, name: str, arg_types):
    """The kernel ``name`` (``{}`` standing for the member's prefix) of ``member``'s
    program for ``ctx``, its scalar arguments declared as ``arg_types``."""
    key = (ctx, member, name)
    knl = KERNELS.get(key)
    if knl is None:
        src, prefix = source_of(member)
        try:
            knl = _compile.generated_kernel(ctx, src, name.format(prefix), arg_types)
        except KernelCompileError as err:
            fam = _family.get(member)
            if fam is None:
                raise
            # Its members build alone (and one that does not build raises then).
            _failed[fam] = err
            for m in fam:
                if _family.get(m) is fam:
                    del _family[m]
                    _source.pop(m, None)
            src, prefix = source_of(member)
            knl = _compile.generated_kernel(ctx, src, name.format(prefix), arg_types)
        KERNELS[key] = knl
    return knl


def family_failures() -> list:
    """The families whose program failed to build (each member then built alone)."""
    return list(_failed)
