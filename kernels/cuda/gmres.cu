// gmres.cu: restarted GMRES as one persistent cooperative kernel, the Arnoldi process,
//           the Givens rotations, the small triangular solve and every stopping test on
//           the device (tessera_array.sparse.linalg.gmres on a CUDA device; the launcher
//           is backends/_cupy/gmres.py, the contract tessera_array/sparse/linalg/_fused.py).
//
// Computes   SciPy's gmres (left preconditioning, its inner tolerance control) on x with
//            a stored A and optional stored M (dense or CSR), real or complex T: the
//            iteration of tessera_array/sparse/linalg/_gmres.py (_gmres_loop), cycle
//            for cycle. Entry E_INIT (the solve's first launch): r = b - A x (b when x
//            is zero), ||r||, the first test (< atol: converged; not finite: -20); with
//            rtol >= 0 (x zero and no M, ||b|| unread by the host) atol = max(atol,
//            rtol ||b||) and the first inner tolerance come from that ||r|| = ||b||, and
//            ||b|| = 0 stops it, converged (atol is then a state word; x is zeroed
//            here). Then
//            each restart cycle: v0 = M r, V[0] = v0 / ||v0||; for each column j:
//            w = M A V[j]; h0 = ||w|| (not finite: -20); w orthogonalized against
//            V[0..j] by classical Gram-Schmidt twice (CGS2: h = V^H w, w -= V h, twice,
//            the two projections summed); h1 = ||w||, a breakdown when h1 <= eps h0
//            (else V[j+1] = w / h1); the column rotated by the earlier Givens rotations,
//            a new rotation (LAPACK's lartg, as _gmres._lartg), presid = |g[j+1]|; the
//            column ends the cycle when presid <= ptol, at a breakdown, at the restart
//            length or at the inner-iteration limit (callback_type 'legacy'). Then the
//            triangular solve H y = g (back substitution, a zero diagonal skipped as the
//            host's), x += V y, r = b - A x, ||r|| and the outer tests, SciPy's update of
//            ptol. A launch runs at most `cycles` cycles; the state words carry the solve
//            to the next launch.
// Why CGS2   Modified Gram-Schmidt (the host loop's) needs j + 1 dependent dot products a
//            column: j + 1 grid-wide reductions, each a grid barrier. Classical Gram-
//            Schmidt computes the j + 1 dot products together (one barrier), and doing
//            it twice restores the orthogonality MGS keeps (Giraud, Langou, Rozloznik
//            2005: CGS2 loses orthogonality to O(eps), as a second MGS pass does). Three
//            barriers a column (four with M): the two projections, and ||w|| with w
//            whole. The next column's product reads w unscaled and scales its rows by
//            1 / ||w|| (A (w / h1) as (A w) / h1), and V[j+1] = w / h1 is written past
//            that column's first barrier, when no block reads w's old rows; the lead's
//            rotations run meanwhile, and a column's presid <= ptol is tested past the
//            next column's first barrier (that column, begun, is dropped). Iterates
//            agree with the host loop's to rounding, not bit for bit.
// Two barriers (pipe, the launcher's choice for small bases): the raw products Z[k] =
//            M A V[k] are kept; after the second projection's barrier (U = w - V h whole)
//            h1 = sqrt(||U||^2 - ||g||^2) (||U||^2 summed with g = V^H U), V[j+1] = (U -
//            V g) / h1, and the next product is (M A U - Z g) / h1, so ||w|| needs no
//            barrier of its own. Checked in NumPy against CGS2's direct norm: the same
//            inner iterations (benchmarks/NOTES.md). A column's Hessenberg entries and
//            rotation are made by block 0's second warp while its thread 0 waits at the
//            next column's first barrier (off the path every block waits on), so its
//            presid <= ptol is tested past the next column's second barrier; the
//            cycle's last column rotates at once.
// One reduction (the instances with ONE, launched with pipe 2: two barriers, the row
//            cache in every block, restart <= CACHE_RMAX, T not cdouble): CGS2 with the second projection delayed by a column (DCGS2,
//            Swirydowicz et al. 2020). The candidate u (projected once, not normalized)
//            is multiplied as it is, P = M A u; one reduction takes g = V^H u, a = u^H u,
//            p = V^H P, q = u^H P and c = Z^H u. Then the last column completes (H's
//            column t + g, beta = sqrt(a - ||g||^2) below it, h0 = sqrt(||t||^2 + a)),
//            V[s] = (u - V g) / beta, Z[s] = (P - Z g) / beta, and the new column's
//            first projection needs no reduction: t = (p - H g) / beta, t_s = (q - c^H g
//            - g^H p + g^H H g) / beta^2, with H = V^H M A V, the unrotated Hessenberg
//            so far, kept in every block. The next candidate is Z[s] - V t. A column's
//            presid <= ptol is tested two reductions after its own (the column begun
//            is dropped); the cycle's first column takes one reduction more. NumPy's
//            model of it (benchmarks/model_gmres_columns.py): SciPy's iteration counts.
// Layout     b, x, r, z (M's products): contiguous vectors of n elements. V: the basis,
//            restart + 1 rows of n contiguous elements (row j at V + j * n). A dense
//            operand: row i at val + i * ld, its n columns contiguous; a CSR one: data
//            val, column indices idx (I), row starts ptr (P). y: restart values of T (the
//            triangular solve's solution, rounded to T). part (T): 2 * SLOTS *
//            gridDim.x partial sums (two regions, used in turn; RowGrid's block-major
//            layout, 16-byte aligned: the workspace's start). U (n) and Z (restart
//            rows of n): the two-barrier form's (pipe; else unused, may be null);
//            with stage_v, each block copies U to its dynamic shared memory (n
//            elements, the launch's) for the column's product. With a_cols > 0 (a
//            dense A, a warp a row), each block keeps its rows' first a_cols columns
//            of A in its dynamic shared memory for the launch (row k of the block at
//            k * a_cols, after U's copy, 16-byte aligned, where stage_v).
//            small (double): the rotated Hessenberg columns (restart x (restart + 1)
//            of S: double, or two doubles for complex T), then two control words (g,
//            the rotations and the column being rotated live in block 0's shared
//            memory for a cycle). st
//            (double): the state words W_*, then this launch's ||r|| history (cycles +
//            1), then its presid history (cycles * restart). bar: the grid barrier's
//            counter, zero when the solve starts.
// Launch     cooperative, every block resident (the launcher sizes the grid from the
//            occupancy), 1-D blocks of BLOCK threads. Block k owns the rows [k c, (k + 1)
//            c), c = ceil(n / gridDim.x): it computes their products (a row per warp,
//            `lanes` lanes a row, or for CSR a row per thread with four rows in flight)
//            and every vector update and partial dot product of them, so only what
//            another block reads needs a grid barrier. Dot products: RowGrid's partial
//            sums, reduced after the barrier by every block in one order, so every
//            thread holds the same values and takes the same decisions. The small
//            problem (rotations, back substitution) is block 0's thread 0's, in double;
//            the others read its result past the next barrier. The grid depends on n
//            and the device only: the bits repeat, and do not depend on how many
//            cycles a launch runs.
// Accumulates in T (float32 systems sum in float, as BLAS and SciPy do); norms are the
//            root in T's real type, then taken to double (the host loop's float()); the
//            small problem in double (complex: two doubles), as the host loop's Python
//            floats; y rounded to T before x += V y.
// Numerics   Every product and sum rounded on its own (types.cuh: no fused multiply-add);
//            w -= V h as the two-step axpy term by term where a block has many rows, as
//            w - (V h) with V h a warp's tree sum where it has at most a row a warp;
//            complex quotients by Smith's algorithm.
// Reference  Y. Saad and M. H. Schultz, "GMRES: A Generalized Minimal Residual Algorithm
//            for Solving Nonsymmetric Linear Systems", SIAM J. Sci. Stat. Comput. 7(3),
//            1986; L. Giraud, J. Langou and M. Rozloznik, "The loss of orthogonality in
//            the Gram-Schmidt orthogonalization process", Comput. Math. Appl. 50, 2005;
//            SciPy's scipy/sparse/linalg/_isolve/iterative.py (the inner tolerance rule);
//            K. Swirydowicz, J. Langou, S. Ananthan, U. Yang and S. Thomas, "Low
//            synchronization Gram-Schmidt and generalized minimal residual algorithms",
//            Numer. Linear Algebra Appl. 28(2), 2021 (DCGS2).

