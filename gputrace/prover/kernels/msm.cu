// G1 multi-scalar multiplication (Pippenger, sort-based bucket accumulation) and batch addition.
//
// Data: bases are affine points, 12 u64 each (x then y, Montgomery, (0,0) = infinity); scalars are
// Fr elements in standard form, 4 u64 each; XYZZ points are 24 u64 each.
// Steps (driven from cuda_msm.py):
//   1. msm_digits: key[w*n+i] = (w << c) | digit_w(s_i), or 0xffffffff for a zero digit.
//   2. sort keys (CuPy argsort, or the counting sort msm_bucket_count/scatter) -> perm; bucket b owns the run of
//      equal keys.
//   3. runs are cut into chunks of at most S entries; sum_affine_chunks sums each chunk;
//      sum_xyzz_chunks repeats on the partial sums until every bucket is one point
//      (bounded work per thread even when one bucket holds most points). Or (sum_affine_balanced) every
//      thread takes exactly S sorted entries across bucket boundaries, and the pieces of the buckets that
//      cross threads are summed the same way.
//   4. bucket_reduce: window w's sum_d d*B_d, in G segments per window, then the segments summed;
//   5. msm_horner: sum_w 2^(c*w) W_w on one thread.
// G2 (b_g2): the same steps over Fq2 (kernels g2_*; affine bases 24 u64, XYZZ points 48 u64).
// Signed digits (msm_digits_signed): digits in [-2^(c-1), 2^(c-1)] (the top window unsigned), the sign kept
// in a byte array beside the keys; accumulation adds -P (y negated) for a negative digit. Buckets keep the
// layout w * 2^c + |digit|, so bucket_reduce is the same for both digit kinds.
// Fq arithmetic: 32-bit limbs with PTX carry chains (fq_mul32.cuh) unless GPUTRACE_MSM_FQ_C64 (the 64-bit C
// CIOS of field.cuh, kept for A/B runs) or GPUTRACE_FQ_MUL_INLINE (the inlined-C A/B build) is defined.
#if !defined(GPUTRACE_MSM_FQ_C64) && !defined(GPUTRACE_FQ_MUL_INLINE)
#define GPUTRACE_FQ_MUL_PTX
#endif
#include "ec.cuh"

extern "C" __global__ void fq_to_mont(u64* a, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fq_t::load(a + 6 * i).to_mont().store(a + 6 * i);
}

extern "C" __global__ void fq_from_mont(u64* a, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fq_t::load(a + 6 * i).from_mont().store(a + 6 * i);
}

extern "C" __global__ void msm_digits(const u64* __restrict__ scalars, u64 n, int c, int nw, u32* keys) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 s[4];
#pragma unroll
    for (int l = 0; l < 4; l++) s[l] = scalars[4 * i + l];
    u32 mask = (1u << c) - 1u;
    for (int w = 0; w < nw; w++) {
        int bit = w * c;
        int limb = bit >> 6, off = bit & 63;
        u64 v = limb < 4 ? (s[limb] >> off) : 0;
        if (off + c > 64 && limb + 1 < 4) v |= s[limb + 1] << (64 - off);
        u32 d = (u32)v & mask;
        keys[(u64)w * n + i] = d == 0 ? 0xffffffffu : (((u32)w << c) | d);
    }
}

// Signed digits: window w's digit is its c bits plus the carry of window w-1; above 2^(c-1) it becomes
// digit - 2^c (negative, carry 1), except in the top window, which stays unsigned. The caller picks nw so that
// the top window's digit stays below 2^c for every scalar < r (cuda_msm.signed_windows).
// keys as msm_digits with |digit|; neg[w*n+i] = 1 for a negative digit.
extern "C" __global__ void msm_digits_signed(const u64* __restrict__ scalars, u64 n, int c, int nw, u32* keys,
                                             unsigned char* neg) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 s[4];
