// Key generation on the GPU: fixed-base multiples of the generators, and the Fr arithmetic that
// makes their scalars (Lagrange weights at tau, the QAP column sums, the fingerprint's row values).
//
// Fixed base: k*G for millions of k with a table of the generator, T[j][d] = d * 256^j * G (32 windows
// of 8 bits, d = 0..255; affine, Montgomery; what fixed_base.py's CPU path uses), so k*G is the sum of
// T[j][byte_j(k)] over the non-zero bytes of k: at most 32 mixed XYZZ additions per point, one thread
// per scalar. The result goes to affine with one Fermat inversion per point (t = 1/(ZZ*ZZZ):
// x = X*ZZZ*t, y = Y*ZZ*t) and is written as canonical little-endian limbs, x then y (G2: x.c0, x.c1,
// y.c0, y.c1): the bytes of arkworks' to_xy_bytes_le, the identity as zeros.
//
// Scalars are canonical Fr limbs (4 u64, little-endian); a scalar >= r still gives (k mod r)*G since G
// has order r. Fr vectors of the QAP kernels are Montgomery form (fr_t), converted by fb_fr_to_mont /
// fb_fr_from_mont. Driven from backends/cuda_fixed_base.py.
#include "ec.cuh"

__constant__ u64 FB_FQ_P_MINUS_2[6] = {0xb9feffffffffaaa9ull, 0x1eabfffeb153ffffull, 0x6730d2a0f6b0f624ull,
                                       0x64774b84f38512bfull, 0x4b1ba7b6434bacd7ull, 0x1a0111ea397fe69aull};
__constant__ u64 FB_FR_R_MINUS_2[4] = {0xfffffffeffffffffull, 0x53bda402fffe5bfeull, 0x3339d80809a1d805ull,
                                       0x73eda753299d7d48ull};

// a^e for e given as `limbs` little-endian u64 words (left-to-right square-and-multiply).
template <class F>
__device__ F fb_pow(const F& a, const u64* e, int limbs) {
    F r = F::one();
    bool started = false;
    for (int i = limbs * 64 - 1; i >= 0; i--) {
        if (started) r = r.sqr();
        if ((e[i >> 6] >> (i & 63)) & 1ull) {
            r = started ? r * a : a;
            started = true;
        }
    }
    return r;
}

__device__ __forceinline__ fr_t fb_fr_pow_u64(fr_t a, u64 e) {
    fr_t r = fr_t::one();
    while (e) {
        if (e & 1ull) r = r * a;
        a = a.sqr();
        e >>= 1;
    }
    return r;
}

// Inverses by Fermat (the caller never passes zero: an XYZZ point that is not infinity has ZZ, ZZZ != 0).
__device__ __forceinline__ fq_t fb_inv(const fq_t& a) { return fb_pow(a, FB_FQ_P_MINUS_2, 6); }
__device__ __forceinline__ fq2_t fb_inv(const fq2_t& a) {  // (c0 + c1 u)^-1 = (c0 - c1 u) / (c0^2 + c1^2)
    fq_t t = fb_pow(a.c0.sqr() + a.c1.sqr(), FB_FQ_P_MINUS_2, 6);
    fq2_t r;
    r.c0 = a.c0 * t;
    r.c1 = (a.c1 * t).neg();
    return r;
}

__device__ __forceinline__ void fb_store_canonical(const fq_t& a, u64* dst) { a.from_mont().store(dst); }
__device__ __forceinline__ void fb_store_canonical(const fq2_t& a, u64* dst) {
    a.c0.from_mont().store(dst);
    a.c1.from_mont().store(dst + 6);
}

template <class F>
__device__ __forceinline__ void fixed_base_mul_impl(const u64* __restrict__ scalars, u64 n,
                                                    const u64* __restrict__ table, u64* __restrict__ out) {
    typedef xyzz_T<F> X;
    typedef affine_T<F> A;
    constexpr int AW = 2 * F::LIMBS;  // u64 words of one affine point
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    X acc = X::inf();
#pragma unroll 1
    for (int l = 0; l < 4; l++) {
        u64 s = scalars[4 * i + l];
#pragma unroll 1
        for (int b = 0; b < 8; b++) {
            u32 d = (u32)(s >> (8 * b)) & 0xffu;
            if (d) acc = acc.add_affine(A::load(table + ((u64)(8 * l + b) * 256u + d) * AW));
        }
    }
    u64* o = out + (u64)AW * i;
    if (acc.is_inf()) {
        for (int w = 0; w < AW; w++) o[w] = 0;
        return;
    }
    F t = fb_inv(acc.ZZ * acc.ZZZ);
    fb_store_canonical(acc.X * (acc.ZZZ * t), o);
    fb_store_canonical(acc.Y * (acc.ZZ * t), o + F::LIMBS);
}