#include "tessera/types.cuh"
#include "tessera/warp.cuh"
#include "tessera/persistent.cuh"

namespace tessera {
namespace gmk {

// Entry points, state words and status values: the launcher's (backends/_cupy/gmres.py).
constexpr int E_INIT = 0, E_CYCLE = 1;
constexpr int W_STATUS = 0, W_ITER = 1, W_INNER = 2, W_RNORM = 3, W_PTOL = 4, W_PMAX = 5,
              W_PRESID = 6, W_XPOINTS = 7, W_NHIST = 8, W_NPR = 9, W_ATOL = 10, WORDS = 11;
constexpr int S_RUNNING = 1, S_MAXITER = 2, S_CONVERGED = 0, S_NONFINITE = -20;
constexpr int S_FORM = 3;  // an instance of one reduction launched where its rows do not fit
constexpr int RMAX = 128;  // the longest restart
constexpr int SLOTS = RMAX + 4;  // a block's partial sums (RMAX + 2; a multiple of 4: RowGrid)
constexpr int CACHE_RMAX = 32;   // the longest restart whose rows a block keeps (row cache)

// The small problem's scalar: double for real T, two doubles for complex T.
template <typename T> struct small_of { typedef double type; };
template <> struct small_of<cfloat> { typedef cdouble type; };
template <> struct small_of<cdouble> { typedef cdouble type; };

__device__ __forceinline__ double to_small(float v) { return (double)v; }
__device__ __forceinline__ double to_small(double v) { return v; }
__device__ __forceinline__ cdouble to_small(cfloat v)
{
    return cdouble{(double)v.re, (double)v.im};
}
__device__ __forceinline__ cdouble to_small(cdouble v) { return v; }
template <typename T> __device__ __forceinline__ T from_small(double v) { return T(v); }
template <> __device__ __forceinline__ cfloat from_small<cfloat>(double v)
{
    return cfloat{(float)v, 0.0f};
}
template <> __device__ __forceinline__ cdouble from_small<cdouble>(double v)
{
    return cdouble{v, 0.0};
}
template <typename T> __device__ __forceinline__ T from_small(cdouble v);
template <> __device__ __forceinline__ cfloat from_small<cfloat>(cdouble v)
{
    return cfloat{(float)v.re, (float)v.im};
}
template <> __device__ __forceinline__ cdouble from_small<cdouble>(cdouble v) { return v; }

template <typename S> __device__ __forceinline__ S small_real(double v) { return v; }
template <> __device__ __forceinline__ cdouble small_real<cdouble>(double v)
{
    return cdouble{v, 0.0};
}
__device__ __forceinline__ double conjugate(double v) { return v; }
__device__ __forceinline__ cdouble conjugate(cdouble v) { return cdouble{v.re, -v.im}; }
__device__ __forceinline__ double magnitude(double v) { return fabs(v); }
__device__ __forceinline__ double magnitude(cdouble v) { return hypot(v.re, v.im); }
__device__ __forceinline__ bool is_zero(double v) { return v == 0.0; }
__device__ __forceinline__ bool is_zero(cdouble v) { return v.re == 0.0 && v.im == 0.0; }
__device__ __forceinline__ double neg(double v) { return -v; }
__device__ __forceinline__ cdouble neg(cdouble v) { return cdouble{-v.re, -v.im}; }
__device__ __forceinline__ double over(double v, double d) { return div(v, d); }  // v / real d
__device__ __forceinline__ cdouble over(cdouble v, double d)
{
    return cdouble{div(v.re, d), div(v.im, d)};
}
__device__ __forceinline__ double times(double c, double v) { return mul(c, v); }  // real c
__device__ __forceinline__ cdouble times(double c, cdouble v) { return scale(v, c); }

// sqrt(af^2 + ag^2) as LAPACK forms it in range (so that the rounding is the host's
// lartg's), scaled (hypot) only where the squares would over- or underflow.
__device__ __forceinline__ double modulus(double af, double ag)
{
    if (1e-150 < af && af < 1e150 && 1e-150 < ag && ag < 1e150)
        return sqrt(add(mul(af, af), mul(ag, ag)));
    return hypot(af, ag);
}

// A plane rotation (c, s, r): [c s; -conj(s) c] [f; g] = [r; 0], as _gmres._lartg (LAPACK
// 3.10's lartg: the unscaled branch where the squares stay in range).
__device__ void lartg(double f, double g, double &c, double &s, double &r)
{
    if (g == 0.0) {
        c = 1.0, s = 0.0 * g, r = f;
        return;
    }
    if (f == 0.0) {
        const double ag = fabs(g);
        c = 0.0, s = div(g, ag), r = ag;
        return;
    }
    const double af = fabs(f), ag = fabs(g);
    const double d = modulus(af, ag);
    const double sgn = div(f, af);
    c = div(af, d), s = div(mul(sgn, g), d), r = mul(sgn, d);
}
__device__ void lartg(cdouble f, cdouble g, double &c, cdouble &s, cdouble &r)
{
    if (is_zero(g)) {
        c = 1.0, s = cdouble{0.0, 0.0}, r = f;
        return;
    }
    if (is_zero(f)) {
        const double ag = magnitude(g);
        c = 0.0, s = over(conjugate(g), ag), r = cdouble{ag, 0.0};
        return;
    }
    const double f2 = add(mul(f.re, f.re), mul(f.im, f.im));
    const double g2 = add(mul(g.re, g.re), mul(g.im, g.im));
    const double h2 = add(f2, g2);
    if (1e-290 < f2 && h2 < 1e290) {
        c = sqrt(div(f2, h2));
        s = mul(conjugate(g), over(f, sqrt(mul(f2, h2))));
        r = over(f, c);
        return;
    }
    const double af = magnitude(f), ag = magnitude(g);
    const double d = modulus(af, ag);
    const cdouble sgn = over(f, af);
    c = div(af, d), s = over(mul(sgn, conjugate(g)), d), r = scale(sgn, d);
}

}  // namespace gmk
}  // namespace tessera