#pragma unroll
    for (int l = 0; l < 4; l++) s[l] = scalars[4 * i + l];
    const u32 mask = (1u << c) - 1u, full = 1u << c, half = 1u << (c - 1);
    u32 carry = 0;
    for (int w = 0; w < nw; w++) {
        int bit = w * c;
        int limb = bit >> 6, off = bit & 63;
        u64 v = limb < 4 ? (s[limb] >> off) : 0;
        if (off + c > 64 && limb + 1 < 4) v |= s[limb + 1] << (64 - off);
        u32 raw = ((u32)v & mask) + carry;
        u32 d;
        unsigned char ng = 0;
        if (w + 1 < nw && raw > half) {
            d = full - raw;  // 0 when raw == 2^c
            ng = d != 0;
            carry = 1;
        } else {
            d = raw;
            carry = 0;
        }
        keys[(u64)w * n + i] = d == 0 ? 0xffffffffu : (((u32)w << c) | d);
        neg[(u64)w * n + i] = ng;
    }
}

// Counting sort of the keys by bucket (the alternative to CuPy's argsort + searchsorted): counts[key] += 1 for
// every non-zero digit, then (after an exclusive scan of counts into cursor) each key takes the next slot of its
// bucket: perm[cursor[key]++] = its index. Order inside a bucket is arbitrary (the bucket sum does not depend on it).
extern "C" __global__ void msm_bucket_count(const u32* __restrict__ keys, u64 m, u32* counts) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    u32 k = keys[t];
    if (k != 0xffffffffu) atomicAdd(counts + k, 1u);
}

extern "C" __global__ void msm_bucket_scatter(const u32* __restrict__ keys, u64 m, unsigned long long* cursor,
                                              long long* perm) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    u32 k = keys[t];
    if (k != 0xffffffffu) perm[atomicAdd(cursor + k, 1ull)] = (long long)t;
}

// The point kernels are templates over the XYZZ type (xyzz_t: G1, xyzz2_t: G2); the extern "C" wrappers
// are named g1 (no prefix, as before) and g2_*.

// out[dst ? dst[t] : t] = sum of (neg[perm[k]] ? -1 : 1) * bases[perm[k] % nbases] for k in [cstart[t], cend[t])
// (neg read only when use_neg).
template <class X>
__device__ __forceinline__ void sum_affine_chunks_impl(const u64* __restrict__ bases, const long long* __restrict__ perm,
                                                       u64 nbases, const long long* __restrict__ cstart,
                                                       const long long* __restrict__ cend,
                                                       const long long* __restrict__ dst, int use_dst, u64* out,
                                                       u64 nchunks, const unsigned char* __restrict__ neg,
                                                       int use_neg) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nchunks) return;
    long long b = cstart[t], e = cend[t];
    X acc = X::inf();
    for (long long k = b; k < e; k++) {
        u64 key = (u64)perm[k];
        typename X::affine_t a = X::affine_t::load(bases + 2 * X::L * (key % nbases));
        if (use_neg && neg[key]) a.y = X::fq_t::zero() - a.y;  // -P; infinity (0, 0) stays (0, 0)
        acc = acc.add_affine(a);
    }
    u64 o = use_dst ? (u64)dst[t] : t;
    acc.store(out + X::WORDS * o);
}

