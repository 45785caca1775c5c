// Scalar-field (Fr) kernels: Montgomery conversion, power tables, NTT stages, coset and H evaluation.
//
// Layout: an Fr vector is n elements of 4 little-endian u64 limbs (n x 32 bytes), Montgomery form
// on the device. The NTT is radix-2 decimation-in-time on bit-reversed input: fr_bitrev, then
// ntt_block (the first k stages of each 2^k chunk in shared memory), then one ntt_stage launch per
// remaining stage (ntt_stage2 fuses two stages: radix-4). Twiddles tw[j] = w^j, j < n/2, for the
// largest size built; a smaller size reads them with a stride.
#include "field.cuh"

extern "C" __global__ void fr_to_mont(u64* a, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr_t x = fr_t::load(a + 4 * i);
    x.to_mont().store(a + 4 * i);
}

extern "C" __global__ void fr_from_mont(u64* a, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr_t x = fr_t::load(a + 4 * i);
    x.from_mont().store(a + 4 * i);
}

// out[i] = scale * base^i. pow2[b] = base^(2^b) (Montgomery), b < 32.
extern "C" __global__ void fr_powers(u64* out, const u64* __restrict__ pow2, const u64* __restrict__ scale,
                                     u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr_t acc = fr_t::load(scale);
    u32 e = (u32)i;
    for (int b = 0; e != 0; b++, e >>= 1) {
        if (e & 1u) acc = acc * fr_t::load(pow2 + 4 * b);
    }
    acc.store(out + 4 * i);
}

extern "C" __global__ void fr_bitrev(const u64* __restrict__ in, u64* __restrict__ out, u64 n, int logn) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 r = logn == 0 ? 0u : (__brev((u32)i) >> (32 - logn));
    const ulonglong2* s = (const ulonglong2*)(in + 4 * i);
    ulonglong2* d = (ulonglong2*)(out + 4 * (u64)r);
    d[0] = s[0];
    d[1] = s[1];
}

// In-place bit-reversal permutation: thread i swaps i and rev(i) when i < rev(i).
extern "C" __global__ void fr_bitrev_inplace(u64* a, u64 n, int logn) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 r = logn == 0 ? 0ull : (u64)(__brev((u32)i) >> (32 - logn));
    if (i >= r) return;
    ulonglong2* x = (ulonglong2*)(a + 4 * i);
    ulonglong2* y = (ulonglong2*)(a + 4 * r);
    ulonglong2 x0 = x[0], x1 = x[1], y0 = y[0], y1 = y[1];
    x[0] = y0; x[1] = y1; y[0] = x0; y[1] = x1;
}

__device__ __forceinline__ void butterfly(fr_t& x, fr_t& y, const fr_t& w) {
    fr_t t = y * w;
    y = x - t;
    x = x + t;
}

// First k stages (half = 1 .. 2^(k-1)) of every 2^k chunk; blockDim.x = 2^(k-1).
// tw_stride = (N_table / n): twiddle for half h and offset j is tw[j * (n / (2h)) * tw_stride].
extern "C" __global__ void ntt_block(u64* a, const u64* __restrict__ tw, int logn, int k, u64 tw_stride) {
    extern __shared__ u64 sh[];  // [4][2^k], limb-major to avoid bank conflicts
    const u32 m = 1u << k;
    const u32 t = threadIdx.x;
    u64 base = (u64)blockIdx.x * m;
    for (u32 idx = t; idx < m; idx += blockDim.x) {
#pragma unroll
        for (int l = 0; l < 4; l++) sh[l * m + idx] = a[4 * (base + idx) + l];
    }
    __syncthreads();
    for (int s = 0; s < k; s++) {
        u32 half = 1u << s;
        u32 j = t & (half - 1);
        u32 i0 = ((t >> s) << (s + 1)) | j;
        u32 i1 = i0 + half;
        fr_t x, y, w;
#pragma unroll
        for (int l = 0; l < 4; l++) { x.v[l] = sh[l * m + i0]; y.v[l] = sh[l * m + i1]; }
        u64 twi = ((u64)j << (logn - 1 - s)) * tw_stride;
        w = fr_t::load(tw + 4 * twi);
        butterfly(x, y, w);
#pragma unroll
        for (int l = 0; l < 4; l++) { sh[l * m + i0] = x.v[l]; sh[l * m + i1] = y.v[l]; }
        __syncthreads();
    }
    for (u32 idx = t; idx < m; idx += blockDim.x) {
#pragma unroll
        for (int l = 0; l < 4; l++) a[4 * (base + idx) + l] = sh[l * m + idx];
    }
}