// Stage timing (benchmarks/probe_gmres_stages.py compiles with -DTESSERA_GMRES_STAGES):
// each block's thread 0 adds the clock64 cycles since its last stamp to stage k (10: the
// back substitution, 11: the rest outside the columns, from the launch's start, 12: the
// two-barrier column's Z correction, after its product, stage 0); a
// launch's sums, and its column count, go to its block's region-1 partial sums' last 16
// slots (free for a restart <= RMAX - 12). Without the macro the stamps are nothing.
#ifdef TESSERA_GMRES_STAGES
#define STAGES 13
#define STAGE(k)                                                                     \
    do {                                                                             \
        if (threadIdx.x == 0) {                                                      \
            const long long t_ = clock64();                                          \
            stage_[k] += t_ - stamp_;                                                \
            stamp_ = t_;                                                             \
        }                                                                            \
    } while (0)
#else
#define STAGE(k) ((void)0)
#endif

// A warp's row i of a combination: store(i, (src(i) - sum_k h[k] basis(k, i)) sc), k <
// count, its lanes over k (all of the row's loads at once) and their tree sum (warp_sum);
// sc = 1 leaves the bits. The whole warp calls it.
template <int WARP, typename T, typename R, typename Src, typename Basis, typename Store>
__device__ __forceinline__ void combine_row(long long i, Src src, const T *h, Basis basis,
                                            int count, Store store, R sc)
{
    using namespace tessera;
    const int lane = threadIdx.x % WARP;
    const T si = lane == 0 ? src(i) : zero<T>();
    T t = zero<T>();
#pragma unroll 4
    for (int k = lane; k < count; k += WARP) t = add(t, mul(h[k], basis(k, i)));
    t = warp_sum<WARP>(t);
    if (lane == 0) store(i, scale(sub(si, t), sc));
}

