// BLS12-381 G1 (y^2 = x^3 + 4 over Fq) and G2 (y^2 = x^3 + 4(1 + u) over Fq2) in XYZZ coordinates:
// x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2. The formulas use only a = 0, so one template serves both groups
// (F = fq_t: G1, 12-word affine and 24-word XYZZ points; F = fq2_t: G2, 24 and 48 words).
// Formulas: Bernstein-Lange EFD, "xyzz" for a = 0 (add-2008-s, madd-2008-s, dbl-2008-s-1,
// mdbl-2008-s-1). The point at infinity has ZZ = ZZZ = 0, so zero-filled memory is infinity.
// Affine points are (x, y) in Montgomery form; (0, 0) encodes infinity (as arkworks' xy bytes do).
#pragma once
#include "field.cuh"

template <class F>
struct affine_T {
    F x, y;
    __device__ __forceinline__ bool is_inf() const { return x.is_zero() && y.is_zero(); }
    __device__ __forceinline__ static affine_T load(const u64* __restrict__ src) {
        affine_T a;
        a.x = F::load(src);
        a.y = F::load(src + F::LIMBS);
        return a;
    }
};

template <class F>
struct xyzz_T {
    typedef affine_T<F> affine_t;
    typedef xyzz_T xyzz_t;
    typedef F fq_t;
    static constexpr int L = F::LIMBS;
    static constexpr int WORDS = 4 * F::LIMBS;  // u64 words of one XYZZ point in memory
    F X, Y, ZZ, ZZZ;

    __device__ __forceinline__ static xyzz_t inf() {
        xyzz_t p;
        p.X = fq_t::zero(); p.Y = fq_t::zero(); p.ZZ = fq_t::zero(); p.ZZZ = fq_t::zero();
        return p;
    }
    __device__ __forceinline__ bool is_inf() const { return ZZ.is_zero(); }
    __device__ __forceinline__ static xyzz_t load(const u64* __restrict__ src) {
        xyzz_t p;
        p.X = F::load(src); p.Y = F::load(src + L);
        p.ZZ = F::load(src + 2 * L); p.ZZZ = F::load(src + 3 * L);
        return p;
    }
    __device__ __forceinline__ void store(u64* __restrict__ dst) const {
        X.store(dst); Y.store(dst + L); ZZ.store(dst + 2 * L); ZZZ.store(dst + 3 * L);
    }
    __device__ __forceinline__ static xyzz_t from_affine(const affine_t& a) {
        if (a.is_inf()) return inf();
        xyzz_t p;
        p.X = a.x; p.Y = a.y; p.ZZ = fq_t::one(); p.ZZZ = fq_t::one();
        return p;
    }

    // dbl-2008-s-1
    __device__ __noinline__ xyzz_t dbl() const {
        if (is_inf()) return *this;
        fq_t U = Y.dbl();
        fq_t V = U.sqr();
        fq_t W = U * V;
        fq_t S = X * V;
        fq_t X2 = X.sqr();
        fq_t M = X2.dbl() + X2;
        xyzz_t r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * Y;
        r.ZZ = V * ZZ;
        r.ZZZ = W * ZZZ;
        return r;
    }

    // mdbl-2008-s-1: double an affine point.
    __device__ __noinline__ static xyzz_t dbl_affine(const affine_t& a) {
        fq_t U = a.y.dbl();
        fq_t V = U.sqr();
        fq_t W = U * V;
        fq_t S = a.x * V;
        fq_t X2 = a.x.sqr();
        fq_t M = X2.dbl() + X2;
        xyzz_t r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * a.y;
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }

    // madd-2008-s: this + affine.
    __device__ __noinline__ xyzz_t add_affine(const affine_t& a) const {
        if (a.is_inf()) return *this;
        if (is_inf()) return from_affine(a);
        fq_t U2 = a.x * ZZ;
        fq_t S2 = a.y * ZZZ;
        fq_t P = U2 - X;
        fq_t R = S2 - Y;
        if (P.is_zero()) {
            if (R.is_zero()) return dbl_affine(a);
            return inf();
        }
        fq_t PP = P.sqr();
        fq_t PPP = P * PP;
        fq_t Q = X * PP;
        xyzz_t r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = R * (Q - r.X) - Y * PPP;
        r.ZZ = ZZ * PP;
        r.ZZZ = ZZZ * PPP;
        return r;
    }

    // add-2008-s: this + q.
    __device__ __noinline__ xyzz_t add(const xyzz_t& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        fq_t U1 = X * q.ZZ;
        fq_t U2 = q.X * ZZ;
        fq_t S1 = Y * q.ZZZ;
        fq_t S2 = q.Y * ZZZ;
        fq_t P = U2 - U1;
        fq_t R = S2 - S1;
        if (P.is_zero()) {
            if (R.is_zero()) return dbl();
            return inf();
        }
        fq_t PP = P.sqr();
        fq_t PPP = P * PP;
        fq_t Q = U1 * PP;
        xyzz_t r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = R * (Q - r.X) - S1 * PPP;
        r.ZZ = ZZ * q.ZZ * PP;
        r.ZZZ = ZZZ * q.ZZZ * PPP;
        return r;
    }

    // this * k for a small non-negative integer k (double-and-add from the top bit).
    __device__ __noinline__ xyzz_t mul_small(u32 k) const {
        xyzz_t acc = inf();
        for (int b = 31; b >= 0; b--) {
            acc = acc.dbl();
            if ((k >> b) & 1u) acc = acc.add(*this);
        }
        return acc;
    }
};

typedef affine_T<fq_t> affine_t;
typedef xyzz_T<fq_t> xyzz_t;
typedef affine_T<fq2_t> affine2_t;
typedef xyzz_T<fq2_t> xyzz2_t;
