"""The whole contract between the front end and a backend.

A backend is an object (the built-in ones: ``backend`` in
``tessera_array/backends/<name>/__init__.py``; third-party ones through the entry-point
group ``tessera_array.backends``) with the members of :data:`MEMBERS`, an ``ops``
namespace with every name of :data:`OPS`, and kernels registered for the ops of
:data:`KERNELS`. :func:`check_backend` lists what a backend lacks; discovery refuses to
load a backend that lacks a required member or an ``ops`` name (the reason names them),
and ``tests/test_backend_api.py`` checks every loaded backend, the test fakes, and the
signatures, against this file.

``ops``: the standard's namespace over native buffers
------------------------------------------------------
The front end validates arguments, resolves result dtypes and devices and casts
operands; an ``ops`` function then receives native buffers already of the computation
dtype and returns native buffers (never host scalars) of the result dtype. Python
scalars passed to binary ops are *weak* (NEP 50): they take the array operand's dtype.
``dtype`` arguments are :class:`~tessera_array.DType` objects (or None: the standard's
default), ``device`` arguments :class:`~tessera_array.Device` objects, ``axis``
arguments are normalised (non-negative ints, or tuples of them, where the signature
below says so). Each signature in :data:`OPS` is how the front end calls the op:
parameters before ``/`` are passed by position, those after ``*`` by keyword; one with
a default may be left out. A backend's function may accept more (NumPy's ufuncs do).

Kernels
-------
Kernel launchers are registered in :mod:`tessera_array._dispatch` by ``(op, backend,
dtype, variant)``. :data:`KERNELS` gives each op's launcher signature and whether it
returns a new native buffer or writes into its arguments (in-place launchers return
None, or ``()`` for the optimizer steps).
"""

from __future__ import annotations

import ast
import inspect
from types import MappingProxyType
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = [
    "KERNELS",
    "MEMBERS",
    "OPS",
    "OPTIONAL_OPS",
    "Backend",
    "KernelSpec",
    "Member",
    "OpSpec",
    "check_backend",
    "check_launcher",
    "check_ops",
    "missing_required",
    "parse_signature",
    "signature_problem",
]


# ---- backend members --------------------------------------------------------------------


class Member(NamedTuple):
    required: bool
    kind: str  # "attribute" or "method"
    meaning: str


def _req(kind, meaning):
    return Member(True, kind, meaning)


def _opt(kind, meaning):
    return Member(False, kind, meaning)


MEMBERS = MappingProxyType({
    # identity
    "name": _req("attribute", '"numpy", "cuda", "rocm", "opencl", "metal" or a '
                 "third-party name; the backend field of kernel keys"),
    "device_kind": _req("attribute", 'the kind its devices are written with ("cpu", '
                        '"cuda", "opencl", ...)'),
    "priority": _req("attribute", "int; the loaded device of highest priority is the "
                     "default device (numpy 0; accelerators never outrank it unless asked)"),
    "is_host": _req("attribute", "True when native buffers are host memory NumPy reads "
                    "without a copy (np.asarray of such an Array is allowed)"),
    # discovery
    "is_available": _req("method", "() -> bool: cheap; creates no context and imports "
                         "nothing heavier than importlib.util.find_spec"),
    "load": _req("method", "() -> None: imports the library and enumerates devices; raises "
                 "on failure (the reason is kept and reported)"),
    "unavailable_reason": _opt("method", "() -> str | None: why is_available() is False"),
    "plausibly_present": _opt("method", "() -> str | None: evidence that the hardware or "
                              "driver is there (a device node, an ICD file) even when "
                              "loading fails; the test gate tells 'absent' from 'broken' "
                              "with it"),
    "fix_hint": _opt("attribute", "str: how to make a backend that did not load work"),
    # devices
    "devices": _req("method", "() -> tuple[Device, ...], in index order"),
    "dtypes": _req("method", "(device) -> tuple[DType, ...]: the dtypes the device holds"),
    "missing_capability": _opt("method", "(device, dtype) -> str | None: the capability "
                               "(e.g. cl_khr_fp64) the device lacks for dtype"),
    "capabilities": _opt("method", "(device) -> dict: capability name -> bool"),
    "versions": _req("method", "() -> dict[str, str]: library and driver versions"),
    "host_fallbacks": _opt("method", "() -> tuple[str, ...]: the ops and kernels that run "
                           "on the host for want of a native one"),
    # buffers
    "ops": _req("attribute", "the namespace over native buffers (OPS, below)"),
    "ops_for": _opt("method", "(device) -> the ops namespace of device (absent: ops): "
                    "lets a backend of several devices guard which one is current"),
    "native_type": _req("attribute", "the class of a native buffer (results of ops are "
                        "of it, or are made so by coerce_native)"),
    "native_dtype": _req("method", "(native) -> DType"),
    "coerce_native": _req("method", "(result) -> native: a result of another class made "
                          "a native buffer (NumPy's 0-d scalars), or TypeError"),
    "from_host": _req("method", "(ndarray, device) -> native: an explicit copy to device"),
    "to_host": _req("method", "(native) -> numpy.ndarray: an explicit copy to the host"),
    "dlpack": _req("method", "(native, *, stream, max_version, dl_device, copy) -> "
                   "PyCapsule: __dlpack__ of a native buffer (BufferError when refused)"),
    "dlpack_device": _req("method", "(native) -> (device type, index)"),
    "from_dlpack": _opt("method", "(obj, *, device, copy) -> native: import a DLPack "
                        "producer onto device (absent: through the host)"),
    # kernels
    "register": _req("method", "(registry) -> None: registers the backend's kernels; a "
                     "failure unloads the backend with none of its kernels left"),
})