// out[i] = scalars[i] * G1 (12 u64, canonical affine x then y; zeros for the identity).
extern "C" __global__ void fb_mul_g1(const u64* __restrict__ scalars, u64 n, const u64* __restrict__ table,
                                     u64* __restrict__ out) {
    fixed_base_mul_impl<fq_t>(scalars, n, table, out);
}

// out[i] = scalars[i] * G2 (24 u64: x.c0, x.c1, y.c0, y.c1 canonical; zeros for the identity).
extern "C" __global__ void fb_mul_g2(const u64* __restrict__ scalars, u64 n, const u64* __restrict__ table,
                                     u64* __restrict__ out) {
    fixed_base_mul_impl<fq2_t>(scalars, n, table, out);
}

// In place: `count` Fq elements (6 u64 each) to Montgomery form (the tables come from the host canonical).
extern "C" __global__ void fb_fq_to_mont(u64* a, u64 count) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    fq_t::load(a + 6 * i).to_mont().store(a + 6 * i);
}

extern "C" __global__ void fb_fr_to_mont(u64* a, u64 count) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    fr_t::load(a + 4 * i).to_mont().store(a + 4 * i);
}

extern "C" __global__ void fb_fr_from_mont(u64* a, u64 count) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    fr_t::load(a + 4 * i).from_mont().store(a + 4 * i);
}

// Lagrange weights at tau over the size-n domain: out[j] = scale * w^j / (tau - w^j).
// consts: omega, tau, scale (Montgomery, 4 u64 each). Sets *err when tau is a domain point.
extern "C" __global__ void qap_lagrange(u64* __restrict__ out, u64 n, const u64* __restrict__ consts, int* err) {
    u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    fr_t w = fb_fr_pow_u64(fr_t::load(consts), j);
    fr_t d = fr_t::load(consts + 4) - w;
    if (d.is_zero()) {
        atomicOr(err, 1);
        fr_t::zero().store(out + 4 * j);
        return;
    }
    (fr_t::load(consts + 8) * w * fb_pow(d, FB_FR_R_MINUS_2, 4)).store(out + 4 * j);
}

// Column sums of the K copies of a block (keygen/block.py): out[k*ncol + c] = sum over the block's terms
// t of column c (colptr[c] .. colptr[c+1], sorted by column) of coef[t] * L[k*per + row[t]].
extern "C" __global__ void qap_columns(const u64* __restrict__ L, const long long* __restrict__ colptr,
                                       const int* __restrict__ trow, const u64* __restrict__ tcoef, u64 ncol,
                                       u64 K, u64 per, u64* __restrict__ out) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= K * ncol) return;
    u64 k = t / ncol, c = t - k * ncol;
    const u64* Lk = L + 4 * k * per;
    fr_t acc = fr_t::zero();
    for (long long e = colptr[c]; e < colptr[c + 1]; e++)
        acc = acc + fr_t::load(tcoef + 4 * e) * fr_t::load(Lk + 4 * (u64)trow[e]);
    acc.store(out + 4 * t);
}

// Row values of the K copies: out[k*per + r] = sum over row r's terms (rowptr[r] .. rowptr[r+1]) of
// coef[t] * z[global(var[t], k)], global(v, k) = v (ONE, root), 2 + k (index), K + 2 + k*vpc + v - 3.
extern "C" __global__ void qap_rows(const u64* __restrict__ z, const long long* __restrict__ rowptr,
                                    const int* __restrict__ tvar, const u64* __restrict__ tcoef, u64 per, u64 K,
                                    u64 vpc, u64* __restrict__ out) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= K * per) return;
    u64 k = t / per, r = t - k * per;
    fr_t acc = fr_t::zero();
    for (long long e = rowptr[r]; e < rowptr[r + 1]; e++) {
        u64 v = (u64)tvar[e];
        u64 g = v < 2 ? v : (v == 2 ? 2 + k : K + 2 + k * vpc + (v - 3));
        acc = acc + fr_t::load(tcoef + 4 * e) * fr_t::load(z + 4 * g);
    }
    acc.store(out + 4 * t);
}

// out[i] = (beta * u[i] + alpha * v[i] + w[i]) * g; consts: beta, alpha, g (Montgomery).
extern "C" __global__ void qap_combine(const u64* __restrict__ u, const u64* __restrict__ v, const u64* __restrict__ w,
                                       u64 n, const u64* __restrict__ consts, u64* __restrict__ out) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fr_t s = fr_t::load(consts) * fr_t::load(u + 4 * i) + fr_t::load(consts + 4) * fr_t::load(v + 4 * i)
             + fr_t::load(w + 4 * i);
    (s * fr_t::load(consts + 8)).store(out + 4 * i);
}

// out[i] = start * x^i; consts: start, x (Montgomery).
extern "C" __global__ void qap_powers(u64 n, const u64* __restrict__ consts, u64* __restrict__ out) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    (fr_t::load(consts) * fb_fr_pow_u64(fr_t::load(consts + 4), i)).store(out + 4 * i);
}
