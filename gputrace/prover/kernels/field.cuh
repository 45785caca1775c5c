// Montgomery arithmetic over N 64-bit limbs (little-endian limb order).
//
// Layered as in sppark: this file is the field layer; ec.cuh builds G1 on Fq; ntt.cu and
// msm.cu are the algorithms. Elements are kept fully reduced (< modulus) after every
// operation. Hand-written because no CUDA library for BLS12-381 fields is available to CuPy;
// it is the hot path of every kernel.
#pragma once

typedef unsigned long long u64;
typedef unsigned int u32;

// Parameters: modulus limbs, -p^-1 mod 2^64, R mod p (one), R^2 mod p.
struct FrParams {
    static constexpr int N = 4;
    static constexpr u64 INV = 0xfffffffeffffffffull;
    __device__ __forceinline__ static u64 p(int i) {
        const u64 P[4] = {0xffffffff00000001ull, 0x53bda402fffe5bfeull, 0x3339d80809a1d805ull,
                          0x73eda753299d7d48ull};
        return P[i];
    }
    __device__ __forceinline__ static u64 one(int i) {
        const u64 O[4] = {0x00000001fffffffeull, 0x5884b7fa00034802ull, 0x998c4fefecbc4ff5ull,
                          0x1824b159acc5056full};
        return O[i];
    }
    __device__ __forceinline__ static u64 r2(int i) {
        const u64 R[4] = {0xc999e990f3f29c6dull, 0x2b6cedcb87925c23ull, 0x05d314967254398full,
                          0x0748d9d99f59ff11ull};
        return R[i];
    }
};

struct FqParams {
    static constexpr int N = 6;
    static constexpr u64 INV = 0x89f3fffcfffcfffdull;
    __device__ __forceinline__ static u64 p(int i) {
        const u64 P[6] = {0xb9feffffffffaaabull, 0x1eabfffeb153ffffull, 0x6730d2a0f6b0f624ull,
                          0x64774b84f38512bfull, 0x4b1ba7b6434bacd7ull, 0x1a0111ea397fe69aull};
        return P[i];
    }
    __device__ __forceinline__ static u64 one(int i) {
        const u64 O[6] = {0x760900000002fffdull, 0xebf4000bc40c0002ull, 0x5f48985753c758baull,
                          0x77ce585370525745ull, 0x5c071a97a256ec6dull, 0x15f65ec3fa80e493ull};
        return O[i];
    }
    __device__ __forceinline__ static u64 r2(int i) {
        const u64 R[6] = {0xf4df1f341c341746ull, 0x0a76e6a609d104f1ull, 0x8de5476c4c95b6d5ull,
                          0x67eb88a9939d83c0ull, 0x9a793e85b519952dull, 0x11988fe592cae3aaull};
        return R[i];
    }
};

template <class P>
struct Fp;

// Multiplication entry point: inlined for Fr (the NTT's butterflies), a real call for Fq, whose
// 6x6-limb body would otherwise be copied a dozen times into every point formula (nvcc took 4m46s
// wall / 67 s CPU for msm.cu fully inlined against 21 s with the call). -DGPUTRACE_FQ_MUL_INLINE
// builds the inlined variant (module "msm_inline") for A/B timing.
template <class P>
__device__ __forceinline__ Fp<P> fp_mul(const Fp<P>& a, const Fp<P>& b);

template <class P>
struct Fp {
    static constexpr int N = P::N;
    static constexpr int LIMBS = P::N;  // u64 words of one element in memory
    u64 v[N];