// (the blocks a multiprocessor named, launcher's BLOCKS_PER_SM / STREAM_BLOCKS_PER_SM: at
// 512 threads and the launch bounds' default, ptxas took 64 registers and spilled ~500
// bytes in the float32 instance of one reduction once A's cached rows were read)
template <typename T, typename I, typename P, int WARP, int BLOCK, bool ONE>
__global__ void __launch_bounds__(BLOCK, BLOCK >= 512 ? 1 : 2)
tessera_gmres_run(const long long n, const int entry, const int restart,
                  const long long maxiter, const long long inner_limit, const int cycles,
                  const int nonzero, const double atol0, const double eps, const double ptol0,
                  const int a_kind, const int a_lanes, const T *__restrict__ a_val,
                  const I *__restrict__ a_idx, const P *__restrict__ a_ptr, const long long a_ld,
                  const int m_kind, const int m_lanes, const T *__restrict__ m_val,
                  const I *__restrict__ m_idx, const P *__restrict__ m_ptr, const long long m_ld,
                  const T *__restrict__ b, T *x, T *r, T *V, T *z, T *y, T *part,
                  double *small, double *st, unsigned long long *bar, const int pipe, T *U,
                  T *Z, const int stage_v, const double rtol, const long long a_cols)
{
    using namespace tessera;
    using namespace tessera::gmk;
    typedef typename real_of<T>::type R;
    typedef typename small_of<T>::type S;
    __shared__ T sums[SLOTS];
    __shared__ T proj[RMAX + 1];  // the first projection of the column (V^H w)
    if (entry != E_INIT && st[W_STATUS] != double(S_RUNNING)) return;  // finished
    const long long chunk = (n + gridDim.x - 1) / gridDim.x;
    const long long row0 = min(n, (long long)blockIdx.x * chunk), row1 = min(n, row0 + chunk);
    RowGrid<T, WARP, BLOCK> g{bar, part, sums, n, row0, row1, (int)gridDim.x, SLOTS, 0};
    const StoredOp<T, I, P> A{a_kind, a_lanes, a_val, a_idx, a_ptr, a_ld};
    const StoredOp<T, I, P> M{m_kind, m_lanes, m_val, m_idx, m_ptr, m_ld};
    const auto one = [](int) { return R(1); };  // (dots: no scaling)
    const bool lead = blockIdx.x == 0 && threadIdx.x == 0;  // block 0's thread 0
    // The small problem (block 0's thread 0 only) and its control words.
    // The cycle's rotated Hessenberg columns in small, the rest in block 0's shared memory.
    S *hess = reinterpret_cast<S *>(small);  // column j at hess + j * (restart + 1)
    double *ctl = reinterpret_cast<double *>(hess + (long long)restart * (restart + 1));
    __shared__ S gv[RMAX + 1];   // g
    __shared__ S gs[RMAX];       // the rotations' s
    __shared__ double gc[RMAX];  // their c
    __shared__ S hcol[RMAX + 1]; // the column being rotated
    double *hist = st + WORDS, *prh = hist + cycles + 1;

    int status = S_RUNNING;
    long long iter = 0, inner = 0, xpoints = 0;
    double rnorm = 1.0 / 0.0, atol = atol0, ptol = ptol0, pmax = 1.0, presid = 0.0;
    if (entry != E_INIT) {
        atol = st[W_ATOL];
        iter = (long long)st[W_ITER];
        inner = (long long)st[W_INNER];
        rnorm = st[W_RNORM];
        ptol = st[W_PTOL];
        pmax = st[W_PMAX];
        presid = st[W_PRESID];
    }
    g.sync();  // every block has read st: block 0 may write it from here on
    const long long inner0 = inner;
    int nhist = 0;
#ifdef TESSERA_GMRES_STAGES
    long long stamp_ = clock64(), stage_[STAGES] = {};
    unsigned columns_ = 0;
#endif
    // Block 0's thread 0: the column (hcol) rotated by the cycle's rotations, a new
    // rotation, the residual estimate presid (ctl: the others read it past the next
    // barrier) and its history.
    const auto rotate = [&](int col, double h1, bool breakdown, long long slot) {
        S hk = hcol[0];  // entry k as the rotations before k left it
        for (int k = 0; k < col; ++k) {
            const double c = gc[k];
            const S s = gs[k], n1 = hcol[k + 1];
            hcol[k] = add(times(c, hk), mul(s, n1));
            hk = add(mul(neg(conjugate(s)), hk), times(c, n1));
        }
        double c;
        S s, mag;
        lartg(hk, small_real<S>(breakdown ? 0.0 : h1), c, s, mag);
        gc[col] = c;
        gs[col] = s;
        hcol[col] = mag;
        S *h = hess + (long long)col * (restart + 1);
        for (int k = 0; k <= col; ++k) h[k] = hcol[k];
        const S t = mul(neg(conjugate(s)), gv[col]);
        gv[col] = times(c, gv[col]);
        gv[col + 1] = t;
        presid = magnitude(t);
        ctl[0] = presid;  // (the others read it past the next barrier)
        prh[slot] = presid;
    };
    // Combinations of basis rows, sum_k h[k] B[k n + i] for this block's rows i. A block
    // of at most a row a warp (a latency-bound system) takes a warp a row, its lanes over
    // k, so all of a row's loads go out at once (a tree sum: warp_sum); more rows, a
    // thread a row, k in order (each term the two-step axpy's). H100, dense SPD 2049,
    // the stamped stages' sum (us an inner iteration, float32 / float64, one call):
    // a warp a row 13.60 / 16.07, a thread a row 14.35 / 16.83.
#ifdef TESSERA_GMRES_THREAD_ROWS
    const bool warp_rows = false;  // (a measured variant)
#else
    const bool warp_rows = row1 - row0 <= BLOCK / WARP;
#endif
    // The row cache: in the two-barrier column with a warp a row and restart <=
    // CACHE_RMAX, the block's own rows of V, Z (M A V) and U also in shared memory (row
    // i - row0 of each vector), and the combinations and dot products over own rows read
    // them there, not from L2 (the same values: the same bits). Only the product's U
    // and the partial sums cross blocks. H100, dense SPD 2049, the stamped stages' sum
    // (us an inner iteration, float32 / float64, one call): 13.06 / 15.65 with the cache,
    // 13.62 / 16.09 without (-DTESSERA_GMRES_NO_ROW_CACHE); whole solves 15.5-15.7 /
    // 17.8-17.9 against 16.0 / 18.6. Own rows were near already: the stages it touches
    // are each a quarter of a microsecond shorter, no more.
    constexpr int CW = BLOCK / WARP;  // rows a block has at most, a warp a row
    __shared__ T cV[(CACHE_RMAX + 1) * CW], cZ[CACHE_RMAX * CW], cU[CW];
#ifdef TESSERA_GMRES_NO_ROW_CACHE
    const bool cached = false;  // (a measured variant)
#else
    const bool cached = pipe && warp_rows && restart <= CACHE_RMAX;
#endif
    // One reduction a column (pipe 2, with the row cache): H, the unrotated Hessenberg
    // so far, in every block's shared memory (S: double or two doubles; not for cdouble
    // systems, whose H would pass the 48 KB of static shared memory), and the column's
    // first projection t in S.
    // The instance (ONE) carries that column alone, and the others the other two: one
    // kernel with all three spilled more and its product ran ~1 us slower (H100,
    // benchmarks/NOTES.md). Its rows must fit the cache in every block (else S_FORM).
    static_assert(!ONE || sizeof(T) <= 8, "one reduction: not for cdouble");
    static_assert(CACHE_RMAX <= WARP, "one reduction: a lane a basis vector of H g");
    __shared__ S Hs[ONE ? (CACHE_RMAX + 1) * CACHE_RMAX : 1], tS[ONE ? CACHE_RMAX + 1 : 1],
        hgs[ONE ? CACHE_RMAX : 1];
    __shared__ double tsq_sh;
    const bool fits = pipe && chunk <= BLOCK / WARP && restart <= CACHE_RMAX;  // (every block)
    const long long wrow = row0 + threadIdx.x / WARP;  // this warp's row (a warp a row)
    // dst = (src - B[0..count) h) sc on this block's rows (sc = 1 leaves the bits).
    const auto subtract_rows = [&](const T *src, const T *h, const T *B, int count, T *dst,
                                   R sc) {
        if (warp_rows) {
            if (wrow < row1)
                combine_row<WARP>(wrow, [&](long long i) { return src[i]; }, h,
                                  [&](int k, long long i) { return B[(long long)k * n + i]; },
                                  count, [&](long long i, T v) { dst[i] = v; }, sc);
            return;
        }
        for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) {
            T v = src[i];
#pragma unroll 8
            for (int k = 0; k < count; ++k) v = sub(v, mul(h[k], B[(long long)k * n + i]));
            dst[i] = scale(v, sc);
        }
    };
    const auto subtract_basis = [&](const T *src, const T *h, int count, T *dst, R sc) {
        subtract_rows(src, h, V, count, dst, sc);
    };
    // The row cache's forms: a cached vector's own row i, its basis rows, and the dot
    // products of V's rows 0..count - 2 and then the vector c with c (RowGrid::dots's
    // terms and order).
    const auto at = [&](const T *c) { return [c, row0](long long i) { return c[i - row0]; }; };
    const auto cached_basis = [&](const T *c) {
        return [c, row0](int k, long long i) { return c[k * CW + (i - row0)]; };
    };
    const auto cached_dots = [&](int count, const T *c) {
        g.sweep(count, [&](int k) {
            const T *a = k < count - 1 ? cV + k * CW : c;
            return [a, c, row0](long long i) { return conj_mul(a[i - row0], c[i - row0]); };
        });
    };
    // stage_v: the two-barrier column's product reads U from this block's dynamic shared
    // memory (n elements), copied there once a column, instead of every warp loading all
    // of U from L2 just past the barrier (the same values: the same bits).
    extern __shared__ __align__(16) unsigned char dyn_[];
    T *vsh = reinterpret_cast<T *>(dyn_);
    const auto staged = [&](const T *v) -> const T * {
        if (!stage_v) return v;
#pragma unroll 4
        for (long long i = threadIdx.x; i < n; i += BLOCK) vsh[i] = v[i];
        __syncthreads();
        return vsh;
    };
    // a_cols: a dense A's own rows, their first a_cols columns, kept in this block's
    // dynamic shared memory (after U's n elements where stage_v) for the whole launch, and
    // every product of A reads them there: a warp a row, its lanes over the columns in
    // RowGrid::product's order, the rest of the row from global memory (the same terms
    // in the same order: the same bits). The launcher asks for it where a warp takes a
    // row (it is ignored otherwise).
    const bool a_cache = a_cols > 0 && warp_rows && a_kind == OP_DENSE && a_lanes == WARP;
    const long long acols = a_cache ? min(a_cols, n) : 0;
    T *arow = reinterpret_cast<T *>(dyn_ + (stage_v ? (n * (long long)sizeof(T) + 15) / 16 * 16
                                                    : 0));
    if (a_cache) {
        for (long long i = row0; i < row1; ++i)
            for (long long c = threadIdx.x; c < acols; c += BLOCK)
                arow[(i - row0) * acols + c] = a_val[i * a_ld + c];
        __syncthreads();
    }
    // out = (A v) sc on this block's rows (then a __syncthreads, as RowGrid::product).
    const auto product_a = [&](const T *v, T *out, R sc) {
        if (!a_cache) {
            g.product(A, v, out, sc);
            return;
        }
        constexpr int UL = sizeof(T) <= 4 ? 8 : 4;  // (row_part's loads in flight)
        const int lane = threadIdx.x % WARP;
        if (wrow < row1) {
            T s = strided_dot<UL>(arow + (wrow - row0) * acols, v, lane, WARP, acols,
                                  zero<T>());
            const long long j1 = lane + (acols - lane + WARP - 1) / WARP * WARP;
            s = strided_dot<UL>(a_val + wrow * a_ld, v, j1, WARP, n, s);
            s = segment_sum<WARP>(s, WARP);
            if (lane == 0) out[wrow] = scale(s, sc);
        }
        __syncthreads();
    };
    // out = M A v on this block's rows (A v alone without M; a barrier between the two).
    const auto product_ma = [&](const T *v, T *out) {
        if (m_kind != OP_NONE) {
            product_a(v, z, R(1));
            g.sync();  // A v whole before M's rows read it
            g.product(M, z, out);
        } else {
            product_a(v, out, R(1));
        }
    };
    if (entry == E_INIT) {
        if (rtol >= 0)  // (x = 0 is the start: the launcher's buffer is not zeroed)
            for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) x[i] = zero<T>();
        if (nonzero) {
            product_a(x, r, R(1));
            for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) r[i] = sub(b[i], r[i]);
        } else {
            for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) r[i] = b[i];
        }
        __syncthreads();
        rnorm = g.norm(r);
        if (lead) hist[nhist] = rnorm;
        ++nhist;
        if (rtol >= 0) {  // the start of a solve from zero without M: ||b|| = ||r|| = ||M b||
            atol = fmax(atol0, rtol * rnorm);
            ptol = rnorm * fmin(1.0, atol / rnorm);
            if (rnorm == 0) status = S_CONVERGED;  // (x = 0 is the solution)
        }
        if (rnorm < atol)
            status = S_CONVERGED;
        else if (!isfinite(rnorm))
            status = S_NONFINITE;
    }
    int cyc = 0;
    while (status == S_RUNNING && cyc < cycles) {
        // The cycle's first vector: V[0] = M r / ||M r|| (r whole: the last norm's barrier).
        const T *v0 = r;
        double tmp = rnorm;
        if (m_kind != OP_NONE) {
            g.product(M, r, z);
            tmp = g.norm(z);
            v0 = z;
        }
        {
            const R s0 = R(1.0 / tmp);
            for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) {
                V[i] = scale(v0[i], s0);
                if (cached) cV[i - row0] = V[i];
            }
        }
        if (lead) {  // g = ||v0|| e_1
            gv[0] = small_real<S>(tmp);
            for (int k = 1; k <= restart; ++k) gv[k] = S{};
        }
        g.sync();  // V[0] whole before the first product
        int col = 0;
        bool breakdown = false;
        R sc = R(1);  // V[col]'s scale: its rows hold w, V[col] = sc w (scaled past barrier 1)
        STAGE(11);
        if (ONE) {  // one reduction a column (the header's "One reduction")
            if (!fits) {
                status = S_FORM;
                break;
            }
            // Column 0's first projection: Z[0] = M A V[0], t = V[0]^H Z[0] (a reduction
            // with ||Z[0]||^2), and the candidate u = Z[0] - V[0] t.
            product_ma(V, Z);
            for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) cZ[i - row0] = Z[i];
            __syncthreads();
            cached_dots(2, cZ);
            g.sync();
            g.gather(2);
            if (threadIdx.x == 0) {
                tS[0] = to_small(sums[0]);
                tsq_sh = abs2(tS[0]);
                proj[0] = sums[0];
            }
            __syncthreads();
            double tsq = tsq_sh;  // ||t||^2: ||M A v||^2 = ||t||^2 + ||u||^2 below
            if (wrow < row1)
                combine_row<WARP>(wrow, at(cZ), proj, cached_basis(cV), 1,
                                  [&](long long i, T v) {
                                      U[i] = v;
                                      cU[i - row0] = v;
                                  }, R(1));
            g.sync();  // u whole for its product
            for (int s = 1;; ++s) {
                // Column s - 1 completes in this pass; whether it is the cycle's last by
                // count is known now, and then u takes no product.
                const bool more = s < restart && inner + 1 != inner_limit;
                T *Pv = Z + (long long)s * n, *cP = cZ + s * CW;
                if (more) {
                    product_ma(staged(U), Pv);  // P = M A u (u not normalized)
                    for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK)
                        cP[i - row0] = Pv[i];
                    __syncthreads();
                }
                STAGE(0);
                // One reduction: g = V^H u, a = u^H u, p = V^H P, q = u^H P, c = Z^H u.
                const int count = more ? 3 * s + 2 : s + 1;
                g.sweep(count, [&](int k) {
                    const T *l = k < s ? cV + k * CW : k == s ? cU : k <= 2 * s
                        ? cV + (k - s - 1) * CW : k == 2 * s + 1 ? cU : cZ + (k - 2 * s - 2) * CW;
                    const T *rr = k <= s || k > 2 * s + 1 ? cU : cP;
                    return [l, rr, row0](long long i) { return conj_mul(l[i - row0], rr[i - row0]); };
                });
                STAGE(1);
                g.sync();  // the reduction's barrier
                STAGE(2);
                // (column s - 2's presid, made by block 0's second warp at the last barrier)
                const double last = *reinterpret_cast<volatile double *>(ctl);
                g.gather(count);
                STAGE(3);
                if (s >= 2 && last <= ptol) {  // column s - 2 ended the cycle
                    col = s - 1;
                    break;
                }
                // Column s - 1: its second projection g, and beta = sqrt(a - ||g||^2).
                const double a = (double)real_part(sums[s]);
                double gsq = threadIdx.x % WARP < s ? abs2(to_small(sums[threadIdx.x % WARP]))
                                                    : 0.0;  // ||g||^2: each warp's tree sum
                gsq = shfl<WARP>(warp_sum<WARP>(gsq), 0);
                const double beta = sqrt(fmax(a - gsq, 0.0)), h0 = sqrt(tsq + a);
                if (!isfinite(h0)) {
                    status = S_NONFINITE;
                    col = s - 1;
                    break;
                }
                const bool brk = beta <= eps * h0;
                const R sc = brk ? R(1) : R(1.0 / beta);
                S *hc = Hs + (s - 1) * (CACHE_RMAX + 1);  // H's column s - 1, unrotated
                for (int k = threadIdx.x; k <= restart; k += BLOCK)  // (zeros below beta)
                    hc[k] = k < s ? add(tS[k], to_small(sums[k]))
                                  : small_real<S>(k == s && !brk ? beta : 0.0);
                if (wrow < row1) {  // V[s] = (u - V g) sc; Z[s] = (P - Z g) sc
                    T *vn = V + (long long)s * n, *cn = cV + s * CW;
                    combine_row<WARP>(wrow, at(cU), sums, cached_basis(cV), s,
                                      [&](long long i, T v) {
                                          vn[i] = v;
                                          cn[i - row0] = v;
                                      }, sc);
                    if (more)
                        combine_row<WARP>(wrow, at(cP), sums, cached_basis(cZ), s,
                                          [&](long long i, T v) {
                                              Pv[i] = v;
                                              cP[i - row0] = v;
                                          }, sc);
                }
                __syncthreads();
                STAGE(4);
                ++inner;