// One radix-2 stage s (half = 2^s) over the whole vector; one thread per butterfly (n/2 threads).
extern "C" __global__ void ntt_stage(u64* a, const u64* __restrict__ tw, int logn, int s, u64 tw_stride) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (1ull << (logn - 1))) return;
    u64 half = 1ull << s;
    u64 j = t & (half - 1);
    u64 i0 = ((t >> s) << (s + 1)) | j;
    u64 i1 = i0 + half;
    fr_t x = fr_t::load(a + 4 * i0);
    fr_t y = fr_t::load(a + 4 * i1);
    fr_t w = fr_t::load(tw + 4 * ((j << (logn - 1 - s)) * tw_stride));
    butterfly(x, y, w);
    x.store(a + 4 * i0);
    y.store(a + 4 * i1);
}

// Two radix-2 stages s and s+1 fused (radix-4); n/4 threads, each owns 4 elements.
extern "C" __global__ void ntt_stage2(u64* a, const u64* __restrict__ tw, int logn, int s, u64 tw_stride) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (1ull << (logn - 2))) return;
    u64 half = 1ull << s;
    u64 j = t & (half - 1);
    u64 i0 = ((t >> s) << (s + 2)) | j;
    u64 i1 = i0 + half, i2 = i0 + 2 * half, i3 = i0 + 3 * half;
    fr_t x0 = fr_t::load(a + 4 * i0), x1 = fr_t::load(a + 4 * i1);
    fr_t x2 = fr_t::load(a + 4 * i2), x3 = fr_t::load(a + 4 * i3);
    // stage s: pairs (i0,i1), (i2,i3) with twiddle index j at half
    fr_t w1 = fr_t::load(tw + 4 * ((j << (logn - 1 - s)) * tw_stride));
    butterfly(x0, x1, w1);
    butterfly(x2, x3, w1);
    // stage s+1: pairs (i0,i2) index j, (i1,i3) index j+half, at 2*half
    fr_t wa = fr_t::load(tw + 4 * ((j << (logn - 2 - s)) * tw_stride));
    fr_t wb = fr_t::load(tw + 4 * (((j + half) << (logn - 2 - s)) * tw_stride));
    butterfly(x0, x2, wa);
    butterfly(x1, x3, wb);
    x0.store(a + 4 * i0); x1.store(a + 4 * i1); x2.store(a + 4 * i2); x3.store(a + 4 * i3);
}

// a[i] *= tab[i]   (coset shift by a power table, or scaling by n^-1 folded into it)
extern "C" __global__ void fr_mul_tab(u64* a, const u64* __restrict__ tab, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    (fr_t::load(a + 4 * i) * fr_t::load(tab + 4 * i)).store(a + 4 * i);
}

// a[i] *= s
extern "C" __global__ void fr_scale(u64* a, const u64* __restrict__ s, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    (fr_t::load(a + 4 * i) * fr_t::load(s)).store(a + 4 * i);
}