    __device__ __forceinline__ static Fp zero() {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    __device__ __forceinline__ static Fp one() {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = P::one(i);
        return r;
    }
    __device__ __forceinline__ bool is_zero() const {
        u64 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    __device__ __forceinline__ bool eq(const Fp& o) const {
        u64 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }
    __device__ __forceinline__ static Fp load(const u64* __restrict__ src) {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = src[i];
        return r;
    }
    __device__ __forceinline__ void store(u64* __restrict__ dst) const {
#pragma unroll
        for (int i = 0; i < N; i++) dst[i] = v[i];
    }

    // r = a - p if a >= p (a given with an extra carry limb `hi`).
    __device__ __forceinline__ static Fp reduce_once(const u64 (&a)[N], u64 hi) {
        u64 t[N];
        u64 borrow = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            u64 pi = P::p(i);
            u64 d = a[i] - pi;
            u64 b1 = a[i] < pi;
            u64 d2 = d - borrow;
            u64 b2 = d < borrow;
            t[i] = d2;
            borrow = b1 | b2;
        }
        // keep a if (hi == 0 and borrow) i.e. a < p
        bool keep = (hi == 0) && borrow;
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = keep ? a[i] : t[i];
        return r;
    }

    __device__ __forceinline__ Fp operator+(const Fp& b) const {
        u64 s[N];
        u64 c = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            u64 x = v[i] + b.v[i];
            u64 c1 = x < v[i];
            u64 y = x + c;
            u64 c2 = y < x;
            s[i] = y;
            c = c1 | c2;
        }
        return reduce_once(s, c);
    }

    __device__ __forceinline__ Fp operator-(const Fp& b) const {
        u64 d[N];
        u64 borrow = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            u64 x = v[i] - b.v[i];
            u64 b1 = v[i] < b.v[i];
            u64 y = x - borrow;
            u64 b2 = x < borrow;
            d[i] = y;
            borrow = b1 | b2;
        }
        // if borrow, add p back
        u64 mask = 0 - borrow;
        u64 c = 0;
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) {
            u64 pi = P::p(i) & mask;
            u64 x = d[i] + pi;
            u64 c1 = x < d[i];
            u64 y = x + c;
            u64 c2 = y < x;
            r.v[i] = y;
            c = c1 | c2;
        }
        return r;
    }

    __device__ __forceinline__ Fp dbl() const { return *this + *this; }

    __device__ __forceinline__ Fp neg() const {
        if (is_zero()) return *this;
        Fp z = zero();
        return z - *this;
    }

    __device__ __forceinline__ Fp operator*(const Fp& b) const { return fp_mul<P>(*this, b); }

    // CIOS Montgomery multiplication: a * b * R^-1 mod p.
    __device__ __forceinline__ Fp mul_impl(const Fp& b) const {
        u64 t[N + 2];
#pragma unroll
        for (int i = 0; i < N + 2; i++) t[i] = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            u64 bi = b.v[i];
            u64 c = 0;
#pragma unroll
            for (int j = 0; j < N; j++) {
                u64 lo = v[j] * bi;
                u64 hi = __umul64hi(v[j], bi);
                u64 s = t[j] + lo;
                hi += s < lo;
                u64 s2 = s + c;
                hi += s2 < s;
                t[j] = s2;
                c = hi;
            }
            u64 s = t[N] + c;
            t[N + 1] = s < c;
            t[N] = s;
            u64 m = t[0] * P::INV;
            u64 lo = m * P::p(0);
            u64 hi = __umul64hi(m, P::p(0));
            u64 s0 = t[0] + lo;
            c = hi + (s0 < lo);
#pragma unroll
            for (int j = 1; j < N; j++) {
                u64 pj = P::p(j);
                u64 lo2 = m * pj;
                u64 hi2 = __umul64hi(m, pj);
                u64 s1 = t[j] + lo2;
                hi2 += s1 < lo2;
                u64 s2 = s1 + c;
                hi2 += s2 < s1;
                t[j - 1] = s2;
                c = hi2;
            }
            u64 s3 = t[N] + c;
            u64 c3 = s3 < c;
            t[N - 1] = s3;
            t[N] = t[N + 1] + c3;
        }
        u64 a[N];
#pragma unroll
        for (int i = 0; i < N; i++) a[i] = t[i];
        return reduce_once(a, t[N]);
    }

    __device__ __forceinline__ Fp sqr() const { return (*this) * (*this); }

    __device__ __forceinline__ Fp to_mont() const {
        Fp r2;
#pragma unroll
        for (int i = 0; i < N; i++) r2.v[i] = P::r2(i);
        return (*this) * r2;
    }
    __device__ __forceinline__ Fp from_mont() const {
        Fp o = zero();
        o.v[0] = 1;
        return (*this) * o;
    }
};

