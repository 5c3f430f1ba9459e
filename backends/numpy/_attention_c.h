/* The body of _attention_c.c, included once per accumulation dtype with
 *   T       float or double             VT, VI  its vector type, the same-width int vector
 *   VL      lanes of VT                 SELV    lane select of VT
 *   EXPV    exp of VT (any x)           EXPNEG  exp of VT for x <= 88 (softmax: x <= 0)
 *   HSUM    a vector's lanes summed     HMAX    their max
 *   GEMM    gemm_f32 or gemm_f64        LOG     logf or log
 *   SUF(x)  x_f32 or x_f64 (the names defined here)
 */

static inline VT
SUF(loadv)(const T *p)
{
    VT x;
    memcpy(&x, p, sizeof x);
    return x;
}

static inline void
SUF(storev)(T *p, VT x)
{
    memcpy(p, &x, sizeof x);
}

/* x[0 .. n) (n < VL) in a vector whose other lanes are ``fill``. */
static inline VT
SUF(loadpart)(const T *p, int64_t n, T fill)
{
    T buf[VL];
    for (int64_t t = 0; t < VL; t++)
        buf[t] = t < n ? p[t] : fill;
    return SUF(loadv)(buf);
}

static inline void
SUF(storepart)(T *p, VT x, int64_t n)
{
    T buf[VL];
    SUF(storev)(buf, x);
    memcpy(p, buf, (size_t)n * sizeof(T));
}

static inline T
SUF(exp1)(T x)
{
    return EXPV(SPLAT(VT, x))[0];
}

/* The online-softmax step of one score tile, in place (Algorithm 1's inner loop between
 * the two products): rows ra..rb-1 of s (w keys from j0, row r at s + (r - ra) w) become
 * P = exp(S - m_new) (0 at keys the band hides), and m, l (indexed by r - i0) and the
 * output rows o (same index, dv each) are rescaled by exp(m_old - m_new) where m moved.
 * Dropout: P is then multiplied by keep / (1 - p); l keeps the undropped sum. */
static void TESSERA_CLONES
SUF(fwd_rows)(T *s, int64_t w, int64_t ra, int64_t rb, int64_t i0, int64_t j0, int64_t lo,
              int64_t hi, T *m, T *l, T *o, int64_t dv, const Dropout *dr, T keep_scale,
              uint32_t *u, uint8_t *keep)
{
    for (int64_t r = ra; r < rb; r++) {
        T *sr = s + (r - ra) * w;
        int64_t c0 = r + lo - j0, c1 = r + hi + 1 - j0;
        c0 = c0 < 0 ? 0 : c0 > w ? w : c0;
        c1 = c1 < 0 ? 0 : c1 > w ? w : c1;
        if (c0 >= c1) {
            memset(sr, 0, (size_t)w * sizeof(T));
            continue;
        }
        /* Row max of the visible scores (a NaN score is skipped here; it reaches l
         * through exp all the same). */
        VT vm = SPLAT(VT, -INFINITY);
        int64_t c = c0;
        for (; c + VL <= c1; c += VL) {
            VT x = SUF(loadv)(sr + c);
            vm = SELV(x > vm, x, vm);
        }
        if (c < c1) {
            VT x = SUF(loadpart)(sr + c, c1 - c, -INFINITY);
            vm = SELV(x > vm, x, vm);
        }
        T mx = HMAX(vm);
        T mo = m[r - i0];
        T mn = mx > mo ? mx : mo;
        T ms = mn == -INFINITY ? 0 : mn; /* rows with no finite score yet: shift by 0 */
        /* P = exp(S - ms) and its row sum. */
        VT vs = SPLAT(VT, 0);
        for (c = c0; c + VL <= c1; c += VL) {
            VT x = EXPNEG(SUF(loadv)(sr + c) - ms);
            SUF(storev)(sr + c, x);
            vs += x;
        }
        if (c < c1) {
            VT x = EXPNEG(SUF(loadpart)(sr + c, c1 - c, -INFINITY) - ms);
            SUF(storepart)(sr + c, x, c1 - c);
            vs += x;
        }
        if (c0 > 0)
            memset(sr, 0, (size_t)c0 * sizeof(T));
        if (c1 < w)
            memset(sr + c1, 0, (size_t)(w - c1) * sizeof(T));
        T sum = HSUM(vs);
        if (mn != mo) {
            T alpha = SUF(exp1)(mo - ms);
            l[r - i0] = alpha * l[r - i0] + sum;
            T *orow = o + (r - i0) * dv;
            for (int64_t t = 0; t < dv; t++)
                orow[t] *= alpha;
            m[r - i0] = mn;
        }
        else {
            l[r - i0] += sum;
        }
        if (dr->on) {
            keep_row(dr, r, j0 + c0, c1 - c0, u, keep);
            for (int64_t t = 0; t < c1 - c0; t++)
                sr[c0 + t] *= keep[t] ? keep_scale : (T)0;
        }
    }
}