// a[i] = (a[i] * b[i] - c[i]) * zinv   (H on the coset: Z is the constant g^n - 1 there)
extern "C" __global__ void fr_h_eval(u64* a, const u64* __restrict__ b, const u64* __restrict__ c,
                                     const u64* __restrict__ zinv, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr_t x = fr_t::load(a + 4 * i) * fr_t::load(b + 4 * i) - fr_t::load(c + 4 * i);
    (x * fr_t::load(zinv)).store(a + 4 * i);
}

// Test hooks for the field layer: out = op(x, y) elementwise, all Montgomery.
extern "C" __global__ void fr_test_ops(const u64* __restrict__ x, const u64* __restrict__ y, u64* out, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr_t a = fr_t::load(x + 4 * i), b = fr_t::load(y + 4 * i);
    (a + b).store(out + 16 * i);
    (a - b).store(out + 16 * i + 4);
    (a * b).store(out + 16 * i + 8);
    a.neg().store(out + 16 * i + 12);
}

// ---------------------------------------------------------------------------------------------------
// Pass-structured NTT (issue 13): log2(n) radix-2 DIT stages in P = ceil(log2(n) / 8) passes over
// global memory, each pass k <= 8 stages of 2^k-point transforms in shared memory.
//
// DIT on bit-reversed input, stage s pairs (i, i + 2^s) with twiddle w_{2^(s+1)}^(i mod 2^s). The
// stages [lo, lo + k) of a pass touch, for each fixed "column" L = i mod 2^lo and "row block"
// hi = i >> (lo + k), the 2^k elements i = hi 2^(lo+k) + b 2^lo + L (b < 2^k). Their twiddles split as
// w_{2^(t+1)}^(b mod 2^t) (t = s - lo) times a factor that depends on L alone, and that factor comes
// out of the butterflies as one multiplication of slot b by w_{2^(lo+k)}^(L rev_k(b)) before them (the
// "pre-twiddle"; 1 for the first pass). What is left is a plain 2^k-point DIT whose twiddles are
// powers of w_256: a 128-entry table (`small`). One block holds C columns x 2^k rows (a tile of
// C 2^k <= 1024 elements; rows of C consecutive elements in memory, so loads and stores are runs of
// C x 32 bytes) in shared memory as 8 planes of 32-bit limbs, swizzled so that no sub-pass has bank
// conflicts. Each thread owns 8 elements at a time and does 3 stages in registers per sub-pass
// (8 stages: 3 + 3 + 2), so a pass costs 3 trips through shared memory, not 8.
//
// First pass: reads the input at bit-reversed positions (the permutation is fused into the load,
// which is why the first pass writes to a scratch buffer), multiplies by the coset table for a
// forward coset transform. Last pass: multiplies by `post` (1/n, or 7^-i / n for an inverse coset
// transform) on the way out and writes to the caller's array. Middle passes work in place (a tile's
// elements are read and written by its block alone). blockIdx.y selects the vector of a batch.
// ---------------------------------------------------------------------------------------------------
#include "fr32.cuh"

#define NTT_TILE 1024  // elements of a block's tile; 8 planes of u32 = 32 KiB of shared memory
#ifndef NTT_SHARED
#define NTT_SHARED __shared__  // (a host emulation of the kernels redefines it)
#endif
#define NTT_THREADS 128  // NTT_TILE / 8 elements per thread (EB = 3)

__device__ __forceinline__ u32 ntt_swz(u32 idx) { return idx ^ (((idx >> 5) & 7u) << 2); }
__device__ __forceinline__ u32 ntt_rev(u32 x, int bits) { return bits == 0 ? 0u : (__brev(x) >> (32 - bits)); }