def missing_required(backend) -> list:
    """The names of the required members ``backend`` lacks (cheap: attribute reads)."""
    return [n for n, m in MEMBERS.items() if m.required and not hasattr(backend, n)]


# ---- ops: the namespace over native buffers ---------------------------------------------


class OpSpec(NamedTuple):
    chapter: str
    signature: str  # how the front end calls it (see the module docstring)
    returns: str  # "native", "tuple", "bool" or "none"


_UNARY = (
    "abs acos acosh asin asinh atan atanh bitwise_invert ceil conj cos cosh exp expm1 "
    "floor imag isfinite isinf isnan log log1p log2 log10 logical_not negative positive "
    "real reciprocal sign signbit sin sinh sqrt square tan tanh trunc"
).split()
_BINARY = (
    "add atan2 bitwise_and bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor "
    "copysign divide equal floor_divide greater greater_equal hypot less less_equal "
    "logaddexp logical_and logical_or logical_xor maximum minimum multiply nextafter "
    "not_equal pow remainder subtract"
).split()

_TABLE = {
    # core: conversion, copies, indexing, in-place arithmetic
    "core": {
        "astype": ("(a, dtype, /, copy=True)", "native"),
        "copy_into": ("(dst, src, /)", "none"),  # src (a buffer or scalar) broadcast into dst
        "getitem": ("(a, key, /)", "native"),  # key: normalised basic/advanced index
        "setitem": ("(a, key, value, /)", "none"),
        # a <name>= b straight into a (name: add/subtract/multiply/divide); False, having
        # written nothing, when it cannot (the front end then takes its general path)
        "inplace": ("(name, a, b, /)", "bool"),
    },
    "creation": {
        "arange": ("(start, stop, step, /, *, dtype, device)", "native"),
        "empty": ("(shape, /, *, dtype, device)", "native"),
        "eye": ("(n_rows, n_cols, /, *, k, dtype, device)", "native"),
        "full": ("(shape, fill_value, /, *, dtype, device)", "native"),
        "linspace": ("(start, stop, num, /, *, dtype, device, endpoint)", "native"),
        "meshgrid": ("(*arrays, indexing)", "tuple"),
        "ones": ("(shape, /, *, dtype, device)", "native"),
        "tril": ("(a, /, *, k)", "native"),
        "triu": ("(a, /, *, k)", "native"),
        "zeros": ("(shape, /, *, dtype, device)", "native"),
    },
    "elementwise": {
        **{n: ("(a, /)", "native") for n in _UNARY},
        **{n: ("(a, b, /)", "native") for n in _BINARY},
        "clip": ("(a, lo, hi, /)", "native"),  # lo/hi: None, a weak scalar or a buffer
        "round": ("(a, decimals, /)", "native"),
    },
    "linear_algebra": {
        "matmul": ("(a, b, /)", "native"),
        "matrix_transpose": ("(a, /)", "native"),
        "tensordot": ("(a, b, axes, /)", "native"),  # axes: a pair of tuples
        "vecdot": ("(a, b, axis, /)", "native"),  # axis: a negative int
        # the linalg extension
        "cholesky": ("(a, upper, /)", "native"),
        "cross": ("(a, b, axis, /)", "native"),
        "det": ("(a, /)", "native"),
        "diagonal": ("(a, offset, /)", "native"),
        "eig": ("(a, /)", "tuple"),
        "eigh": ("(a, /)", "tuple"),
        "eigvals": ("(a, /)", "native"),
        "eigvalsh": ("(a, /)", "native"),
        "inv": ("(a, /)", "native"),
        "matrix_norm": ("(a, keepdims, ord, /)", "native"),
        "matrix_power": ("(a, n, /)", "native"),
        "matrix_rank": ("(a, rtol, /)", "native"),
        "outer": ("(a, b, /)", "native"),
        "pinv": ("(a, rtol, /)", "native"),
        "qr": ("(a, mode, /)", "tuple"),
        "slogdet": ("(a, /)", "tuple"),
        "solve": ("(a, b, /)", "native"),
        "svd": ("(a, full_matrices, /)", "tuple"),
        "svdvals": ("(a, /)", "native"),
        "trace": ("(a, offset, dtype, /)", "native"),
        "vector_norm": ("(a, axis, keepdims, ord, /)", "native"),
    },
    "manipulation": {
        "broadcast_to": ("(a, shape, /)", "native"),
        "concat": ("(arrays, /, *, axis=0)", "native"),  # axis None: flattened first
        "expand_dims": ("(a, axis, /)", "native"),  # axis: sorted tuple
        "flip": ("(a, /, *, axis)", "native"),  # axis: tuple or None
        "moveaxis": ("(a, source, destination, /)", "native"),
        "permute_dims": ("(a, axes, /)", "native"),
        "repeat": ("(a, repeats, /, *, axis)", "native"),  # repeats: int or buffer
        "reshape": ("(a, shape, /, copy=None)", "native"),
        "roll": ("(a, shift, /, *, axis)", "native"),
        "squeeze": ("(a, axis, /)", "native"),
        "stack": ("(arrays, /, *, axis)", "native"),
        "take": ("(a, indices, /, *, axis)", "native"),
        "take_along_axis": ("(a, indices, /, *, axis)", "native"),
        "tile": ("(a, repetitions, /)", "native"),
        "unstack": ("(a, /, *, axis)", "tuple"),
    },
    "statistical": {
        "cumulative_prod": ("(a, /, *, axis, dtype, include_initial)", "native"),
        "cumulative_sum": ("(a, /, *, axis, dtype, include_initial)", "native"),
        "max": ("(a, /, *, axis, keepdims)", "native"),
        "mean": ("(a, /, *, axis, keepdims)", "native"),
        "min": ("(a, /, *, axis, keepdims)", "native"),
        "prod": ("(a, /, *, axis, dtype, keepdims)", "native"),
        "std": ("(a, /, *, axis, correction, keepdims)", "native"),
        "sum": ("(a, /, *, axis=None, dtype=None, keepdims=False)", "native"),
        "var": ("(a, /, *, axis, correction, keepdims)", "native"),
    },
    "searching": {
        "argmax": ("(a, /, *, axis, keepdims)", "native"),
        "argmin": ("(a, /, *, axis, keepdims)", "native"),
        "count_nonzero": ("(a, /, *, axis, keepdims)", "native"),
        "nonzero": ("(a, /)", "tuple"),
        "searchsorted": ("(a, v, /, *, side, sorter)", "native"),
        "where": ("(condition, a, b, /)", "native"),  # a/b: buffers or weak scalars
    },
    "set": {
        "isin": ("(a, b, /, *, invert)", "native"),
        "unique_all": ("(a, /)", "tuple"),
        "unique_counts": ("(a, /)", "tuple"),
        "unique_inverse": ("(a, /)", "tuple"),
        "unique_values": ("(a, /)", "native"),
    },
    "sorting": {
        "argsort": ("(a, /, *, axis, descending, stable)", "native"),
        "sort": ("(a, /, *, axis, descending, stable)", "native"),
    },
    "utility": {
        "all": ("(a, /, *, axis, keepdims)", "native"),
        "any": ("(a, /, *, axis, keepdims)", "native"),
        "diff": ("(a, /, *, axis, n, prepend, append)", "native"),
    },
}