template <class P>
__device__ __forceinline__ Fp<P> fp_mul(const Fp<P>& a, const Fp<P>& b) {
    return a.mul_impl(b);
}
#if defined(GPUTRACE_FQ_MUL_PTX)
// 32-bit limbs with PTX carry chains (fq_mul32.cuh; also Fq addition and subtraction), the multiplication a real
// call like the default below, with its operands in registers. msm.cu opts in.
#include "fq_mul32.cuh"
// The call takes its operands by value (registers), not by reference (stack stores and loads around each call).
__device__ __noinline__ Fp<FqParams> fq_mul_ptx(Fp<FqParams> a, Fp<FqParams> b) {
    Fp<FqParams> r;
    fq32_mont_mul64(r.v, a.v, b.v);
    return r;
}
template <>
__device__ __forceinline__ Fp<FqParams> fp_mul<FqParams>(const Fp<FqParams>& a, const Fp<FqParams>& b) {
    return fq_mul_ptx(a, b);
}
template <>
__device__ __forceinline__ Fp<FqParams> Fp<FqParams>::operator+(const Fp<FqParams>& b) const {
    Fp<FqParams> r;
    fq32_add64(r.v, v, b.v);
    return r;
}
template <>
__device__ __forceinline__ Fp<FqParams> Fp<FqParams>::operator-(const Fp<FqParams>& b) const {
    Fp<FqParams> r;
    fq32_sub64(r.v, v, b.v);
    return r;
}
#elif !defined(GPUTRACE_FQ_MUL_INLINE)
template <>
__device__ __noinline__ Fp<FqParams> fp_mul<FqParams>(const Fp<FqParams>& a, const Fp<FqParams>& b) {
    return a.mul_impl(b);
}
#endif

typedef Fp<FrParams> fr_t;
typedef Fp<FqParams> fq_t;

// Fq2 = Fq[u] / (u^2 + 1), the field of G2's coordinates. Memory: c0 then c1 (12 u64, each Montgomery).
// Multiplication by Karatsuba: 3 Fq multiplications.
struct fq2_t {
    static constexpr int LIMBS = 12;
    fq_t c0, c1;

    __device__ __forceinline__ static fq2_t zero() { fq2_t r; r.c0 = fq_t::zero(); r.c1 = fq_t::zero(); return r; }
    __device__ __forceinline__ static fq2_t one() { fq2_t r; r.c0 = fq_t::one(); r.c1 = fq_t::zero(); return r; }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    __device__ __forceinline__ static fq2_t load(const u64* __restrict__ src) {
        fq2_t r; r.c0 = fq_t::load(src); r.c1 = fq_t::load(src + 6); return r;
    }
    __device__ __forceinline__ void store(u64* __restrict__ dst) const { c0.store(dst); c1.store(dst + 6); }
    __device__ __forceinline__ fq2_t operator+(const fq2_t& b) const { fq2_t r; r.c0 = c0 + b.c0; r.c1 = c1 + b.c1; return r; }
    __device__ __forceinline__ fq2_t operator-(const fq2_t& b) const { fq2_t r; r.c0 = c0 - b.c0; r.c1 = c1 - b.c1; return r; }
    __device__ __forceinline__ fq2_t dbl() const { return *this + *this; }
    __device__ __forceinline__ fq2_t operator*(const fq2_t& b) const {
        fq_t t0 = c0 * b.c0, t1 = c1 * b.c1;
        fq2_t r;
        r.c0 = t0 - t1;
        r.c1 = (c0 + c1) * (b.c0 + b.c1) - t0 - t1;
        return r;
    }
    __device__ __forceinline__ fq2_t sqr() const {  // (c0 + c1)(c0 - c1) + 2 c0 c1 u
        fq2_t r;
        r.c0 = (c0 + c1) * (c0 - c1);
        r.c1 = (c0 * c1).dbl();
        return r;
    }
};
