"""The ROCm backend on a machine without an AMD GPU: what can be checked on the CPU.

- Selection from the installed distribution (``importlib.metadata`` faked): a
  ``cupy-rocm-*`` build selects ``rocm``, a CUDA build ``cuda``, no CuPy neither, each
  with its reason; ``/dev/kfd`` is the evidence of a driver.
- Loading over a fake CuPy module: ``rocm:N`` devices, the ROCm namespace (hipSOLVER,
  no ``eig``/``eigvals``), the build data the kernels compile with.
- The compile dialects' options (hiprtc: no architecture flag, a code object, the HIP
  folder first; NVRTC: ``sm_XX``), through fake RTC modules.
- The template instances the launchers name for warp widths 32 and 64, and the CI
  compile step (a kernel that fails for an AMD target fails it; a wave width that is not
  the target's fails it).
- No kernel source or launcher hard-codes a warp width of 32 (:data:`EXCEPTIONS`).

The wave-width arithmetic of each warp-level kernel is emulated in
tests/test_wave_emulation.py.
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib.machinery
import importlib.metadata
import importlib.util
import io
import pathlib
import re
import shutil
import subprocess
import sys
import tokenize
import types
import warnings

import numpy as np
import pytest
import tessera_array.kernels
from tessera_array.backends._cupy import _backend, _kernels
from tessera_array.backends._cupy import attention as cu_attention
from tessera_array.backends._cupy import cg as cu_cg
from tessera_array.backends._cupy import bicgstab as cu_bicgstab
from tessera_array.backends._cupy import gmres as cu_gmres
from tessera_array.backends._cupy import matvec as cu_matvec
from tessera_array.backends._cupy import optim as cu_optim
from tessera_array.backends._cupy import philox as cu_philox
from tessera_array.backends._cupy import sparse as cu_sparse
from tessera_array.backends._cupy._compile import NAME, NvrtcDialect
from tessera_array.backends.cuda import CudaBackend
from tessera_array.backends.rocm import RocmBackend
from tessera_array.backends.rocm._compile import HiprtcDialect, arch_name
from tessera_array.backends.rocm._namespace import RocmNamespace

from tessera_array import _discovery, _dtypes
from tessera_array._dispatch import KernelRegistry

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
FAMILIES = (cu_matvec, cu_sparse, cu_optim, cu_philox, cu_attention, cu_cg, cu_gmres, cu_bicgstab)


# ---- selection from faked distribution metadata ----------------------------------------


class _Dist:
    def __init__(self, name):
        self.metadata = {"Name": name}


@pytest.fixture
def installed(monkeypatch):
    """``installed(dists, devices)``: fake the installed distributions, whether a ``cupy``
    module is importable, and the device nodes that exist."""

    def fake(dists=(), nodes=()):
        real_spec = importlib.util.find_spec
        dists = tuple(dists)

        def find_spec(name, *args, **kwargs):
            if name == "cupy":
                return importlib.machinery.ModuleSpec("cupy", None) if dists else None
            return real_spec(name, *args, **kwargs)

        def distribution(name):
            norm = re.sub(r"[-_.]+", "-", name).lower()
            for d in dists:
                if re.sub(r"[-_.]+", "-", d).lower() == norm:
                    return _Dist(d)
            raise importlib.metadata.PackageNotFoundError(name)

        def distributions():
            return [_Dist(d) for d in dists + ("numpy", "scipy")]

        def glob_(pattern):
            return sorted(n for n in nodes if fnmatch.fnmatch(n, pattern))

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)
        monkeypatch.setattr(importlib.metadata, "distribution", distribution)
        monkeypatch.setattr(importlib.metadata, "distributions", distributions)
        monkeypatch.setattr(_backend.glob, "glob", glob_)

    return fake


def test_no_cupy_neither_loads(installed):
    installed()
    assert RocmBackend().unavailable_reason() == "cupy not installed (pip install cupy-rocm-7-0)"
    assert CudaBackend().unavailable_reason() == "cupy not installed (pip install cupy-cuda13x)"
    assert not RocmBackend().is_available()


@pytest.mark.parametrize("dist", ["cupy-rocm-7-0", "cupy-rocm-6-0", "cupy_rocm_5_0",
                                  "CuPy-ROCm-4-3"])
def test_a_rocm_build_selects_rocm(installed, dist):
    installed([dist], ["/dev/kfd", "/dev/dri/renderD128"])
    rocm, cuda = RocmBackend(), CudaBackend()
    assert rocm.unavailable_reason() is None and rocm.is_available()
    assert rocm._distribution() == re.sub(r"[-_.]+", "-", dist).lower()
    assert rocm.plausibly_present() == "/dev/kfd"
    assert cuda.unavailable_reason() == (
        "the installed CuPy is not a CUDA build (none of cupy-cuda13x, cupy-cuda12x, "
        "cupy-cuda11x, cupy is installed)")


def test_a_rocm_build_without_the_driver_says_so(installed):
    installed(["cupy-rocm-7-0"], ["/dev/dri/renderD128"])
    rocm = RocmBackend()
    assert rocm.unavailable_reason() == "no ROCm driver found (looked for /dev/kfd)"
    assert rocm.plausibly_present() is None


def test_a_cuda_build_selects_cuda_not_rocm(installed):
    installed(["cupy-cuda13x"], ["/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd"])
    assert CudaBackend().unavailable_reason() is None
    assert RocmBackend().unavailable_reason() == (
        "the installed CuPy is not a ROCm build (none of cupy-rocm-7-0, cupy-rocm-*, cupy is "
        "installed)")
    # A ROCm-looking name that is no ROCm build does not match the pattern.
    installed(["cupy-rocmish"], ["/dev/kfd"])
    assert RocmBackend()._distribution() is None


def test_a_source_build_is_decided_by_the_build_itself(installed, fake_cupy):
    """A source build (distribution ``cupy``) may be either: both backends pass the cheap
    check, and load() keeps the one CuPy's is_hip names."""
    installed(["cupy"], ["/dev/kfd", "/dev/nvidia0"])
    assert RocmBackend().unavailable_reason() is None
    assert CudaBackend().unavailable_reason() is None
    fake_cupy(is_hip=True, count=1)
    b = RocmBackend()
    b.load()
    assert [str(d) for d in b.devices()] == ["rocm:0"]
    with pytest.raises(RuntimeError, match="is a ROCm build; the cuda backend needs a CUDA"):
        CudaBackend().load()