__device__ __forceinline__ void sh_put(u32 (*sh)[NTT_TILE], u32 pos, const fr32& x) {
#pragma unroll
    for (int l = 0; l < 8; l++) sh[l][pos] = x.l[l];
}
__device__ __forceinline__ void sh_get(u32 (*sh)[NTT_TILE], u32 pos, fr32& x) {
#pragma unroll
    for (int l = 0; l < 8; l++) x.l[l] = sh[l][pos];
}
__device__ __forceinline__ void sh_put(u32 (*sh)[NTT_TILE], u32 pos, const fr_t& x) {
#pragma unroll
    for (int l = 0; l < 4; l++) { sh[2 * l][pos] = (u32)x.v[l]; sh[2 * l + 1][pos] = (u32)(x.v[l] >> 32); }
}
__device__ __forceinline__ void sh_get(u32 (*sh)[NTT_TILE], u32 pos, fr_t& x) {
#pragma unroll
    for (int l = 0; l < 4; l++) x.v[l] = (u64)sh[2 * l][pos] | ((u64)sh[2 * l + 1][pos] << 32);
}
__device__ __forceinline__ fr32 ld_elem(const u64* p, fr32*) { return fr32::load(p); }
__device__ __forceinline__ fr32 ld_table(const u64* p, fr32*) { return fr32::load_ro(p); }
__device__ __forceinline__ void st_elem(u64* p, const fr32& x) { x.store(p); }
__device__ __forceinline__ fr32 neg_nz(const fr32& x) { return x.neg_nonzero(); }
__device__ __forceinline__ fr_t ld_elem(const u64* p, fr_t*) { return fr_t::load(p); }
__device__ __forceinline__ fr_t ld_table(const u64* p, fr_t*) { return fr_t::load(p); }
__device__ __forceinline__ void st_elem(u64* p, const fr_t& x) { x.store(p); }
__device__ __forceinline__ fr_t neg_nz(const fr_t& x) { return x.neg(); }

// Global address (element index) of tile slot (c, b) in pass (lo, k) of a 2^logn transform;
// `load` selects the first pass's bit-reversed read side.
__device__ __forceinline__ u32 ntt_addr(u32 tile, u32 c, u32 b, int logn, int lo, int k, int logc, bool load) {
    if (lo == 0) {
        u32 r = (tile << logc) + c;  // rev_{logn-k} of the group this column holds
        return load ? ((ntt_rev(b, k) << (logn - k)) + r) : ((ntt_rev(r, logn - k) << k) + b);
    }
    u32 per = 1u << (lo - logc);  // tiles per row block
    u32 hi = tile >> (lo - logc), l0 = (tile & (per - 1)) << logc;
    return (hi << (lo + k)) + (b << lo) + l0 + c;
}

