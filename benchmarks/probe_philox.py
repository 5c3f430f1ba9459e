"""Probe: the rate of Philox4x32-10 blocks on a CUDA device, two ways of forming a round's
products, and the CUDA ``dropout_mask`` launcher's rate.

The wgmma attention forward's dropout costs ~5,000 cycles a 128 x 128 tile on an H100
whether the blocks run in the softmax's loop or in a warpgroup of their own. This probe
measures the blocks' rate alone (figures: benchmarks/NOTES.md, "Philox4x32-10's rate"):

- ``wide``: ``tessera::philox4x32_10`` (``kernels/include/tessera/philox.cuh``): each
  product's high and low words from one ``IMAD.WIDE.U32``;
- ``hilo``: the same rounds with the high word by ``mul.hi`` and the low word as
  ``x (M - 1) + x`` (``mad.lo``), which ptxas keeps apart: ``IMAD.HI.U32`` + ``IMAD``
  (nvcc 13.0, sm_90a: 18 and 19 of them against 48 IMAD.WIDE for the same loop).

Each thread computes ``--iters`` x ILP blocks (ILP independent chains) and XORs every
word into one output word; both variants must give the same words, and ``hilo``'s blocks
must equal the NumPy backend's. Two launch shapes: every multiprocessor full (2,048
threads) and one warpgroup a multiprocessor (the attention generator's). Rates by CUDA
events (medians of 15 after 3 warm-up runs), in blocks a clock a multiprocessor at the
device's reported clock.

    PYTHONPATH=<installed>:<repo> python3 -P -m benchmarks.probe_philox
"""

from __future__ import annotations

import argparse

import numpy as np

from .probe_krylov_grid import _events  # CUDA events over calls, median, us

SOURCE = r"""
#include "tessera/philox.cuh"

// Philox4x32-10 with each product's low word as x (M - 1) + x (see the probe's docstring).
__device__ __forceinline__ uint4 philox_hilo(uint4 x, uint2 k)
{
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k.x += tessera::PHILOX_W0;
            k.y += tessera::PHILOX_W1;
        }
        unsigned lo0, lo1;
        const unsigned hi0 = __umulhi(tessera::PHILOX_M0, x.x);
        const unsigned hi1 = __umulhi(tessera::PHILOX_M1, x.z);
        asm("mad.lo.u32 %0, %1, %2, %1;" : "=r"(lo0) : "r"(x.x), "n"(tessera::PHILOX_M0 - 1));
        asm("mad.lo.u32 %0, %1, %2, %1;" : "=r"(lo1) : "r"(x.z), "n"(tessera::PHILOX_M1 - 1));
        x = make_uint4(hi1 ^ x.y ^ k.x, lo1, hi0 ^ x.w ^ k.y, lo0);
    }
    return x;
}

template <int V> __device__ __forceinline__ uint4 block(unsigned long long b, uint2 key,
                                                         unsigned off_lo, unsigned off_hi)
{
    const uint4 c = make_uint4((unsigned)b, (unsigned)(b >> 32), off_lo, off_hi);
    return V == 0 ? tessera::philox4x32_10(c, key) : philox_hilo(c, key);
}

// Thread t: blocks t * iters * ILP + i * ILP + j (i < iters, j < ILP), every word XORed.
template <int V, int ILP>
__global__ void rate(unsigned *out, unsigned seed_lo, unsigned seed_hi, unsigned off_lo,
                     unsigned off_hi, int iters)
{
    const unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const uint2 key = make_uint2(seed_lo, seed_hi);
    unsigned acc = 0;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < ILP; ++j) {
            const uint4 u = block<V>((t * iters + i) * ILP + j, key, off_lo, off_hi);
            acc ^= u.x ^ u.y ^ u.z ^ u.w;
        }
    }
    out[t] = acc;
}

// The four words of blocks first .. first + n - 1 (the check against NumPy).
template <int V>
__global__ void words(uint4 *out, unsigned long long first, int n, unsigned seed_lo,
                      unsigned seed_hi, unsigned off_lo, unsigned off_hi)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n)
        out[t] = block<V>(first + t, make_uint2(seed_lo, seed_hi), off_lo, off_hi);
}
"""