// Load-balanced accumulation: thread t sums the sorted entries [t*S, min((t+1)*S, m)) whatever buckets they
// belong to (bucket b owns [off[b], off[b+1]); off has nb + 1 entries, off[nb] = m). A bucket that lies wholly in
// the thread's range is written to buckets[b]; the thread's first and last segments, when their bucket goes on in
// a neighbouring thread, become pieces: slot 2t (first) and 2t+1 (last), piece_b[slot] = their bucket (-1: slot
// unused). Pieces in slot order have non-decreasing buckets, so the caller sums runs of equal piece_b.
template <class X>
__device__ __forceinline__ void sum_affine_balanced_impl(const u64* __restrict__ bases,
                                                         const long long* __restrict__ perm, u64 nbases,
                                                         const long long* __restrict__ off, u64 nb, u64 m, u64 S,
                                                         const unsigned char* __restrict__ neg, int use_neg,
                                                         u64* buckets, u64* pieces, long long* piece_b) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 a = t * S;
    if (a >= m) return;
    u64 e = a + S < m ? a + S : m;
    // b: the last bucket with off[b] <= a (non-empty, since a < off[nb])
    u64 lo = 0, hi = nb;  // off[lo] <= a < off[hi]
    while (hi - lo > 1) {
        u64 mid = (lo + hi) >> 1;
        if ((u64)off[mid] <= a) lo = mid; else hi = mid;
    }
    u64 b = lo;
    u64 bs = (u64)off[b], be = (u64)off[b + 1];
    u64 seg = a;
    long long slot0 = -1, slot1 = -1;
    X acc = X::inf();
    // One flat loop (every thread of a warp runs S iterations of the same call site); a segment ends at the end
    // of its bucket or of the thread's range, and only the short flush below diverges.
    for (u64 k = a; k < e; k++) {
        u64 key = (u64)perm[k];
        typename X::affine_t p = X::affine_t::load(bases + 2 * X::L * (key % nbases));
        if (use_neg && neg[key]) p.y = X::fq_t::zero() - p.y;
        acc = acc.add_affine(p);
        if (k + 1 == be || k + 1 == e) {
            if (seg == bs && k + 1 == be) {
                acc.store(buckets + X::WORDS * b);
            } else if (seg == a) {
                acc.store(pieces + X::WORDS * (2 * t));
                slot0 = (long long)b;
            } else {
                acc.store(pieces + X::WORDS * (2 * t + 1));
                slot1 = (long long)b;
            }
            acc = X::inf();
            seg = k + 1;
            if (k + 1 < e) {
                b++;
                while ((u64)off[b + 1] == k + 1) b++;  // skip empty buckets (terminates: off[nb] = m > k + 1)
                bs = (u64)off[b];
                be = (u64)off[b + 1];
            }
        }
    }
    piece_b[2 * t] = slot0;
    piece_b[2 * t + 1] = slot1;
}

// out[dst ? dst[t] : t] = sum of in[k] (XYZZ) for k in [cstart[t], cend[t]).
template <class X>
__device__ __forceinline__ void sum_xyzz_chunks_impl(const u64* __restrict__ in, const long long* __restrict__ cstart,
                                                     const long long* __restrict__ cend,
                                                     const long long* __restrict__ dst, int use_dst, u64* out,
                                                     u64 nchunks) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nchunks) return;
    long long b = cstart[t], e = cend[t];
    X acc = X::inf();
    for (long long k = b; k < e; k++) acc = acc.add(X::load(in + X::WORDS * (u64)k));
    u64 o = use_dst ? (u64)dst[t] : t;
    acc.store(out + X::WORDS * o);
}

// buckets: nw windows x 2^c XYZZ points (bucket d of window w at w*2^c + d; bucket 0 unused = inf).
// Thread (w, g) covers buckets [a, a+m) with m = 2^c / G, a = g*m, and writes
// sum_{j in [a, a+m)} j * B_j to seg[w*G + g].
template <class X>
__device__ __forceinline__ void bucket_reduce_impl(const u64* __restrict__ buckets, int c, int nw, int G, u64* seg) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (u64)nw * G) return;
    u32 w = t / G, g = t % G;
    u32 m = (1u << c) / G;
    u32 a = g * m;
    const u64* B = buckets + X::WORDS * (((u64)w << c) + a);
    X sum = X::inf(), acc = X::inf();
    for (int j = (int)m - 1; j >= 0; j--) {
        acc = acc.add(sum);                      // acc = sum_k (k - a) B_k after the loop
        sum = sum.add(X::load(B + X::WORDS * j));
    }
    acc = acc.add(sum.mul_small(a));
    acc.store(seg + X::WORDS * t);
}

