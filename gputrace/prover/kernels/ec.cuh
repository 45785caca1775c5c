// BLS12-381 G1 (y^2 = x^3 + 4 over Fq) in XYZZ coordinates: x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2.
// Formulas: Bernstein-Lange EFD, "xyzz" for a = 0 (add-2008-s, madd-2008-s, dbl-2008-s-1,
// mdbl-2008-s-1). The point at infinity has ZZ = ZZZ = 0, so zero-filled memory is infinity.
// Affine points are (x, y) in Montgomery form; (0, 0) encodes infinity (as arkworks' xy bytes do).
#pragma once
#include "field.cuh"

struct affine_t {
    fq_t x, y;
    __device__ __forceinline__ bool is_inf() const { return x.is_zero() && y.is_zero(); }
    __device__ __forceinline__ static affine_t load(const u64* __restrict__ src) {
        affine_t a;
        a.x = fq_t::load(src);
        a.y = fq_t::load(src + 6);
        return a;
    }
};

struct xyzz_t {
    fq_t X, Y, ZZ, ZZZ;

    __device__ __forceinline__ static xyzz_t inf() {
        xyzz_t p;
        p.X = fq_t::zero(); p.Y = fq_t::zero(); p.ZZ = fq_t::zero(); p.ZZZ = fq_t::zero();
        return p;
    }
    __device__ __forceinline__ bool is_inf() const { return ZZ.is_zero(); }
    __device__ __forceinline__ static xyzz_t load(const u64* __restrict__ src) {
        xyzz_t p;
        p.X = fq_t::load(src); p.Y = fq_t::load(src + 6);
        p.ZZ = fq_t::load(src + 12); p.ZZZ = fq_t::load(src + 18);
        return p;
    }
    __device__ __forceinline__ void store(u64* __restrict__ dst) const {
        X.store(dst); Y.store(dst + 6); ZZ.store(dst + 12); ZZZ.store(dst + 18);
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