VARIANTS = {"wide": 0, "hilo": 1}
SEED, OFFSET = 0x1234_5678_9ABC_DEF0, 77


def main(argv=None):
    ap = argparse.ArgumentParser(prog="benchmarks.probe_philox")
    ap.add_argument("--iters", type=int, default=64)
    ap.add_argument("--ilp", type=int, default=4)
    args = ap.parse_args(argv)
    import cupy as cp
    from tessera_array.backends._cupy import _kernels
    from tessera_array.backends._cupy import philox as cuda_philox
    from tessera_array.backends.numpy import philox as np_philox

    import tessera_array as xp
    from tessera_array import _dispatch
    from tessera_array.random import dropout_keep_threshold

    # a kernel lookup registers the cuda backend's kernels (and so its build stack)
    _dispatch.lookup("attention_fwd", xp.zeros(1, device="cuda:0").device, xp.bfloat16)
    dev = cp.cuda.Device(0)
    sms = dev.attributes["MultiProcessorCount"]
    clock = dev.attributes["ClockRate"] * 1e3  # Hz, the reported (boost) clock
    ilp = args.ilp
    names = [f"rate<{v}, {ilp}>" for v in VARIANTS.values()] + [
        f"words<{v}>" for v in VARIANTS.values()]
    mod = cp.RawModule(code=SOURCE, options=("-std=c++17", f"-I{_kernels.include_dir()}"),
                       name_expressions=names)
    seed = (SEED & 0xFFFFFFFF, SEED >> 32)
    off = (OFFSET & 0xFFFFFFFF, OFFSET >> 32)

    first, n = 2**33 - 5, 1000  # across a carry into the counter's high word
    want = np_philox._blocks(np.array([first], dtype=np.uint64), n, OFFSET, SEED).reshape(n, 4)
    for vname, v in VARIANTS.items():
        got = cp.full((n, 4), 0xDEADBEEF, dtype=cp.uint32)  # poisoned
        mod.get_function(f"words<{v}>")(((n + 127) // 128,), (128,),
                                        (got, np.uint64(first), np.int32(n), *map(np.uint32,
                                                                                 seed + off)))
        ok = np.array_equal(cp.asnumpy(got), want)
        print(f"{vname}: blocks equal NumPy's: {ok}", flush=True)

    for label, grid, threads in (("full", sms * 8, 256), ("one warpgroup an SM", sms, 128)):
        outs = {}
        for vname, v in VARIANTS.items():
            fn = mod.get_function(f"rate<{v}, {ilp}>")
            out = cp.full(grid * threads, 0xDEADBEEF, dtype=cp.uint32)
            call_args = (out, *map(np.uint32, seed + off), np.int32(args.iters))
            launch = ((grid,), (threads,), call_args)
            us = _events(lambda fn=fn, launch=launch: fn(*launch))
            outs[vname] = cp.asnumpy(out)
            blocks = grid * threads * args.iters * ilp
            per_clk = blocks / (us * 1e-6 * clock) / sms
            print(f"{label}, ILP {ilp}: {vname} {blocks / us * 1e-3:.1f} G blocks/s, "
                  f"{per_clk:.3f} blocks a clock an SM ({us:.0f} us)", flush=True)
        print(f"{label}: the variants' words equal: "
              f"{np.array_equal(outs['wide'], outs['hilo'])}", flush=True)

    shape = (8, 16, 2048, 2048)
    blocks = int(np.prod(shape)) // 16  # a main block for sixteen elements
    us = _events(lambda: cuda_philox.dropout_mask(shape, SEED, OFFSET,
                                                  dropout_keep_threshold(0.1), device=dev))
    print(f"dropout_mask {shape}: {us:.0f} us, {blocks / us * 1e-3:.1f} G blocks/s, "
          f"{blocks / (us * 1e-6 * clock) / sms:.3f} blocks a clock an SM", flush=True)


if __name__ == "__main__":
    main()