// One pass. src/dst: the batch's first vector (blockIdx.y picks the vector, n elements apart; src may
// equal dst except in the first pass of several). tw: w^j, j < n/2 (w^-j for an inverse). small:
// w_256^j, j < 128 (inverse root for an inverse). coset: n-entry table multiplied in on the first
// pass's load, or null. post: n-entry table multiplied in on the last pass's store, or null; post1: a
// single factor instead (1/n), or null. EB: each thread holds E = 2^EB elements (8 or 4) and does EB stages
// per trip through shared memory. Launch: grid (n / (2^logc 2^k), batch), block 2^(logc+k-EB).
template <class F, int EB>
__device__ __forceinline__ void ntt_pass_body(const u64* src, u64* dst, const u64* __restrict__ tw,
                                              const u64* __restrict__ small, const u64* __restrict__ coset,
                                              const u64* __restrict__ post, const u64* __restrict__ post1,
                                              int logn, int lo, int k, int logc) {
    constexpr int E = 1 << EB;
    constexpr int G = EB == 3 ? 4 : 2;  // elements whose factors are loaded together (load and store phases)
    NTT_SHARED u32 sh[8][NTT_TILE];
    const u32 tid = threadIdx.x, nthr = blockDim.x, tile = blockIdx.x;
    const u32 C = 1u << logc;
    const u64 voff = (u64)blockIdx.y << logn;
    src += 4 * voff;
    dst += 4 * voff;
    const bool last = lo + k == logn;
    // load: element idx = tid + i nthr, column c = idx mod C, row b = idx / C. With a factor to multiply in
    // (coset table, pre-twiddle), four elements and their four factors are loaded before the first use, so
    // eight loads are in flight (the pre-twiddles of the last pass are scattered reads from device memory).
    if (lo == 0 && coset == 0) {
        F e[E];
#pragma unroll
        for (int i = 0; i < E; i++) {
            u32 idx = tid + i * nthr, c = idx & (C - 1), b = idx >> logc;
            e[i] = ld_elem(src + 4 * (u64)ntt_addr(tile, c, b, logn, lo, k, logc, true), (F*)0);
        }
#pragma unroll
        for (int i = 0; i < E; i++) sh_put(sh, ntt_swz(tid + i * nthr), e[i]);
    } else {
        const u32 half = 1u << (logn - 1);
#pragma unroll
        for (int h = 0; h < E; h += G) {
            F e[G], w[G];
            bool neg[G];
#pragma unroll
            for (int i = 0; i < G; i++) {
                u32 idx = tid + (h + i) * nthr, c = idx & (C - 1), b = idx >> logc;
                u32 a = ntt_addr(tile, c, b, logn, lo, k, logc, true);
                e[i] = ld_elem(src + 4 * (u64)a, (F*)0);
                if (lo == 0) {
                    w[i] = ld_table(coset + 4 * (u64)a, (F*)0);
                    neg[i] = false;
                } else {
                    u32 l = ((tile & ((1u << (lo - logc)) - 1)) << logc) + c;
                    u32 ex = (l * ntt_rev(b, k)) << (logn - lo - k);  // < n
                    w[i] = ld_table(tw + 4 * (u64)(ex & (half - 1)), (F*)0);
                    neg[i] = (ex & half) != 0;
                }
            }
#pragma unroll
            for (int i = 0; i < G; i++) {
                if (neg[i]) w[i] = neg_nz(w[i]);
                sh_put(sh, ntt_swz(tid + (h + i) * nthr), e[i] * w[i]);
            }
        }
    }
    __syncthreads();
    // sub-passes: EB stages each (the last one of a pass may do fewer); thread = (column c, index q);
    // its E elements are the rows b = base | j << u, j < E, and it does the stages u + m, m in
    // [EB - nb, EB) (nb = stages of this sub-pass), on the bits of j.
    const u32 c = tid & (C - 1), q = tid >> logc;
    for (int t0 = 0; t0 < k; t0 += EB) {
        const int nb = k - t0 < EB ? k - t0 : EB;
        const int u = t0 + nb - EB;
        const u32 base = (q & ((1u << u) - 1)) | ((q >> u) << (u + EB));
        F e[E];
#pragma unroll
        for (int j = 0; j < E; j++) sh_get(sh, ntt_swz(((base | ((u32)j << u)) << logc) + c), e[j]);
#pragma unroll
        for (int m = 0; m < EB; m++) {
            if (m < EB - nb) continue;
            const int t = u + m;  // stage within the pass
#pragma unroll
            for (int j = 0; j < E; j++) {
                if (j & (1 << m)) continue;
                F v = e[j + (1 << m)];
                // twiddle w_{2^(t+1)}^ex = w_256^(ex << (7 - t)); exponent 0 (twiddle 1) is known at
                // compile time when u = 0 (a pass's first sub-pass) and the low m bits of j are 0
                if (!(u == 0 && (j & ((1 << m) - 1)) == 0)) {
                    u32 ex = (base & ((1u << u) - 1)) | ((u32)(j & ((1 << m) - 1)) << u);
                    v = v * ld_table(small + 4 * (u64)(ex << (7 - t)), (F*)0);
                }
                F a = e[j];
                e[j] = a + v;
                e[j + (1 << m)] = a - v;
            }
        }
#pragma unroll
        for (int j = 0; j < E; j++) sh_put(sh, ntt_swz(((base | ((u32)j << u)) << logc) + c), e[j]);
        __syncthreads();
    }
    // store (the last pass multiplies by post or post1 on the way: four factors loaded before the first use)
    if (last && post != 0) {
#pragma unroll
        for (int h = 0; h < E; h += G) {
            F x[G], f[G];
            u32 a[G];
#pragma unroll
            for (int i = 0; i < G; i++) {
                u32 idx = tid + (h + i) * nthr, cc = idx & (C - 1), b = idx >> logc;
                a[i] = ntt_addr(tile, cc, b, logn, lo, k, logc, false);
                f[i] = ld_table(post + 4 * (u64)a[i], (F*)0);
                sh_get(sh, ntt_swz(idx), x[i]);
            }
#pragma unroll
            for (int i = 0; i < G; i++) st_elem(dst + 4 * (u64)a[i], x[i] * f[i]);
        }
    } else {
        const bool scale = last && post1 != 0;
        F s1;
        if (scale) s1 = ld_table(post1, (F*)0);
#pragma unroll
        for (int i = 0; i < E; i++) {
            u32 idx = tid + i * nthr, cc = idx & (C - 1), b = idx >> logc;
            F x;
            sh_get(sh, ntt_swz(idx), x);
            if (scale) x = x * s1;
            st_elem(dst + 4 * (u64)ntt_addr(tile, cc, b, logn, lo, k, logc, false), x);
        }
    }
}