// out = sum_w 2^(c*w) * win[w], one thread.
template <class X>
__device__ __forceinline__ void msm_horner_impl(const u64* __restrict__ win, int c, int nw, u64* out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    X acc = X::load(win + X::WORDS * (u64)(nw - 1));
    for (int w = nw - 2; w >= 0; w--) {
        for (int i = 0; i < c; i++) acc = acc.dbl();
        acc = acc.add(X::load(win + X::WORDS * (u64)w));
    }
    acc.store(out);
}

#define MSM_KERNELS(PREFIX, X)                                                                                 \
    extern "C" __global__ void PREFIX##sum_affine_chunks(                                                      \
        const u64* __restrict__ bases, const long long* __restrict__ perm, u64 nbases,                         \
        const long long* __restrict__ cstart, const long long* __restrict__ cend,                              \
        const long long* __restrict__ dst, int use_dst, u64* out, u64 nchunks,                                 \
        const unsigned char* __restrict__ neg, int use_neg) {                                                  \
        sum_affine_chunks_impl<X>(bases, perm, nbases, cstart, cend, dst, use_dst, out, nchunks, neg, use_neg); \
    }                                                                                                          \
    extern "C" __global__ void PREFIX##sum_affine_balanced(                                                    \
        const u64* __restrict__ bases, const long long* __restrict__ perm, u64 nbases,                         \
        const long long* __restrict__ off, u64 nb, u64 m, u64 S, const unsigned char* __restrict__ neg,        \
        int use_neg, u64* buckets, u64* pieces, long long* piece_b) {                                          \
        sum_affine_balanced_impl<X>(bases, perm, nbases, off, nb, m, S, neg, use_neg, buckets, pieces, piece_b); \
    }                                                                                                          \
    extern "C" __global__ void PREFIX##sum_xyzz_chunks(                                                        \
        const u64* __restrict__ in, const long long* __restrict__ cstart, const long long* __restrict__ cend, \
        const long long* __restrict__ dst, int use_dst, u64* out, u64 nchunks) {                               \
        sum_xyzz_chunks_impl<X>(in, cstart, cend, dst, use_dst, out, nchunks);                                 \
    }                                                                                                          \
    extern "C" __global__ void PREFIX##bucket_reduce(const u64* __restrict__ buckets, int c, int nw, int G,    \
                                                     u64* seg) {                                               \
        bucket_reduce_impl<X>(buckets, c, nw, G, seg);                                                         \
    }                                                                                                          \
    extern "C" __global__ void PREFIX##msm_horner(const u64* __restrict__ win, int c, int nw, u64* out) {      \
        msm_horner_impl<X>(win, c, nw, out);                                                                   \
    }

MSM_KERNELS(, xyzz_t)
#ifndef GPUTRACE_FQ_MUL_INLINE  // the inlined-Fq A/B build (module msm_inline) is G1 only: G2 would double its build
MSM_KERNELS(g2_, xyzz2_t)
#endif

// Test hooks: Fq ops, and point ops (P + Q mixed and general, 2P) for the CPU oracle.
extern "C" __global__ void fq_test_ops(const u64* __restrict__ x, const u64* __restrict__ y, u64* out, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fq_t a = fq_t::load(x + 6 * i), b = fq_t::load(y + 6 * i);
    (a + b).store(out + 24 * i);
    (a - b).store(out + 24 * i + 6);
    (a * b).store(out + 24 * i + 12);
    a.neg().store(out + 24 * i + 18);
}

extern "C" __global__ void g1_test_ops(const u64* __restrict__ p, const u64* __restrict__ q, u64* out, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    affine_t a = affine_t::load(p + 12 * i), b = affine_t::load(q + 12 * i);
    xyzz_t pa = xyzz_t::from_affine(a), pb = xyzz_t::from_affine(b);
    pa.add_affine(b).store(out + 96 * i);         // mixed add
    pa.add(pb).store(out + 96 * i + 24);           // general add
    pa.dbl().store(out + 96 * i + 48);             // doubling
    pa.add(pb).add_affine(a).add(pa.dbl().add(pb).dbl()).store(out + 96 * i + 72);  // 2P+Q + 2(2P+Q)
}