/* The forward of query rows [i0, i1) of one head (FwdArgs). Returns 0 when out of memory. */
static int
SUF(fwd_item)(const FwdArgs *a)
{
    const T *q = (const T *)a->q, *k = (const T *)a->k, *v = (const T *)a->v;
    const int64_t i0 = a->i0, i1 = a->i1, n = i1 - i0, d = a->d, dv = a->dv;
    const int64_t lo = a->lo, hi = a->hi, bm = a->bm, bk = a->bk;
    int64_t ja = i0 + lo < 0 ? 0 : i0 + lo;
    int64_t jb = i1 + hi < a->sk ? i1 + hi : a->sk;
    if (jb < ja)
        jb = ja;
    const int64_t nk = jb - ja;
    const int pack_v = !(a->vs1 == 1 && a->vs0 >= dv);
    T *o = (T *)a->out, *lse = (T *)a->lse;
    const T scale = (T)a->scale, keep_scale = (T)a->keep_scale;

    T *qs = PyMem_RawMalloc((size_t)(n * d) * sizeof(T));
    /* K^T's rows: padded off a multiple of 4 KiB (the BLAS reads a tile of them at once). */
    const int64_t ldk = (nk + 15) / 16 * 16 + 16;
    T *kt = PyMem_RawMalloc((size_t)(d * ldk) * sizeof(T));
    T *vp = pack_v ? PyMem_RawMalloc((size_t)(nk * dv + 1) * sizeof(T)) : NULL;
    T *sbuf = PyMem_RawMalloc((size_t)(bm * bk) * sizeof(T));
    T *m = PyMem_RawMalloc((size_t)n * sizeof(T));
    T *l = PyMem_RawMalloc((size_t)n * sizeof(T));
    uint32_t *u = PyMem_RawMalloc((size_t)(bk / 4 + 3) * 4 * sizeof(uint32_t));
    uint8_t *keep = PyMem_RawMalloc((size_t)bk);
    int ok = qs && kt && (vp || !pack_v) && sbuf && m && l && u && keep;
    if (ok) {
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < d; c++)
                qs[r * d + c] = q[(i0 + r) * a->qs0 + c * a->qs1] * scale;
        /* K^T in blocks of 16 keys: each of its rows gets 16 contiguous elements at a
         * time (column by column, a row of K^T lies a 4 KiB multiple apart from the next
         * when nk is a power of 2: they would all fall in one L1 set). */
        for (int64_t j = 0; j < nk; j += 16) {
            int64_t jn = nk - j < 16 ? nk - j : 16;
            for (int64_t c = 0; c < d; c++)
                for (int64_t t = 0; t < jn; t++)
                    kt[c * ldk + j + t] = k[(ja + j + t) * a->ks0 + c * a->ks1];
        }
        const T *vb;
        int64_t ldv;
        if (pack_v) {
            for (int64_t j = 0; j < nk; j++)
                for (int64_t c = 0; c < dv; c++)
                    vp[j * dv + c] = v[(ja + j) * a->vs0 + c * a->vs1];
            vb = vp;
            ldv = dv;
        }
        else {
            vb = v + ja * a->vs0;
            ldv = a->vs0;
        }
        memset(o, 0, (size_t)(n * dv) * sizeof(T));
        for (int64_t r = 0; r < n; r++) {
            m[r] = -INFINITY;
            l[r] = 0;
        }
        for (int64_t r0 = i0; r0 < i1; r0 += bm) {
            int64_t r1 = r0 + bm < i1 ? r0 + bm : i1;
            int64_t ka = r0 + lo > ja ? r0 + lo : ja;
            int64_t kb = r1 + hi < jb ? r1 + hi : jb;
            for (int64_t j0 = ka; j0 < kb; j0 += bk) {
                int64_t j1 = j0 + bk < kb ? j0 + bk : kb, w = j1 - j0;
                /* Only the rows of the tile that see some key of it. */
                int64_t ra = j0 - hi > r0 ? j0 - hi : r0;
                int64_t rb = j1 - lo < r1 ? j1 - lo : r1;
                if (ra >= rb)
                    continue;
                GEMM(NO_TRANS, NO_TRANS, rb - ra, w, d, 1, qs + (ra - i0) * d, d,
                     kt + (j0 - ja), ldk, 0, sbuf, w);
                SUF(fwd_rows)(sbuf, w, ra, rb, i0, j0, lo, hi, m, l, o, dv, &a->dr,
                              keep_scale, u, keep);
                GEMM(NO_TRANS, NO_TRANS, rb - ra, dv, w, 1, sbuf, w, vb + (j0 - ja) * ldv,
                     ldv, 1, o + (ra - i0) * dv, dv);
            }
        }
        /* O / l and lse = m + log(l); rows that saw no key (l = 0; or NaN): 0 and -inf. */
        for (int64_t r = 0; r < n; r++) {
            T *orow = o + r * dv;
            if (l[r] > 0) {
                for (int64_t c = 0; c < dv; c++)
                    orow[c] /= l[r];
                if (lse)
                    lse[r] = m[r] + LOG(l[r]);
            }
            else {
                memset(orow, 0, (size_t)dv * sizeof(T));
                if (lse)
                    lse[r] = -INFINITY;
            }
        }
    }
    PyMem_RawFree(qs);
    PyMem_RawFree(kt);
    PyMem_RawFree(vp);
    PyMem_RawFree(sbuf);
    PyMem_RawFree(m);
    PyMem_RawFree(l);
    PyMem_RawFree(u);
    PyMem_RawFree(keep);
    return ok;
}