OPS = MappingProxyType({
    name: OpSpec(chapter, sig, returns)
    for chapter, entries in _TABLE.items()
    for name, (sig, returns) in entries.items()
})
"""Every name of a backend's ``ops`` namespace, with how the front end calls it."""

OPTIONAL_OPS = MappingProxyType({
    # (func, *args) -> func(*args) with the backend's floating-point reporting off: the
    # front end reruns an op whose IEEE warning was raised as an error (-W error)
    "call_quietly": OpSpec("core", "(func, /, *args)", "native"),
})


# ---- kernels ----------------------------------------------------------------------------


class KernelSpec(NamedTuple):
    signature: str
    returns: str  # "native", "none" (writes its arguments), "tuple", "object"
    writes: tuple  # the arguments it writes in place
    meaning: str


KERNELS = MappingProxyType({
    # matvec family
    "matvec": KernelSpec("(a, x, /)", "native", (), "a @ x, a 2-D, x 1-D"),
    "spmv": KernelSpec("(data, indices, indptr, shape, x, /)", "native", (),
                       "CSR (data, indices, indptr) of shape (m, n) times the 1-D x"),
    "axpy": KernelSpec("(alpha, x, y, /, subtract=False)", "none", ("y",),
                       "y += alpha * x (y -= alpha * x with subtract), rounded as the "
                       "two-step expression (no fused multiply-add)"),
    "aypx": KernelSpec("(beta, x, y, /)", "none", ("y",), "y = beta * y + x"),
    "vecdot": KernelSpec("(x, y, /)", "native", (), "conj(x) . y of 1-D x, y (0-d result); "
                         "variant 'blas': in the host BLAS's order"),
    "vecmat": KernelSpec("(x, a, /)", "native", (), "conj(x) @ a (1-D result); variant "
                         "'blas': in the host BLAS's order"),
    "linear": KernelSpec("(x, weight, bias=None, residual=None, /)", "native", (),
                         "x @ weight.mT + bias + residual (nn.linear): x (..., K), weight "
                         "(N, K), bias None or (N,), residual None or broadcastable to "
                         "(..., N) without enlarging it; a fresh (..., N) C-contiguous "
                         "result"),
    "cg_fused": KernelSpec("(x, r, p, A, M, atol, maxiter, /)", "object", ("x", "r", "p"),
                           "one CG solve run on the device: a solve whose run(k) advances "
                           "up to k iterations and reports, or None to decline (the "
                           "contract: tessera_array/sparse/linalg/_fused.py)"),
    "gmres_fused": KernelSpec("(x, b, A, M, /, *, restart, maxiter, inner_limit, atol, ptol, "
                              "eps, nonzero)", "object", ("x",),
                              "one GMRES solve run on the device: a solve whose run(cycles) "
                              "advances up to that many restart cycles and reports, or None "
                              "to decline (the contract: "
                              "tessera_array/sparse/linalg/_fused_gmres.py)"),
    "bicgstab_fused": KernelSpec("(x, r, A, M, /, *, atol, rhotol, omegatol, maxiter)",
                                 "object", ("x", "r"),
                                 "one BiCGSTAB solve run on the device: a solve whose run(k) "
                                 "advances up to k iterations and reports, or None to "
                                 "decline (the contract: "
                                 "tessera_array/sparse/linalg/_fused_bicgstab.py)"),
    "krylov_vectors": KernelSpec("(b, A, M, blas, /)", "object", (),
                                 "the vector operations of gmres's loop on native buffers "
                                 "(products, dots, norms, axpy, the basis), or None to "
                                 "decline (the contract: "
                                 "tessera_array/sparse/linalg/_vectors.py)"),
    # fft family
    "fft_c2c": KernelSpec("(a, s, axes, norm, forward, /)", "native", (),
                          "complex transform over axes, lengths s"),
    "fft_r2c": KernelSpec("(a, s, axes, norm, forward, /)", "native", (),
                          "real-to-complex transform (last axis halved)"),
    "fft_c2r": KernelSpec("(a, s, axes, norm, forward, /)", "native", (),
                          "complex-to-real transform (last axis of length s[-1])"),
    # attention family
    "attention_fwd": KernelSpec(
        "(q, k, v, mask=None, /, *, scale, causal=None, window=None, dropout=None, "
        "want_lse=True)", "tuple", (), "(out, lse or None) of softmax(q k^T scale) v"),
    "attention_bwd": KernelSpec(
        "(q, k, v, out, dout, lse, mask=None, /, *, scale, causal=None, window=None, "
        "dropout=None)", "tuple", (), "(dq, dk, dv)"),
    "dropout_mask": KernelSpec("(shape, seed, offset, threshold, /, device=None)", "native",
                               (), "the Philox keep-mask of nn.dropout_mask"),
    # optimizer family: lists of native buffers, one entry per tensor
    "sgd_step": KernelSpec(
        "(params, grads, momentum_buffers, /, *, lr, momentum, dampening, weight_decay, "
        "nesterov, maximize, first, check_finite=False)", "tuple",
        ("params", "momentum_buffers"), "one SGD step over every tensor"),
    "adam_step": KernelSpec(
        "(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, /, *, lr, beta1, beta2, "
        "eps, weight_decay, amsgrad, maximize, step, check_finite=False)", "tuple",
        ("params", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"), "one Adam step"),
    "adamw_step": KernelSpec(
        "(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, /, *, lr, beta1, beta2, "
        "eps, weight_decay, amsgrad, maximize, step, check_finite=False)", "tuple",
        ("params", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"), "one AdamW step"),
    "adafactor_step": KernelSpec(
        "(params, grads, row_vars, col_vars, variances, /, *, lr, rho, rate, eps1, eps2, d, "
        "weight_decay, maximize, check_finite=False)", "tuple",
        ("params", "row_vars", "col_vars", "variances"), "one Adafactor step"),
})


# ---- checks -----------------------------------------------------------------------------


class _Param(NamedTuple):
    name: str
    kind: str  # "positional", "keyword", "var_positional", "var_keyword"
    optional: bool  # has a default: the caller may leave it out


_SIGNATURES: dict = {}


def parse_signature(text: str) -> tuple:
    """The parameters of a signature literal such as ``"(a, /, *, axis=None)"``.

    Parameters before ``/`` are passed by position, those after ``*`` (or ``*args``) by
    keyword; a plain parameter counts as positional (the front end passes it so).
    """
    hit = _SIGNATURES.get(text)
    if hit is None:
        args = ast.parse(f"def _spec{text}: pass").body[0].args
        plain = args.posonlyargs + args.args
        first_default = len(plain) - len(args.defaults)
        out = [_Param(a.arg, "positional", i >= first_default) for i, a in enumerate(plain)]
        if args.vararg is not None:
            out.append(_Param(args.vararg.arg, "var_positional", True))
        out += [_Param(a.arg, "keyword", d is not None)
                for a, d in zip(args.kwonlyargs, args.kw_defaults)]
        if args.kwarg is not None:
            out.append(_Param(args.kwarg.arg, "var_keyword", True))
        hit = _SIGNATURES[text] = tuple(out)
    return hit


def signature_problem(func, spec: str) -> str | None:
    """Why ``func`` cannot be called as the signature literal ``spec`` says, or None.

    A ufunc (NumPy's or CuPy's: it has ``nin``) is checked for its operand count, a
    callable whose signature cannot be read not at all; ``*args``/``**kwargs`` accept
    anything.
    """
    want = parse_signature(spec)
    positional = [p for p in want if p.kind == "positional"]
    keywords = {p.name: p for p in want if p.kind == "keyword"}
    nin = getattr(func, "nin", None)
    if isinstance(nin, int):  # a NumPy-style ufunc: its signature has out= positional
        if nin != len(positional):
            return f"takes {nin} operands, the contract passes {len(positional)}"
        return None
    try:
        have = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None
    P = inspect.Parameter
    var_pos = any(p.kind is P.VAR_POSITIONAL for p in have)
    var_kw = any(p.kind is P.VAR_KEYWORD for p in have)
    by_position = [p for p in have if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: p for p in have if p.kind in (P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD)}
    for i, w in enumerate(positional):
        if i >= len(by_position):
            if not var_pos:
                return f"does not take a positional argument {i} ({w.name})"
        elif w.optional and by_position[i].default is P.empty:
            return (f"{by_position[i].name} needs a default (the front end may leave "
                    f"{w.name} out)")
    if any(p.kind == "var_positional" for p in want) and not var_pos:
        return "does not take *args"
    for w in keywords.values():
        mine = by_name.get(w.name)
        if mine is None:
            if not var_kw:
                return f"does not take the keyword {w.name!r}"
        elif w.optional and mine.default is P.empty:
            return f"keyword {w.name!r} needs a default (the front end may leave it out)"
    for j, p in enumerate(by_position):
        if p.default is P.empty and j >= len(positional) and not (
            p.kind is P.POSITIONAL_OR_KEYWORD and p.name in keywords
        ):
            return f"requires {p.name!r}, which the contract does not pass"
    for p in have:
        if p.kind is P.KEYWORD_ONLY and p.default is P.empty and p.name not in keywords:
            return f"requires the keyword {p.name!r}, which the contract does not pass"
    return None


def check_ops(ops, *, signatures: bool = True) -> list:
    """Problems of an ``ops`` namespace against :data:`OPS` (empty when it conforms)."""
    problems = []
    for name, spec in OPS.items():
        fn = getattr(ops, name, None)
        if fn is None:
            problems.append(f"ops.{name} is missing ({spec.chapter}: {name}{spec.signature})")
        elif not callable(fn):
            problems.append(f"ops.{name} is not callable")
        elif signatures:
            why = signature_problem(fn, spec.signature)
            if why:
                problems.append(f"ops.{name}{spec.signature}: {why}")
    for name, spec in OPTIONAL_OPS.items():
        fn = getattr(ops, name, None)
        if fn is not None and signatures:
            why = signature_problem(fn, spec.signature)
            if why:
                problems.append(f"ops.{name}{spec.signature}: {why}")
    return problems


def check_launcher(op: str, launcher) -> str | None:
    """Why ``launcher`` does not fit the registered op ``op``'s signature, or None."""
    why = signature_problem(launcher, KERNELS[op].signature)
    return None if why is None else f"{op}{KERNELS[op].signature}: {why}"


def check_backend(backend, *, signatures: bool = True) -> list:
    """Every problem of ``backend`` against the contract: missing required members,
    members that should be callable and are not, and the ``ops`` namespace's problems
    (``ops`` is read only once the backend has loaded, as it may be None before)."""
    problems = [f"{n} is missing ({MEMBERS[n].meaning})" for n in missing_required(backend)]
    for name, member in MEMBERS.items():
        value = getattr(backend, name, None)
        if value is not None and member.kind == "method" and not callable(value):
            problems.append(f"{name} must be a method ({member.meaning})")
    ops = getattr(backend, "ops", None)
    if ops is not None:
        problems.extend(check_ops(ops, signatures=signatures))
    return problems


@runtime_checkable
class Backend(Protocol):
    """The required members of :data:`MEMBERS`, for type checkers."""

    name: str
    device_kind: str
    priority: int
    is_host: bool
    native_type: type
    ops: object

    def is_available(self) -> bool: ...

    def load(self) -> None: ...

    def devices(self) -> tuple: ...

    def dtypes(self, device) -> tuple: ...

    def versions(self) -> dict: ...

    def native_dtype(self, native): ...

    def coerce_native(self, result): ...

    def from_host(self, array, device): ...

    def to_host(self, native): ...

    def dlpack(self, native, *, stream=None, max_version=None, dl_device=None,
               copy=None): ...

    def dlpack_device(self, native) -> tuple: ...

    def register(self, registry) -> None: ...
