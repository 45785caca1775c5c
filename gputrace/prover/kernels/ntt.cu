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