def test_the_rocm_class_data():
    b = RocmBackend()
    assert (b.name, b.device_kind, b.dlpack_device_type) == ("rocm", "rocm", 10)
    assert CudaBackend.dlpack_device_type == 2
    assert b.kernel_dirs == ("hip", "cuda", "include")
    assert CudaBackend.kernel_dirs == ("cuda", "include")
    assert b.dialect is HiprtcDialect and CudaBackend.dialect is NvrtcDialect
    assert b.namespace_class is RocmNamespace
    # No cooperative launch through CuPy on HIP (cuLaunchCooperativeKernel is a stub that
    # fails there): a fused solver must use multi-launch device steps.
    assert b.cooperative_launch is False and CudaBackend.cooperative_launch is True
    assert b.libraries["solver"] == "hipSOLVER" and b.libraries["rtc"] == "hiprtc"
    assert set(b.libraries) == set(CudaBackend.libraries)
    assert b.priority < 0  # never the default device by itself
    assert ("rocm", "tessera_array.backends.rocm") in _discovery.BUILTIN_BACKENDS


def test_no_platform_flag_in_the_shared_code():
    """The shared CuPy code reads class data, never which build it runs on: ``is_hip``
    appears only where load() checks that the installed build is the one expected."""
    for path in sorted((ROOT / "backends" / "_cupy").glob("*.py")) + sorted(
            (ROOT / "backends" / "_xp").glob("*.py")):
        lines = [ln for ln in path.read_text().splitlines() if "is_hip" in ln]
        if path.name == "_backend.py":
            assert len(lines) == 3, lines  # the class attribute and the load() check
            assert all("is_hip =" in ln or "runtime.is_hip" in ln for ln in lines), lines
        else:
            assert not lines, (path.name, lines)