/* The backward's pass over one tile (Algorithm 2 between its products): rows ra..rb-1 of
 * s (the scores S) and dp (dO V^T), w keys from j0, row r at (r - ra) w, become
 *   s  <- P~ = P * Z,    dp <- dS = P * (dP * Z - delta),    P = exp(S - lse)
 * with Z = keep / (1 - p) (1 without dropout), both 0 at keys the band hides; lse and
 * delta are indexed by r (lse already +inf for rows that saw no key: P = 0). z: scratch
 * of w elements. */
static void TESSERA_CLONES
SUF(bwd_rows)(T *s, T *dp, int64_t w, int64_t ra, int64_t rb, int64_t j0, int64_t lo,
              int64_t hi, const T *lse, const T *delta, const Dropout *dr, T keep_scale,
              uint32_t *u, uint8_t *keep, T *z)
{
    for (int64_t r = ra; r < rb; r++) {
        T *sr = s + (r - ra) * w, *dr_ = dp + (r - ra) * w;
        int64_t c0 = r + lo - j0, c1 = r + hi + 1 - j0;
        c0 = c0 < 0 ? 0 : c0 > w ? w : c0;
        c1 = c1 < 0 ? 0 : c1 > w ? w : c1;
        if (c0 >= c1) {
            memset(sr, 0, (size_t)w * sizeof(T));
            memset(dr_, 0, (size_t)w * sizeof(T));
            continue;
        }
        const T L = lse[r], D = delta[r];
        int64_t c = c0;
        if (dr->on) {
            keep_row(dr, r, j0 + c0, c1 - c0, u, keep);
            for (int64_t t = 0; t < c1 - c0; t++)
                z[c0 + t] = keep[t] ? keep_scale : (T)0;
            for (; c + VL <= c1; c += VL) {
                VT p = EXPV(SUF(loadv)(sr + c) - L), zz = SUF(loadv)(z + c);
                SUF(storev)(dr_ + c, p * (SUF(loadv)(dr_ + c) * zz - D));
                SUF(storev)(sr + c, p * zz);
            }
            for (; c < c1; c++) {
                T p = SUF(exp1)(sr[c] - L);
                dr_[c] = p * (dr_[c] * z[c] - D);
                sr[c] = p * z[c];
            }
        }
        else {
            for (; c + VL <= c1; c += VL) {
                VT p = EXPV(SUF(loadv)(sr + c) - L);
                SUF(storev)(dr_ + c, p * (SUF(loadv)(dr_ + c) - D));
                SUF(storev)(sr + c, p);
            }
            if (c < c1) {
                VT p = EXPV(SUF(loadpart)(sr + c, c1 - c, 0) - L);
                VT g = SUF(loadpart)(dr_ + c, c1 - c, 0);
                SUF(storepart)(dr_ + c, p * (g - D), c1 - c);
                SUF(storepart)(sr + c, p, c1 - c);
            }
        }
        if (c0 > 0) {
            memset(sr, 0, (size_t)c0 * sizeof(T));
            memset(dr_, 0, (size_t)c0 * sizeof(T));
        }
        if (c1 < w) {
            memset(sr + c1, 0, (size_t)(w - c1) * sizeof(T));
            memset(dr_ + c1, 0, (size_t)(w - c1) * sizeof(T));
        }
    }
}

