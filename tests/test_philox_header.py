"""The dropout contract of ``kernels/include/tessera/philox.cuh``, run on the CPU.

The header's functions are integer-only (``__umulhi``, shifts, the SWAR byte compares of
``bytes_above`` / ``bytes_equal``, the ties' refinement), so with ``__device__`` and the
CUDA vector types stood in for, a host C++ compiler builds them as they are. Here
``keep16`` (the shared blocks of every CUDA and HIP attention kernel), ``dropout_keep``
(their per-element path) and ``bytes16`` with ``settle_round`` (the backward's ties,
settled a round at a time) are checked bit for bit against the NumPy backend's
``keep_block`` over thresholds at the byte's edges (t8 = 0 and 255, no fraction, a zero
threshold) and block indices across 2**32, where CI has no GPU to run them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _cbuild import REQUIRED
from tessera_array.backends.numpy import philox as np_philox

from tessera_array.random import dropout_keep_threshold

HEADER = Path(__file__).resolve().parents[1] / "kernels" / "include" / "tessera" / "philox.cuh"

# What the header takes from CUDA, for a host compiler.
SHIM = """#pragma once
#define __device__
#define __forceinline__ inline
#define __noinline__
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline unsigned __umulhi(unsigned a, unsigned b)
{
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
inline int __ffs(int x) { return __builtin_ffs(x); }
"""

# Arguments: seed offset t8 frac n0 count; prints, for n = n0 .. n0 + count - 1, keep16(n),
# dropout_keep's sixteen decisions of block n (as a word) and bytes16's bits of block n
# with its ties settled by tie_words / settle_round, one lane alone (its rounds until it
# has no tie word left), block n at [i & 1][i >> 1 & 1] of a 2 x 2 share whose other
# blocks are n + 1, n + 2**32 + 3, n + 5 (so a round picks its block among four).
DRIVER = """#include "tessera/philox.cuh"
#include <cstdio>
#include <cstdlib>
int main(int argc, char **argv)
{
    const unsigned long long seed = strtoull(argv[1], 0, 0), offset = strtoull(argv[2], 0, 0);
    const tessera::PhiloxKey key{(unsigned)seed, (unsigned)(seed >> 32), (unsigned)offset,
                                 (unsigned)(offset >> 32), (unsigned)strtoul(argv[3], 0, 0),
                                 (unsigned)strtoul(argv[4], 0, 0)};
    const unsigned long long n0 = strtoull(argv[5], 0, 0);
    for (int i = 0; i < atoi(argv[6]); ++i) {
        unsigned one = 0;
        for (int e = 0; e < 16; ++e)
            one |= (unsigned)tessera::dropout_keep(16 * (n0 + i) + e, key) << e;
        const unsigned long long n = n0 + i;
        const unsigned long long others[3] = {n + 1, n + (1ull << 32) + 3, n + 5};
        unsigned long long blocks[2][2];
        const int ma = i & 1, mk = (i >> 1) & 1;
        for (int a = 0, o = 0; a < 2; ++a)
            for (int k = 0; k < 2; ++k)
                blocks[a][k] = (a == ma && k == mk) ? n : others[o++];
        unsigned gt[2][2], eq[2][2];
        for (int a = 0; a < 2; ++a)
            for (int k = 0; k < 2; ++k)
                tessera::bytes16(blocks[a][k], key, gt[a][k], eq[a][k]);
        unsigned words = tessera::tie_words(eq);
        while (words)
            words = tessera::settle_round(gt, eq, [&](int a, int k) { return blocks[a][k]; },
                                          words, key);
        for (int a = 0; a < 2; ++a)
            for (int k = 0; k < 2; ++k)
                if (gt[a][k] != tessera::keep16(blocks[a][k], key))
                    return 3;  // a block other than n settled wrong
        printf("%u %u %u\\n", tessera::keep16(n, key), one, gt[ma][mk]);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        why = "building philox.cuh on the host needs a C++ compiler (g++)"
        if REQUIRED:
            pytest.fail(f"TESSERA_REQUIRE_COMPILED=1: {why}")
        pytest.skip(why)
    root = tmp_path_factory.mktemp("philox_header")
    (root / "tessera").mkdir()
    (root / "tessera" / "types.cuh").write_text(SHIM)
    (root / "tessera" / "philox.cuh").write_text(HEADER.read_text())
    (root / "driver.cpp").write_text(DRIVER)
    exe = root / "driver"
    proc = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", f"-I{root}",
                           str(root / "driver.cpp"), "-o", str(exe)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return exe


P_CASES = [0.1, 0.3, 0.5, 0.5 + 2**-8, 1e-3, 0.999, 1e-13]
# t8 25 and 76 with a fraction; t8 128 and 129 without; t8 0 with one; t8 255; threshold 0


@pytest.mark.parametrize("p", P_CASES)
@pytest.mark.parametrize("n0", [0, 2**32 - 3, 2**40 + 7])
def test_keep16_and_dropout_keep_are_the_contract(driver, p, n0):
    seed, offset, count = 0x9E3779B97F4A7C15, 2**33 + 5, 96
    thr = dropout_keep_threshold(p)
    out = subprocess.run([str(driver), str(seed), str(offset), str(thr >> 32),
                          str(thr & 0xFFFFFFFF), str(n0), str(count)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    got = np.array([[int(v) for v in line.split()] for line in out.splitlines()])
    blocks = np.arange(n0, n0 + count, dtype=np.uint64)
    want = np_philox.keep_block(seed, offset, thr, 1, 16, blocks, 0, 1, 0, 16)[:, 0, :]
    words = (want * (1 << np.arange(16))).sum(axis=1)
    np.testing.assert_array_equal(got[:, 0], words)  # keep16
    np.testing.assert_array_equal(got[:, 1], words)  # dropout_keep, element by element
    np.testing.assert_array_equal(got[:, 2], words)  # bytes16, then settle_round
    if 0 < thr < 255 << 32:  # some elements kept, some dropped
        assert 0 < want.mean() < 1