#ifdef TESSERA_GMRES_STAGES
                ++columns_;
#endif
                if (!more || brk) {  // the cycle's last column: its rotation now
                    col = s;
                    breakdown = brk;
                    if (lead) {
                        for (int k = 0; k < s; ++k) hcol[k] = hc[k];
                        rotate(s - 1, beta, brk, inner - 1 - inner0);
                    }
                    STAGE(9);
                    break;
                }
                // Column s's first projection without a reduction: t = (p - H g) / beta,
                // t_s = (q - c^H g - g^H p + g^H H g) / beta^2 (H = V^H M A V so far).
                {  // H g: row k by warp k (mod the warps), its lanes over H's columns
                    const int lane = threadIdx.x % WARP;
                    for (int k = threadIdx.x / WARP; k < s; k += BLOCK / WARP) {
                        const S v = lane < s ? mul(Hs[k + lane * (CACHE_RMAX + 1)],
                                                   to_small(sums[lane]))
                                             : S{};
                        const S hk = warp_sum<WARP>(v);
                        if (lane == 0) hgs[k] = hk;
                    }
                }
                __syncthreads();
                if (threadIdx.x < WARP) {
                    const int lane = threadIdx.x;
                    const double isc = 1.0 / beta;
                    S dc{}, dp{}, dh{};
                    double tk2 = 0.0;
                    if (lane < s) {
                        const S hg = hgs[lane];
                        const S gk = to_small(sums[lane]), pk = to_small(sums[s + 1 + lane]),
                                ck = to_small(sums[2 * s + 2 + lane]);
                        dc = mul(conjugate(ck), gk);
                        dp = mul(conjugate(gk), pk);
                        dh = mul(conjugate(gk), hg);
                        const S tk = times(isc, sub(pk, hg));
                        tS[lane] = tk;
                        proj[lane] = from_small<T>(tk);
                        tk2 = abs2(tk);
                    }
                    dc = warp_sum<WARP>(dc);
                    dp = warp_sum<WARP>(dp);
                    dh = warp_sum<WARP>(dh);
                    tk2 = warp_sum<WARP>(tk2);
                    if (lane == 0) {
                        const S ts = times(isc * isc,
                                           add(sub(sub(to_small(sums[2 * s + 1]), dc), dp), dh));
                        tS[s] = ts;
                        proj[s] = from_small<T>(ts);
                        tsq_sh = add(tk2, abs2(ts));
                    }
                }
                __syncthreads();
                tsq = tsq_sh;
                STAGE(5);
                if (wrow < row1)  // the next candidate: u = Z[s] - V[0..s] t
                    combine_row<WARP>(wrow, at(cP), proj, cached_basis(cV), s + 1,
                                      [&](long long i, T v) {
                                          U[i] = v;
                                          cU[i - row0] = v;
                                      }, R(1));
                STAGE(6);
                // u whole for its product; meanwhile block 0's second warp rotates column
                // s - 1 (its presid is read past the next barrier)
                g.sync_with(WARP, [&] {
                    if (blockIdx.x != 0) return;
                    for (int k = 0; k < s; ++k) hcol[k] = hc[k];
                    rotate(s - 1, beta, false, inner - 1 - inner0);
                });
                STAGE(7);
            }
        } else if (pipe) {  // two barriers a column (the header's "Two barriers")
            product_ma(V, Z);  // Z[0] = M A V[0]
            if (cached) {
                for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) cZ[i - row0] = Z[i];
                __syncthreads();
            }
            double h1_last = 0.0;  // the last column's h1 and breakdown, for its rotation
            bool breakdown_last = false;
            for (;;) {
                const T *w = Z + (long long)col * n;  // M A V[col]
                if (cached)
                    cached_dots(col + 2, cZ + col * CW);
                else
                    g.dots(col + 2, [&](int k) { return k <= col ? V + (long long)k * n : w; },
                           one, w);  // V^H w, then w^H w
                STAGE(1);
                if (col > 0) {
                    // barrier 1; meanwhile block 0's second warp finishes the last column
                    // (its Hessenberg column from proj and sums, which still hold it, and
                    // its rotation and presid, which the others read past barrier 2)
                    g.sync_with(WARP, [&] {
                        if (blockIdx.x != 0) return;
                        for (int k = 0; k < col; ++k)
                            hcol[k] = add(to_small(proj[k]), to_small(sums[k]));
                        rotate(col - 1, h1_last, breakdown_last, inner - 1 - inner0);
                    });
                } else {
                    g.sync();  // barrier 1
                }
                STAGE(2);
                g.gather(col + 2);
                STAGE(3);
                const double h0 = (double)root(real_part(sums[col + 1]));
                const bool nonfinite = !isfinite(h0);  // (the -20 stop: past barrier 2)
                for (int k = threadIdx.x; k <= col; k += BLOCK) proj[k] = sums[k];
                __syncthreads();
                if (cached) {  // U = w - V h
                    if (wrow < row1)
                        combine_row<WARP>(wrow, at(cZ + col * CW), proj, cached_basis(cV),
                                          col + 1, [&](long long i, T v) {
                                              U[i] = v;
                                              cU[i - row0] = v;
                                          }, R(1));
                    __syncthreads();
                    cached_dots(col + 2, cU);
                } else {
                    subtract_basis(w, proj, col + 1, U, R(1));
                    __syncthreads();
                    g.dots(col + 2, [&](int k) { return k <= col ? V + (long long)k * n : U; },
                           one, U);  // V^H U, then U^H U
                }
                STAGE(4);
                g.sync();  // barrier 2: U whole for the next product
                STAGE(5);
                // (the last column's presid loaded before the reduction: its wait overlaps)
                const double last = *reinterpret_cast<volatile double *>(ctl);
                g.gather(col + 2);
                // The last column's test: presid <= ptol ends the cycle, this column unused.
                if (col > 0 && last <= ptol) break;
                if (nonfinite) {
                    status = S_NONFINITE;
                    break;
                }
                double h1sq = (double)real_part(sums[col + 1]);  // ||U||^2 - ||g||^2
                for (int k = 0; k <= col; ++k) h1sq = sub(h1sq, abs2(to_small(sums[k])));
                const double h1 = sqrt(fmax(h1sq, 0.0));
                breakdown = h1 <= eps * h0;
                sc = breakdown ? R(1) : R(1.0 / h1);
                if (cached) {
                    T *vn = V + (long long)(col + 1) * n, *cn = cV + (col + 1) * CW;
                    if (wrow < row1)
                        combine_row<WARP>(wrow, at(cU), sums, cached_basis(cV), col + 1,
                                          [&](long long i, T v) {
                                              vn[i] = v;
                                              cn[i - row0] = v;
                                          }, sc);
                } else {
                    subtract_basis(U, sums, col + 1, V + (long long)(col + 1) * n, sc);
                }
                STAGE(6);
                ++inner;
                ++col;
#ifdef TESSERA_GMRES_STAGES
                ++columns_;
#endif
                if (inner == inner_limit || breakdown || col == restart) {
                    if (lead) {  // the cycle's last column: its rotation now
                        for (int k = 0; k < col; ++k)
                            hcol[k] = add(to_small(proj[k]), to_small(sums[k]));
                        rotate(col - 1, h1, breakdown, inner - 1 - inner0);
                    }
                    STAGE(9);
                    break;
                }
                h1_last = h1;
                breakdown_last = breakdown;
                // The next column's product: M A V[col] = (M A U - Z[0..col - 1] g) sc.
                T *wn = Z + (long long)col * n;
#ifdef TESSERA_GMRES_PRODUCT_PROBE
                // (a measured variant: stage 7 the block's wait for its warps' last
                // combination, stage 8 the product, stage 0 the same product once more.
                // H100, dense 2049, float32 / float64: 0.02, 3.68 / 6.00, 2.55 / 4.46 us
                // an inner iteration. The warm product streams A at L2's rate; the first
                // pays ~1.1 / 1.5 us more: U's loads from L2, a copy for each warp.)
                __syncthreads();
                STAGE(7);
                product_ma(staged(U), wn);
                STAGE(8);
#endif
                product_ma(staged(U), wn);
                STAGE(0);
                if (cached) {
                    T *cn = cZ + col * CW;
                    if (wrow < row1)
                        combine_row<WARP>(wrow, [&](long long i) { return wn[i]; }, sums,
                                          cached_basis(cZ), col, [&](long long i, T v) {
                                              wn[i] = v;
                                              cn[i - row0] = v;
                                          }, sc);
                } else {
                    subtract_rows(wn, sums, Z, col, wn, sc);
                }
                __syncthreads();
                STAGE(12);
            }
        } else for (;;) {  // three barriers a column
            T *vc = V + (long long)col * n;
            T *w = V + (long long)(col + 1) * n;  // orthogonalized in place: V[col + 1]
            // w = M A V[col] = (M A vc) sc: A (w / h1) as (A w) / h1.
            if (m_kind != OP_NONE) {
                product_a(vc, z, R(1));
                g.sync();  // A v whole before M's rows read it
                g.product(M, z, w, sc);
            } else {
                product_a(vc, w, sc);
            }
            STAGE(0);
            // Projections V^H w and ||w||^2 together (V[col]'s rows scaled on the fly).
            g.dots(col + 2, [&](int k) { return k <= col ? V + (long long)k * n : w; },
                   [&](int k) { return k == col ? sc : R(1); }, w);  // V^H w, then w^H w
            STAGE(1);
            g.sync();  // barrier 1: every block's product of V[col] done, the sums written
            STAGE(2);
            const double last = *reinterpret_cast<volatile double *>(ctl);  // (see above)
            g.gather(col + 2);
            // The last column's test: presid <= ptol ends the cycle, this column unused
            // (the lead's estimate of the last column, written before barrier 1).
            if (col > 0 && last <= ptol) break;
            STAGE(3);
            const double h0 = (double)root(real_part(sums[col + 1]));
            if (!isfinite(h0)) {
                status = S_NONFINITE;
                break;
            }
            const auto project_out = [&](const T *h) { subtract_basis(w, h, col + 1, w, R(1)); };
            if (col > 0)  // V[col] = sc w: no block reads these rows' old values past barrier 1
                for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK)
                    vc[i] = scale(vc[i], sc);
            for (int k = threadIdx.x; k <= col; k += BLOCK) proj[k] = sums[k];
            __syncthreads();
            project_out(proj);
            __syncthreads();
            // The second projection.
            g.dots(col + 1, [&](int k) { return V + (long long)k * n; }, one, w);
            STAGE(4);
            g.sync();  // barrier 2
            STAGE(5);
            g.gather(col + 1);
            project_out(sums);
            if (lead)  // the Hessenberg column: the two projections summed
                for (int k = 0; k <= col; ++k) hcol[k] = add(to_small(proj[k]), to_small(sums[k]));
            __syncthreads();
            g.partials(1, [&](int, long long i) { return from_real<T>(abs2(w[i])); });
            STAGE(6);
            g.sync();  // barrier 3: w whole (the next column's product reads it unscaled)
            STAGE(7);
            g.gather(1);
            const double h1 = (double)root(real_part(sums[0]));
            breakdown = h1 <= eps * h0;
            sc = breakdown ? R(1) : R(1.0 / h1);
            STAGE(8);
            if (lead) rotate(col, h1, breakdown, inner - inner0);
            STAGE(9);
            ++inner;
            ++col;