/* The backward of one head (BwdArgs). Returns 0 when out of memory. */
static int
SUF(bwd_head)(const BwdArgs *a)
{
    const int64_t sq = a->sq, sk = a->sk, d = a->d, dv = a->dv;
    const int64_t lo = a->lo, hi = a->hi, bq = a->bq, bk = a->bk;
    const T *q = (const T *)a->q, *k = (const T *)a->k, *v = (const T *)a->v;
    const T *o = (const T *)a->o, *g = (const T *)a->g, *lse_in = (const T *)a->lse;
    T *dq_out = (T *)a->dq, *dk = (T *)a->dk, *dvo = (T *)a->dv_;
    const T scale = (T)a->scale, keep_scale = (T)a->keep_scale;
    /* Leading dimensions of K^T and V^T padded off a multiple of 4 KiB. */
    const int64_t ldt = (sk + 15) / 16 * 16 + 16;

    T *qs = PyMem_RawMalloc((size_t)(sq * d) * sizeof(T));
    T *go = PyMem_RawMalloc((size_t)(sq * dv) * sizeof(T));
    T *kk = PyMem_RawMalloc((size_t)(sk * d) * sizeof(T));
    T *kt = PyMem_RawMalloc((size_t)(d * ldt) * sizeof(T));
    T *vt = PyMem_RawMalloc((size_t)(dv * ldt) * sizeof(T));
    T *lse = PyMem_RawMalloc((size_t)sq * sizeof(T));
    T *delta = PyMem_RawMalloc((size_t)sq * sizeof(T));
    T *dq = PyMem_RawMalloc((size_t)(sq * d) * sizeof(T));
    T *sbuf = PyMem_RawMalloc((size_t)(bq * bk) * sizeof(T));
    T *pbuf = PyMem_RawMalloc((size_t)(bq * bk) * sizeof(T));
    T *z = PyMem_RawMalloc((size_t)bk * sizeof(T));
    uint32_t *u = PyMem_RawMalloc((size_t)(bk / 4 + 3) * 4 * sizeof(uint32_t));
    uint8_t *keep = PyMem_RawMalloc((size_t)bk);
    int ok = qs && go && kk && kt && vt && lse && delta && dq && sbuf && pbuf && z && u && keep;
    if (ok) {
        for (int64_t r = 0; r < sq; r++) {
            T acc = 0;
            for (int64_t c = 0; c < d; c++)
                qs[r * d + c] = q[r * a->qs0 + c * a->qs1] * scale;
            for (int64_t c = 0; c < dv; c++) {
                T gv = g[r * a->gs0 + c * a->gs1];
                go[r * dv + c] = gv;
                acc += gv * o[r * a->os0 + c * a->os1];
            }
            delta[r] = acc;
            T L = lse_in[r * a->ls0];
            lse[r] = L == -INFINITY ? INFINITY : L; /* rows that saw no key: P = 0 */
        }
        for (int64_t j = 0; j < sk; j++)
            for (int64_t c = 0; c < d; c++)
                kk[j * d + c] = k[j * a->ks0 + c * a->ks1];
        /* K^T and V^T in blocks of 16 keys (see fwd_item). */
        for (int64_t j = 0; j < sk; j += 16) {
            int64_t jn = sk - j < 16 ? sk - j : 16;
            for (int64_t c = 0; c < d; c++)
                for (int64_t t = 0; t < jn; t++)
                    kt[c * ldt + j + t] = kk[(j + t) * d + c];
            for (int64_t c = 0; c < dv; c++)
                for (int64_t t = 0; t < jn; t++)
                    vt[c * ldt + j + t] = v[(j + t) * a->vs0 + c * a->vs1];
        }
        memset(dq, 0, (size_t)(sq * d) * sizeof(T));
        memset(dk, 0, (size_t)(sk * d) * sizeof(T));
        memset(dvo, 0, (size_t)(sk * dv) * sizeof(T));
        for (int64_t j0 = 0; j0 < sk; j0 += bk) {
            int64_t j1 = j0 + bk < sk ? j0 + bk : sk, w = j1 - j0;
            /* The queries that see some key of the block. */
            int64_t ia = j0 - hi > 0 ? j0 - hi : 0;
            int64_t ib = j1 - lo < sq ? j1 - lo : sq;
            for (int64_t i0 = ia; i0 < ib; i0 += bq) {
                int64_t i1 = i0 + bq < ib ? i0 + bq : ib, n = i1 - i0;
                GEMM(NO_TRANS, NO_TRANS, n, w, d, 1, qs + i0 * d, d, kt + j0, ldt, 0, sbuf, w);
                GEMM(NO_TRANS, NO_TRANS, n, w, dv, 1, go + i0 * dv, dv, vt + j0, ldt, 0, pbuf,
                     w);
                SUF(bwd_rows)(sbuf, pbuf, w, i0, i1, j0, lo, hi, lse, delta, &a->dr,
                              keep_scale, u, keep, z);
                /* dV_j += P~^T dO_i;  dQ_i += dS K_j;  dK_j += dS^T (scale Q_i) */
                GEMM(TRANS, NO_TRANS, w, dv, n, 1, sbuf, w, go + i0 * dv, dv, 1, dvo + j0 * dv,
                     dv);
                GEMM(NO_TRANS, NO_TRANS, n, d, w, 1, pbuf, w, kk + j0 * d, d, 1, dq + i0 * d, d);
                GEMM(TRANS, NO_TRANS, w, d, n, 1, pbuf, w, qs + i0 * d, d, 1, dk + j0 * d, d);
            }
        }
        for (int64_t t = 0; t < sq * d; t++)
            dq_out[t] = dq[t] * scale;
    }
    PyMem_RawFree(qs);
    PyMem_RawFree(go);
    PyMem_RawFree(kk);
    PyMem_RawFree(kt);
    PyMem_RawFree(vt);
    PyMem_RawFree(lse);
    PyMem_RawFree(delta);
    PyMem_RawFree(dq);
    PyMem_RawFree(sbuf);
    PyMem_RawFree(pbuf);
    PyMem_RawFree(z);
    PyMem_RawFree(u);
    PyMem_RawFree(keep);
    return ok;
}