#define NTT_PASS_KERNEL(name, F, EB, bounds)                                                                       \
    extern "C" __global__ void bounds name(const u64* src, u64* dst, const u64* __restrict__ tw,                \
                                           const u64* __restrict__ small, const u64* __restrict__ coset,          \
                                           const u64* __restrict__ post, const u64* __restrict__ post1, int logn, \
                                           int lo, int k, int logc) {                                             \
        ntt_pass_body<F, EB>(src, dst, tw, small, coset, post, post1, logn, lo, k, logc);                          \
    }
// ntt_pass: 128 registers, 4 blocks of 128 threads per SM (before the loads went four at a time it took
// 150 and ran 3 blocks: 5.25 ms at 2^24 against 4.82 capped at 128, 2026-12-01); ntt_pass_o5: capped at 96
// registers for 5 blocks per SM (about 200 bytes of spills); ntt_pass_e4: 4 elements per thread (256
// threads, 2 stages per trip through shared memory), capped for 3 blocks per SM: 24 warps against 16 (the
// profile of ntt_pass showed issue slots 44 % busy at 4 warps per scheduler: latency, not a pipe);
// ntt_pass_m64: field.cuh's 64-bit-limb arithmetic (what the pass structure alone gives: 13.6 ms at 2^24,
// slower than the radix-2 kernels, 2026-12-01). A/B variants: cuda_ntt.IMPLS.
NTT_PASS_KERNEL(ntt_pass, fr32, 3, __launch_bounds__(NTT_THREADS))
NTT_PASS_KERNEL(ntt_pass_o5, fr32, 3, __launch_bounds__(NTT_THREADS, 5))
NTT_PASS_KERNEL(ntt_pass_e4, fr32, 2, __launch_bounds__(2 * NTT_THREADS, 3))
NTT_PASS_KERNEL(ntt_pass_m64, fr_t, 3, __launch_bounds__(NTT_THREADS))

// Test hook for fr32: out = (x + y, x - y, x * y, p - x) elementwise (Montgomery), as fr_test_ops.
extern "C" __global__ void fr32_test_ops(const u64* __restrict__ x, const u64* __restrict__ y, u64* out, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr32 a = fr32::load(x + 4 * i), b = fr32::load(y + 4 * i);
    (a + b).store(out + 16 * i);
    (a - b).store(out + 16 * i + 4);
    (a * b).store(out + 16 * i + 8);
    fr32 z = a - a;  // zero
    (z - a).store(out + 16 * i + 12);
}