def test_info_says_why_rocm_did_not_load():
    proc = subprocess.run([sys.executable, "-m", "tessera_array", "info"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    row = [ln for ln in proc.stdout.splitlines() if ln.startswith("rocm ")]
    assert len(row) == 1, proc.stdout
    status = dict((n, r) for n, _, r in _discovery.backend_status())
    if status.get("rocm") is not None:  # this machine has no working ROCm build
        assert f"not loaded: {status['rocm']}" in row[0]
    else:
        assert "loaded" in row[0] and "rocm:0" in row[0]


# ---- loading over a fake CuPy module ----------------------------------------------------


def _fake_cupy(*, is_hip: bool, count: int = 2, warp: int = 64, arch="gfx90a:sramecc+:xnack-"):
    cupy = types.ModuleType("cupy")
    for name in dir(np):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated names
            value = getattr(np, name, None)
        if not name.startswith("_") and value is not None \
                and not isinstance(value, types.ModuleType):
            setattr(cupy, name, value)
    cupy.linalg, cupy.fft = np.linalg, np.fft

    class ElementwiseKernel:  # made by the namespace's constructor, not called here
        def __init__(self, *args, **kwargs):
            self.args = args

        def __call__(self, *args, **kwargs):
            raise AssertionError("the fake CuPy runs no elementwise kernel")

    cupy.ElementwiseKernel = ElementwiseKernel
    current = [0]

    class Device:
        def __init__(self, index=0):
            self.id = index

        def __enter__(self):
            self.prev, current[0] = current[0], self.id
            return self

        def __exit__(self, *exc):
            current[0] = self.prev

        @property
        def compute_capability(self):
            return "90"

    props = {"name": b"AMD Instinct MI210" if is_hip else b"NVIDIA H200", "warpSize": warp,
             "gcnArchName": arch.encode(), "gcnArch": 910}
    runtime = types.SimpleNamespace(
        is_hip=is_hip, getDeviceCount=lambda: count, getDeviceProperties=lambda i: props,
        runtimeGetVersion=lambda: 60443, driverGetVersion=lambda: 60443)
    loaded = []

    class Module:
        def load(self, image):
            loaded.append((current[0], bytes(image)))

        def get_function(self, symbol):
            return ("function", symbol)

    cupy.cuda = types.SimpleNamespace(runtime=runtime, Device=Device,
                                      function=types.SimpleNamespace(Module=Module))
    cupy.current, cupy.loaded = current, loaded
    cupyx = types.ModuleType("cupyx")
    cupyx.errstate = lambda **kw: contextlib.nullcontext()
    return cupy, cupyx


@pytest.fixture
def fake_cupy(monkeypatch):
    def install(**kw):
        cupy, cupyx = _fake_cupy(**kw)
        monkeypatch.setitem(sys.modules, "cupy", cupy)
        monkeypatch.setitem(sys.modules, "cupyx", cupyx)
        monkeypatch.setitem(sys.modules, "cupy.cuda", cupy.cuda)
        monkeypatch.setitem(sys.modules, "cupy.cuda.function", cupy.cuda.function)
        monkeypatch.setattr(_kernels, "_build", None)
        return cupy

    return install


def test_rocm_loads_over_a_rocm_build(fake_cupy):
    cupy = fake_cupy(is_hip=True, count=2)
    b = RocmBackend()
    b.load()
    assert [str(d) for d in b.devices()] == ["rocm:0", "rocm:1"]
    assert isinstance(b.ops, RocmNamespace) and b.ops.m is cupy
    assert _kernels._build is b  # the kernels compile with the rocm build's data
    # The shared launchers' messages name rocm devices as rocm devices.
    on = [types.SimpleNamespace(device=types.SimpleNamespace(id=i)) for i in (0, 1)]
    with pytest.raises(ValueError, match=r"x\.device=rocm:1, expected rocm:0"):
        cu_matvec.check_device("matvec", {"x": on[1]}, on[0].device)
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    w, _ = b.ops.eigh(a)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-12)
    for func in (b.ops.eig, b.ops.eigvals):
        with pytest.raises(NotImplementedError, match=r"linalg\.eig(vals)?: not available on "
                           r"rocm devices: CuPy's ROCm build has no general.*eigh.*"
                           r"to_device\('cpu'\)"):
            func(a)
    assert b.ops.linalg_library == "hipSOLVER"
    # The families register under rocm, the host BLAS products as listed fallbacks.
    registry = KernelRegistry()
    b.register(registry)
    assert registry.lookup("matvec", "rocm", _dtypes.float32, "warp") is \
        cu_matvec.dense_matvec_warp
    assert registry.lookup("spmv", "rocm", _dtypes.float64, "warp") is cu_sparse.spmv_warp
    registry.lookup("vecdot", "rocm", _dtypes.float64, "blas")
    assert "kernel vecdot[blas]" in b.host_fallbacks()


def test_rocm_refuses_a_cuda_build_and_cuda_a_rocm_one(fake_cupy):
    fake_cupy(is_hip=False)
    with pytest.raises(RuntimeError, match="the installed CuPy is a CUDA build; the rocm "
                                           "backend needs a ROCm one"):
        RocmBackend().load()
    fake_cupy(is_hip=True)
    with pytest.raises(RuntimeError, match="the installed CuPy is a ROCm build; the cuda "
                                           "backend needs a CUDA one"):
        CudaBackend().load()


def test_the_kernels_build_with_the_loaded_backends_data(monkeypatch):
    monkeypatch.setattr(_kernels, "_build", None)
    with pytest.raises(RuntimeError, match="no CuPy backend .* has loaded"):
        _kernels._stack()
    monkeypatch.setattr(_kernels, "_stacks", {})

    # Other names than the real backends', so that their memos stay the registered ones.
    class Rocm(RocmBackend):
        name = "rocmtest"

    class Cuda(CudaBackend):
        name = "cudatest"

    _kernels.use_build(Rocm())
    stack, tree = _kernels._stack()
    assert isinstance(stack.dialect, HiprtcDialect) and stack.dialect.backend == "rocmtest"
    # The kernels of the package under test (the source tree's, or an installed copy's).
    installed = pathlib.Path(tessera_array.kernels.__file__).parent
    assert stack.dialect.include_dirs == tuple(str(installed / d) for d in
                                               ("hip", "cuda", "include"))
    assert "tessera_matvec_warp" in tree.load("matvec.cu").text
    assert _kernels.device_label(3) == "rocm:3"
    _kernels.use_build(Cuda())
    stack, _ = _kernels._stack()
    assert type(stack.dialect) is NvrtcDialect and stack.dialect.backend == "cudatest"
    assert _kernels.device_label(3) == "cuda:3"


def test_the_warp_width_is_the_devices(fake_cupy):
    for warp in (64, 32):
        fake_cupy(is_hip=True, warp=warp)
        _kernels._warp.clear()
        assert _kernels.warp_size(types.SimpleNamespace(id=0)) == warp
    _kernels._warp.clear()


# ---- the compile dialects' options -------------------------------------------------------


class _FakeRtc:
    """CuPy's RTC wrapper, recording a compile (getCUBIN raises as it does on HIP)."""

    class NVRTCError(Exception):
        pass

    def __init__(self, *, hip: bool):
        self.hip, self.calls = hip, {}

    def getVersion(self):
        return (6, 4)

    def createProgram(self, text, name, headers, include_names):
        self.calls["source"] = text
        return 7

    def addNameExpression(self, prog, name):
        self.calls.setdefault("names", []).append(name)

    def compileProgram(self, prog, flags):
        self.calls["flags"] = list(flags)

    def getLoweredName(self, prog, name):
        return "_Z" + re.sub(r"\W", "", name)

    def getCUBIN(self, prog):
        if self.hip:
            raise RuntimeError("HIP does not support getCUBIN")
        return b"cubin"

    def getPTX(self, prog):
        return b"code object" if self.hip else b"ptx"

    def destroyProgram(self, prog):
        self.calls["destroyed"] = True


def _compile(dialect_cls, rtc, monkeypatch):
    folders = [KERNELS / d for d in (RocmBackend.kernel_dirs if dialect_cls is HiprtcDialect
                                     else CudaBackend.kernel_dirs)]
    dialect = dialect_cls("x", folders)
    monkeypatch.setattr(dialect, "_nvrtc", lambda: rtc)
    name = "tessera_matvec_warp<float, 64, 4>"
    program = dialect.compile(1, "// source", ("-DTESSERA_X=1", NAME + name))
    return dialect, program, name


def test_hiprtc_options_and_image(fake_cupy, monkeypatch):
    cupy = fake_cupy(is_hip=True, arch="gfx1030")
    rtc = _FakeRtc(hip=True)
    dialect, program, name = _compile(HiprtcDialect, rtc, monkeypatch)
    flags = rtc.calls["flags"]
    assert flags == ["-std=c++17", "-DTESSERA_X=1",
                     f"-I{KERNELS / 'hip'}", f"-I{KERNELS / 'cuda'}", f"-I{KERNELS / 'include'}"]
    assert not any("arch" in f or "ftz" in f or "denormals" in f for f in flags)
    assert rtc.calls["names"] == [name] and rtc.calls["destroyed"]
    assert cupy.loaded == [(1, b"code object")]  # loaded on device 1, the compile's device
    assert program.lowered == {name: "_Z" + re.sub(r"\W", "", name)}
    fp = dialect.fingerprint(1)
    assert "hiprtc (6, 4)" in fp and "gfx1030" in fp and "wave64" in fp
    assert arch_name({"gcnArchName": b"gfx90a:sramecc+:xnack-"}) == "gfx90a:sramecc+:xnack-"
    assert arch_name({"gcnArch": 906}) == "gfx906"


def test_nvrtc_options_and_image(fake_cupy, monkeypatch):
    cupy = fake_cupy(is_hip=False)
    rtc = _FakeRtc(hip=False)
    _, _, name = _compile(NvrtcDialect, rtc, monkeypatch)
    # compute capability 9.0 compiles for sm_90a (wgmma: flash_attention_sm90.cu)
    assert rtc.calls["flags"] == ["-std=c++17", "-DTESSERA_X=1", "--gpu-architecture=sm_90a",
                                  f"-I{KERNELS / 'cuda'}", f"-I{KERNELS / 'include'}"]
    assert cupy.loaded == [(1, b"cubin")]


# ---- template instances for both wave widths ---------------------------------------------

_WARP_ARG = {  # kernel -> position of its WARP template argument
    "tessera_matvec_warp": 1, "tessera_vecdot_part": 1, "tessera_vecdot_final": 1,
    "tessera_spmv_warp": 3, "tessera_adafactor_stats": 1, "tessera_adafactor_rmean": 1,
    "tessera_adafactor_usq": 1, "tessera_adafactor_apply": 1, "tessera_attention_fwd": 2,
    "tessera_attention_bwd_dq": 2, "tessera_attention_bwd_dkdv": 2, "tessera_cg_run": 3,
    "tessera_gmres_run": 3, "tessera_bicgstab_run": 3,
}


def _parse(name):
    kernel, _, args = name.partition("<")
    return kernel, [a.strip() for a in args.rstrip(">").split(",")] if args else []


@pytest.mark.parametrize("warp", [32, 64])
def test_instances_name_the_warp_width(warp):
    seen = set()
    for family in FAMILIES:
        for file, name in family.instances(warp):
            assert (KERNELS / "cuda" / file).is_file(), file
            kernel, args = _parse(name)
            seen.add(kernel)
            if kernel in _WARP_ARG:
                assert args[_WARP_ARG[kernel]] == str(warp), name
            else:  # kernels without a WARP parameter never name one
                assert str(warp) not in args, name
    assert set(_WARP_ARG) <= seen


def test_instances_at_64_are_those_at_32_with_the_warp_replaced():
    def by_width(warp):
        out = set()
        for family in FAMILIES:
            for file, name in family.instances(warp):
                kernel, args = _parse(name)
                if kernel in _WARP_ARG:
                    args[_WARP_ARG[kernel]] = "WARP"
                out.add((file, kernel, tuple(args)))
        return out

    assert by_width(64) == by_width(32)


@pytest.mark.parametrize("warp", [32, 64])
def test_every_launch_choice_is_an_instance(warp):
    """What a launcher picks at run time (lanes per row, 16-byte vectors, output dims per
    lane) is among the instances CI compiles for that width."""
    names = {n for family in FAMILIES for _, n in family.instances(warp)}
    rng = np.random.default_rng(7)
    cases = [(1, 1), (100, 2000), (5, 10**6), (10**6, 10**6), *rng.integers(1, 10**6, (20, 2))]
    for m, nnz in cases:
        lanes = cu_sparse.lanes_for(int(m), int(nnz), warp)
        assert 2 <= lanes <= min(cu_sparse.MAX_LANES, warp) and lanes & (lanes - 1) == 0
        for types_ in ("float, int, int", "double, long long, int"):
            assert f"tessera_spmv_warp<{types_}, {warp}, {lanes}>" in names
    for ct, size in [("float", 4), ("double", 8), ("tessera::cfloat", 8),
                     ("tessera::cdouble", 16)]:
        for vec in {1, max(1, 16 // size)}:
            assert f"tessera_matvec_warp<{ct}, {warp}, {vec}>" in names
    for width in (1, 31, 32, 33, 64, 65, 128, 200, 256, 257, 512, 1000):
        n = cu_attention._per_lane(width, warp)
        assert n in cu_attention.WIDTHS
        assert f"tessera_attention_fwd<float, float, {warp}, {n}>" in names
        if width <= cu_attention.WIDTHS[-1] * warp:
            assert n * warp >= width and (n == 1 or (n // 2) * warp < width)


def test_adafactor_geometry_at_both_widths():
    for warp in (32, 64):
        assert cu_optim.BLOCK % warp == 0 and cu_optim.BLOCK // warp <= warp  # block_sum
    assert cu_matvec.DOT_BLOCK % 64 == 0 and cu_matvec.DOT_BLOCK // 64 <= 64
    assert cu_sparse.BLOCK % 64 == 0


# ---- the CI compile step -----------------------------------------------------------------


def _ci_module():
    loader = importlib.machinery.SourceFileLoader("compile_kernels",
                                                  str(ROOT / ".ci" / "compile-kernels"))
    spec = importlib.util.spec_from_loader("compile_kernels", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_the_ci_unit_checks_the_wave_width():
    ci = _ci_module()
    unit = ci.unit_text("matvec.cu", ["tessera_matvec_warp<float, 64, 4>"], ci.wave_check(64))
    assert '#include "matvec.cu"' in unit
    assert "static_assert(__AMDGCN_WAVEFRONT_SIZE == 64" in unit
    assert "(void *)&tessera_matvec_warp<float, 64, 4>" in unit
    assert ci.FAMILIES == tuple(f.__name__.rsplit(".", 1)[1] for f in FAMILIES)
    assert ci.CUDA_FAMILIES == ("flash",)


def test_cuda_only_families_reach_nvcc_alone():
    """The flash family's instances (PTX mma.sync) go to nvcc; hipcc compiles its file as
    it is (empty under __HIPCC__), for either wave width."""
    ci = _ci_module()
    for file in ("flash_attention.cu", "flash_attention_sm90.cu"):
        nv = ci._instances(32, "nvcc")[file]
        assert nv and all(n.startswith("tessera_flash_") for n in nv)
        for warp in (32, 64):
            assert file not in ci._instances(warp, "hipcc")
        text = (KERNELS / "cuda" / file).read_text()
        assert "#if !defined(__HIPCC__)" in text and text.rstrip().endswith(
            "#endif  // !defined(__HIPCC__)")


def test_ci_fails_a_spilling_no_spill_kernel():
    """The flash kernels are compiled once more to sm_90a machine code with ptxas's report,
    and a report naming spilled bytes fails that compile (the function named)."""
    ci = _ci_module()
    assert ci.NO_SPILL_FAMILIES == ("flash",) and ci.SASS_ARCH == "sm_90a"
    log = ("ptxas info    : Compiling entry function '_Z3fooi' for 'sm_90'\n"
           "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Compiling entry function '_Z3bari' for 'sm_90'\n"
           "    8 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads\n")
    (line,) = ci.spill_report(log)
    assert line.startswith("_Z3bari: ") and "12 bytes spill stores" in line
    assert ci.spill_report(log.split("ptxas info    : Compiling entry function '_Z3bari'")[0]) == []


def test_ci_requires_hipcc_and_both_amd_targets():
    run = (ROOT / ".ci" / "run").read_text()
    assert "TESSERA_REQUIRE_COMPILERS=nvcc,hipcc,nvrtc python .ci/compile-kernels" in run
    assert "pip install nvidia-cuda-nvrtc" in run
    assert "apt-get install -y -qq hipcc libamdhip64-dev" in run
    text = (ROOT / ".ci" / "compile-kernels").read_text()
    assert 'default="gfx90a,gfx1030"' in text and '"hipcc", "--genco"' in text


def test_the_nvrtc_pass_takes_one_instance_of_each_kernel_and_element_type():
    """... and of each set of boolean template arguments (gmres.cu's ONE selects a
    column loop of its own)."""
    ci = _ci_module()
    names = ["k<float, int, 32>", "k<float, long long, 32>", "k<double, int, 32>",
             "j<float, 4>", "j<float, 8>", "h<float, 4, false>", "h<float, 8, false>",
             "h<float, 8, true>"]
    assert ci.nvrtc_names(names) == ["k<float, int, 32>", "k<double, int, 32>", "j<float, 4>",
                                     "h<float, 4, false>", "h<float, 8, true>"]
    gm = ci._instances(32, "nvrtc")["gmres.cu"]
    assert set(ci.nvrtc_names(gm)) == {
        n for n in gm if "int, int, 32, 256, false>" in n or "int, int, 32, 512, true>" in n}
    assert len(ci.nvrtc_names(gm)) == 7  # (four element types; one reduction: three)


def _kernel_tree(tmp_path, files: dict):
    """A kernels tree of the shared headers and ``files`` (name -> text) in cuda/."""
    tree = tmp_path / "kernels"
    shutil.copytree(KERNELS / "include", tree / "include")
    (tree / "cuda").mkdir()
    for name, text in files.items():
        (tree / "cuda" / name).write_text(text)
    return tree


_NVRTC = _ci_module().nvrtc_library()


@pytest.mark.skipif(_NVRTC is None, reason="libnvrtc not found (CI installs NVIDIA's wheel: "
                    "pip install nvidia-cuda-nvrtc)")
def test_ci_fails_a_kernel_that_nvrtc_rejects(tmp_path):
    """A generic lambda in a kernel: nvcc compiles it, NVRTC (the runtime's compiler)
    does not ('host functions are not allowed in JIT mode'); the NVRTC pass fails it."""
    kernel = ("template <typename T> __global__ void k(T *y)\n"
              "{\n    const auto f = [&](%s v) { return v + T(1); };\n    y[0] = f(y[0]);\n}\n"
              "template __global__ void k<float>(float *);\n")
    tree = _kernel_tree(tmp_path, {"lam.cu": kernel % "auto", "plain.cu": kernel % "T"})
    cmd = [sys.executable, str(ROOT / ".ci" / "compile-kernels"), "--kernels", str(tree),
           "--cuda-arch", "", "--hip-arch", "", "--jobs", "2"]
    env = {"TESSERA_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/bin",
           "TESSERA_NVRTC": _NVRTC, "TESSERA_REQUIRE_COMPILERS": "nvrtc"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "ok plain.cu for compute_90a (nvrtc)" in out
    assert "FAILED lam.cu for compute_90a (nvrtc)" in out and "JIT mode" in out


_HIPCC = shutil.which("hipcc")


@pytest.mark.skipif(_HIPCC is None, reason="hipcc not installed (CI installs Debian's: "
                    "apt-get install hipcc libamdhip64-dev)")
def test_ci_fails_on_a_kernel_that_does_not_compile_for_amd(tmp_path):
    tree = _kernel_tree(tmp_path, {
        "good.cu": ('#include "tessera/warp.cuh"\n'
                    "template <int WARP> __global__ void k(float *y)\n"
                    "{ y[0] = tessera::warp_sum<WARP>(y[0]); }\n"
                    "template __global__ void k<64>(float *);\n"),
        # Compiles for CUDA; not for HIP (an intrinsic HIP lacks).
        "bad.cu": ('#include "tessera/types.cuh"\n'
                   "__global__ void k(float *y) {\n"
                   "#if defined(__HIPCC__)\n    y[0] = __no_such_intrinsic(y[0]);\n#else\n"
                   "    y[0] = 1.0f;\n#endif\n}\n")})
    cmd = [sys.executable, str(ROOT / ".ci" / "compile-kernels"), "--kernels", str(tree),
           "--cuda-arch", "", "--hip-arch", "gfx90a,gfx1030", "--nvrtc-arch", "",
           "--jobs", "2"]
    env = {"TESSERA_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/usr/local/bin:/bin"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "ok good.cu for gfx90a (0 instances)" in out
    assert "FAILED bad.cu for gfx90a" in out and "FAILED bad.cu for gfx1030" in out
    assert "__no_such_intrinsic" in out  # the log is printed
    # The failures are not cached: a second run fails again; the good file is cached.
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1 and "ok (cached) good.cu for gfx90a" in proc.stdout


@pytest.mark.skipif(_HIPCC is None, reason="hipcc not installed (CI installs Debian's: "
                    "apt-get install hipcc libamdhip64-dev)")
def test_a_wave64_instance_does_not_pass_for_a_wave32_target(tmp_path):
    ci = _ci_module()
    src = tmp_path / "unit.cu"
    for arch, warp, ok in [("gfx1030", 64, False), ("gfx1030", 32, True), ("gfx90a", 32, False),
                           ("gfx90a", 64, True)]:
        src.write_text(ci.unit_text("matvec.cu", [f"tessera_matvec_warp<float, {warp}, 1>"],
                                    ci.wave_check(warp)))
        proc = subprocess.run(
            ["hipcc", "--genco", "-x", "hip", "-std=c++17", f"--offload-arch={arch}",
             "-I", str(KERNELS / "cuda"), "-I", str(KERNELS / "include"), "-o",
             str(tmp_path / "out"), str(src)],
            capture_output=True, text=True, env={"HIP_PLATFORM": "amd", "PATH": "/usr/bin:/bin"},
            timeout=300)
        assert (proc.returncode == 0) is ok, (arch, warp, proc.stderr)
        if not ok:
            assert f"the warp width {warp} its instances are named for" in proc.stderr


# ---- no hard-coded warp width ------------------------------------------------------------

# Literal 32s (and 31, 0x1f, 32-bit lane masks, shifts by 5) in kernel code and launchers
# that are not a warp width, each with its reason: (file, code fragment, count, reason).
# Shifts by 32 (the halves of a 64-bit word) are allowed everywhere.
EXCEPTIONS = [
    ("kernels/include/tessera/warp.cuh",
     'static_assert(WARP <= 32, "CUDA warps are 32 lanes wide")', 3,
     "the CUDA branch's bound: CUDA's warps are 32 lanes wide (hardware), WARP stays a "
     "parameter"),
    ("kernels/include/tessera/warp.cuh", "0xffffffffu", 3,
     "the full-warp mask of CUDA's *_sync shuffles (one bit per lane of a 32-lane CUDA "
     "warp), CUDA branch only; HIP's shuffles take no mask"),
    ("kernels/cuda/optim.cu", "F_DECOUPLED = 32", 1, "a launch flag bit"),
    ("kernels/cuda/optim.cu", "constexpr int COL_TILE = 32", 1,
     "Adafactor's column tile width (coalesced reads), not a warp width"),
    ("kernels/cuda/optim.cu", "0xffffffffLL", 4,
     "the tensor index in the low 32 bits of an item's first word (one per Adafactor "
     "phase)"),
    ("kernels/include/tessera/flash.cuh", "constexpr int WARP = 32", 1,
     "the lanes of mma.sync's and wgmma's fragments: NVIDIA's instruction set, in a "
     "CUDA-only header"),
    ("kernels/include/tessera/flash.cuh", "0xffffffffu", 1,
     "the full-warp mask of CUDA's *_sync shuffles, in a CUDA-only header"),
    ("backends/_cupy/flash.py", "MMA_WARP = 32", 1,
     "flash_attention.cu's WARP, mirrored (mma.sync's 32 lanes; CUDA-only family)"),
    ("backends/_cupy/flash.py", "DKDV_DROP_TILES = {64: Tile(1, 64, 2), 128: Tile(1, 32, 2)}",
     1,
     "a tile of 32 queries (the dkdv kernel's BQ), not a warp width"),
    ("backends/_cupy/flash.py", "TILES = {64: Tile(2, 64, 1), 128: Tile(2, 32, 1)}", 1,
     "a tile of 32 keys (the forward's BN), not a warp width"),
    ("kernels/cuda/gmres.cu", "constexpr int CACHE_RMAX = 32", 1,
     "the longest restart whose rows the row cache keeps (a shared-memory size)"),
    ("backends/_cupy/gmres.py", "ONE_REDUCTION_RMAX = 32", 1,
     "gmres.cu's CACHE_RMAX: the longest restart of the one-reduction column"),
    ("kernels/cuda/attention.cu", "constexpr int DC = 32", 1,
     "columns per staged dot-product chunk (a shared-memory tile width)"),
    ("backends/_cupy/optim.py", "F_NESTEROV, F_DECOUPLED, F_AMSGRAD, F_LERP_HIGH = 16, 32, 64, 128",
     1, "launch flag bits (optim.cu's)"),
    ("backends/_cupy/optim.py", "COL_TILE = 32", 1, "optim.cu's COL_TILE, mirrored"),
    ("backends/_cupy/sparse.py", "MAX_LANES = 32", 1,
     "the cap of lanes per CSR row (lanes_for's measured rule); the warp caps it separately"),
]

_SCANNED = ("kernels/cuda/*.cu", "kernels/include/tessera/*.cuh", "kernels/hip/*",
            "backends/_cupy/*.py", "backends/cuda/*.py", "backends/rocm/*.py")
_C_LITERAL = re.compile(r"(?<![\w.])(?:32|31|0x1[fF])[uUlL]*(?![\w.])|0x[fF]{8}(?![fF\w])"
                        r"|0x[fF]{8}[uUlL]+|(?:<<|>>)\s*5(?![\w.])")
_SHIFT_32 = re.compile(r"(?:<<|>>)\s*32(?![\w.])")
_DOCSTRING = ('"""', "'''")  # prose (docstrings), not code


def _strip_c(text: str) -> list:
    """The code lines of a C++ source: comments and string literals blanked."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)
    return [re.sub(r'"(?:\\.|[^"\\])*"', '""', re.sub(r"//.*", "", ln))
            for ln in text.splitlines()]


def _c_hits(path) -> list:
    raw = path.read_text().splitlines()
    hits = []
    for no, line in enumerate(_strip_c(path.read_text())):
        for m in _C_LITERAL.finditer(_SHIFT_32.sub("", line)):
            hits.append((no + 1, raw[no].strip(), m.group()))
    return hits


def _py_hits(path) -> list:
    """Integer literals 31/32 in code, and template arguments 32 inside strings."""
    hits = []
    lines = path.read_text().splitlines()
    toks = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    for i, tok in enumerate(toks):
        if tok.type == tokenize.NUMBER:
            try:
                value = int(tok.string.replace("_", ""), 0)
            except ValueError:
                continue
            prev = toks[i - 1].string if i else ""
            if value in (31, 32) and prev not in ("<<", ">>", "**"):
                hits.append((tok.start[0], lines[tok.start[0] - 1].strip(), tok.string))
        elif tok.type in _STRING_TOKENS and not tok.string.startswith(_DOCSTRING) \
                and re.search(r"[<,]\s*32\s*[,>]", tok.string):
            hit = (tok.start[0], lines[tok.start[0] - 1].strip(), "template arg 32")
            if hit not in hits:  # an f-string is several tokens from Python 3.12 on
                hits.append(hit)
    return hits


# Python 3.12 tokenizes an f-string's literal parts as FSTRING_MIDDLE, not STRING.
_STRING_TOKENS = (tokenize.STRING,) + (
    (tokenize.FSTRING_MIDDLE,) if hasattr(tokenize, "FSTRING_MIDDLE") else ())


def test_no_kernel_or_launcher_hard_codes_a_warp_width_of_32():
    allowed = {(f, frag): n for f, frag, n, _ in EXCEPTIONS}
    found: dict = {}
    unexplained = []
    scanned = 0
    for pattern in _SCANNED:
        for path in sorted(ROOT.glob(pattern)):
            rel = str(path.relative_to(ROOT))
            scanned += 1
            for no, line, what in (_py_hits(path) if path.suffix == ".py" else _c_hits(path)):
                frags = [frag for (f, frag) in allowed if f == rel and frag in line]
                if frags:
                    found[(rel, frags[0])] = found.get((rel, frags[0]), 0) + 1
                else:
                    unexplained.append(f"{rel}:{no}: {what!r} in {line}")
    assert scanned >= 15
    assert not unexplained, "a literal warp width (use the WARP parameter / the device's " \
        "warp_size): " + "; ".join(unexplained)
    # Each exception is still there, as often as listed (a stale entry is an error too).
    assert found == allowed


def test_the_grep_catches_a_hard_coded_warp(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("// 32 in a comment is fine\n"
                   "const int lane = threadIdx.x % 32;\n"
                   "const int w = threadIdx.x >> 5;\n"
                   "v += __shfl_down_sync(0xffffffff, v, 16, 32);\n"
                   "const unsigned long long hi = x >> 32;\n")
    assert [no for no, _, _ in _c_hits(src)] == [2, 3, 4, 4]
    py = tmp_path / "l.py"
    py.write_text('WARP = 32\nname = f"k<{ct}, 32, {vec}>"\nhi = x >> 32\n# 32\n')
    assert [no for no, _, _ in _py_hits(py)] == [1, 2]