#ifdef TESSERA_GMRES_STAGES
            ++columns_;
#endif
            if (inner == inner_limit || breakdown || col == restart) break;
        }
        if (status != S_RUNNING) break;
        // y = H^-1 g (back substitution: block 0's first warp, a lane a row of g; each
        // g[i] takes the host's updates in the host's order), then x += V y.
        if (blockIdx.x == 0 && threadIdx.x < WARP) {
            const int last = col - 1, lane = threadIdx.x;
            if (lane == 0 && is_zero(hess[(long long)last * (restart + 1) + last])) gv[last] = S{};
            warp_sync();
            for (int k = last; k > 0; --k) {
                const S gk = gv[k];
                warp_sync();  // (every lane has read g[k] before lane 0 writes it)
                if (!is_zero(gk)) {
                    const S *hk = hess + (long long)k * (restart + 1);
                    const S yk = div(gk, hk[k]);
                    for (int i = lane; i < k; i += WARP) gv[i] = sub(gv[i], mul(yk, hk[i]));
                    if (lane == 0) gv[k] = yk;
                }
                warp_sync();
            }
            if (lane == 0 && !is_zero(gv[0])) gv[0] = div(gv[0], hess[0]);
            warp_sync();
            for (int k = lane; k < col; k += WARP) y[k] = from_small<T>(gv[k]);
        }
        STAGE(10);
        g.sync();  // y written, ctl the last column's estimate
        presid = *reinterpret_cast<volatile double *>(ctl);
        if (warp_rows) {  // x += V y (as subtract_rows' two mappings, with a sum)
            const int lane = threadIdx.x % WARP;
            const long long i = row0 + threadIdx.x / WARP;
            if (i < row1) {
                const T xi = lane == 0 ? x[i] : zero<T>();
                T acc = zero<T>();
                for (int k = lane; k < col; k += WARP)
                    acc = add(acc, mul(y[k], cached ? cV[k * CW + (i - row0)]
                                                    : V[(long long)k * n + i]));
                acc = warp_sum<WARP>(acc);
                if (lane == 0) x[i] = add(xi, acc);
            }
        } else {
            for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) {
                T acc = zero<T>();
#pragma unroll 8
                for (int k = 0; k < col; ++k) acc = add(acc, mul(y[k], V[(long long)k * n + i]));
                x[i] = add(x[i], acc);
            }
        }
        g.sync();  // x whole before its product
        product_a(x, r, R(1));
        for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) r[i] = sub(b[i], r[i]);
        __syncthreads();
        rnorm = g.norm(r);
        if (lead) hist[nhist] = rnorm;
        ++nhist;
        ++iter;
        ++cyc;
        if (!isfinite(rnorm)) {
            status = S_NONFINITE;
            break;
        }
        const int end = rnorm <= atol ? S_CONVERGED : S_MAXITER;
        if (inner == inner_limit) {  // ('legacy': maxiter counts inner iterations)
            status = end;
            break;
        }
        ++xpoints;  // (a callback of type 'x' sees this x)
        if (rnorm <= atol || breakdown) {
            status = end;
            break;
        }
        if (presid <= ptol)
            pmax = fmax(eps, 0.25 * pmax);
        else
            pmax = fmin(1.0, 1.5 * pmax);
        ptol = presid * fmin(pmax, atol / rnorm);
        if (iter == maxiter) status = end;
    }
#ifdef TESSERA_GMRES_STAGES
    if (threadIdx.x == 0) {  // after region 1's sums of this block: STAGES, then columns
        unsigned *out = reinterpret_cast<unsigned *>(part + (long long)SLOTS * gridDim.x +
                                                     (long long)blockIdx.x * SLOTS + SLOTS - 16);
        for (int k = 0; k < STAGES; ++k) out[k] = (unsigned)stage_[k];
        out[STAGES] = columns_;
    }
#endif
    if (lead) {
        st[W_STATUS] = double(status);
        st[W_ITER] = double(iter);
        st[W_INNER] = double(inner);
        st[W_RNORM] = rnorm;
        st[W_PTOL] = ptol;
        st[W_PMAX] = pmax;
        st[W_PRESID] = presid;
        st[W_XPOINTS] = double(xpoints);
        st[W_NHIST] = double(nhist);
        st[W_NPR] = double(inner - inner0);
        st[W_ATOL] = atol;
    }
}
