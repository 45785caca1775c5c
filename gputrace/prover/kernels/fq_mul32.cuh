// Fq (BLS12-381 base field) Montgomery multiplication over 12 32-bit limbs with PTX carry chains.
//
// Used by the MSM module (msm.cu defines GPUTRACE_FQ_MUL_PTX; field.cuh then routes fp_mul<FqParams> here).
// Why hand-written: the 64-bit-limb CIOS in field.cuh is C, and the compiler turns each of its carries into
// compare/select pairs (about half of its 1,460 SASS instructions); mad.lo.cc / madc.hi.cc chains let ptxas
// pair the low and high halves of each 32x32 product into one wide multiply-add with the carry in hardware.
//
// Algorithm (CIOS, 12 rounds, one 32-bit word of b per round), with the running sum T split into two
// arrays E and O of 13 limbs (both at limb offset 0), so that every product row is one unbroken carry chain:
//   * E takes the products of a's even limbs (a[2j]*b_i: low word at 2j, high word at 2j+1: limbs 0..11),
//   * O takes the products of a's odd limbs (limbs 1..12); O[0] is first added into E[0], and the carry of
//     that addition enters O's chain at limb 1;
//   * m = E[0] * (-p^-1 mod 2^32); m*p is added the same way (even limbs of p into E, odd into O), which
//     makes E[0] zero; then both arrays shift down one limb (register renaming in the unrolled code) and the
//     two arrays swap roles for the next round (fq32_round).
// E and O are sums of non-negative terms, so each is at most T < 2p * 2^32 < 2^414 and fits in 13 limbs:
// no carry leaves limb 12. After 12 rounds T = E + O < 2p; one conditional subtraction gives T mod p.
// Contract: inputs fully reduced (< p), Montgomery form; the output is a*b*2^-384 mod p, fully reduced.
//
// Host build (FQ32_HOST_EMULATION): the same code with the carry flag emulated, for the CPU unit test of the
// chain logic (tests/gpu/test_msm_kernels.py compiles it with the system C++ compiler when one is present).
#pragma once

#ifdef FQ32_HOST_EMULATION
#include <cstdint>
typedef uint32_t fq32_u32;
typedef uint64_t fq32_u64;
#define FQ32_FN static inline
static unsigned fq32_cf;  // emulated CC.CF (single-threaded test only)
FQ32_FN fq32_u32 mad_lo_cc(fq32_u32 a, fq32_u32 b, fq32_u32 c) {
    fq32_u64 t = (fq32_u64)(fq32_u32)(a * b) + c; fq32_cf = (unsigned)(t >> 32); return (fq32_u32)t;
}
FQ32_FN fq32_u32 madc_lo_cc(fq32_u32 a, fq32_u32 b, fq32_u32 c) {
    fq32_u64 t = (fq32_u64)(fq32_u32)(a * b) + c + fq32_cf; fq32_cf = (unsigned)(t >> 32); return (fq32_u32)t;
}
FQ32_FN fq32_u32 madc_hi_cc(fq32_u32 a, fq32_u32 b, fq32_u32 c) {
    fq32_u64 t = (((fq32_u64)a * b) >> 32) + c + fq32_cf; fq32_cf = (unsigned)(t >> 32); return (fq32_u32)t;
}
FQ32_FN fq32_u32 add_cc(fq32_u32 a, fq32_u32 b) {
    fq32_u64 t = (fq32_u64)a + b; fq32_cf = (unsigned)(t >> 32); return (fq32_u32)t;
}
FQ32_FN fq32_u32 addc_cc(fq32_u32 a, fq32_u32 b) {
    fq32_u64 t = (fq32_u64)a + b + fq32_cf; fq32_cf = (unsigned)(t >> 32); return (fq32_u32)t;
}
FQ32_FN fq32_u32 addc(fq32_u32 a, fq32_u32 b) { return (fq32_u32)((fq32_u64)a + b + fq32_cf); }
FQ32_FN fq32_u32 sub_cc(fq32_u32 a, fq32_u32 b) {
    fq32_u32 r = a - b; fq32_cf = a < b; return r;
}
FQ32_FN fq32_u32 subc_cc(fq32_u32 a, fq32_u32 b) {
    fq32_u64 t = (fq32_u64)a - b - fq32_cf; fq32_cf = (unsigned)((t >> 32) & 1); return (fq32_u32)t;
}
FQ32_FN fq32_u32 subc(fq32_u32 a, fq32_u32 b) { return (fq32_u32)((fq32_u64)a - b - fq32_cf); }
#else
typedef unsigned int fq32_u32;
typedef unsigned long long fq32_u64;
#define FQ32_FN __device__ __forceinline__
// asm volatile keeps the chain's statements in order; nothing between them touches the carry flag.
FQ32_FN fq32_u32 mad_lo_cc(fq32_u32 a, fq32_u32 b, fq32_u32 c) {
    fq32_u32 r; asm volatile("mad.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
FQ32_FN fq32_u32 madc_lo_cc(fq32_u32 a, fq32_u32 b, fq32_u32 c) {
    fq32_u32 r; asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
FQ32_FN fq32_u32 madc_hi_cc(fq32_u32 a, fq32_u32 b, fq32_u32 c) {
    fq32_u32 r; asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
FQ32_FN fq32_u32 add_cc(fq32_u32 a, fq32_u32 b) {
    fq32_u32 r; asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
FQ32_FN fq32_u32 addc_cc(fq32_u32 a, fq32_u32 b) {
    fq32_u32 r; asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
FQ32_FN fq32_u32 addc(fq32_u32 a, fq32_u32 b) {
    fq32_u32 r; asm volatile("addc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
FQ32_FN fq32_u32 sub_cc(fq32_u32 a, fq32_u32 b) {
    fq32_u32 r; asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
FQ32_FN fq32_u32 subc_cc(fq32_u32 a, fq32_u32 b) {
    fq32_u32 r; asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
FQ32_FN fq32_u32 subc(fq32_u32 a, fq32_u32 b) {
    fq32_u32 r; asm volatile("subc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
#endif

// p (BLS12-381 base field modulus) in 32-bit limbs, little-endian, and -p^-1 mod 2^32.
#define FQ32_P0 0xffffaaabu
#define FQ32_P1 0xb9feffffu
#define FQ32_P2 0xb153ffffu
#define FQ32_P3 0x1eabfffeu
#define FQ32_P4 0xf6b0f624u
#define FQ32_P5 0x6730d2a0u
#define FQ32_P6 0xf38512bfu
#define FQ32_P7 0x64774b84u
#define FQ32_P8 0x434bacd7u
#define FQ32_P9 0x4b1ba7b6u
#define FQ32_P10 0x397fe69au
#define FQ32_P11 0x1a0111eau
#define FQ32_INV 0xfffcfffdu

FQ32_FN fq32_u32 fq32_p(int i) {
    const fq32_u32 P[12] = {FQ32_P0, FQ32_P1, FQ32_P2, FQ32_P3, FQ32_P4, FQ32_P5,
                            FQ32_P6, FQ32_P7, FQ32_P8, FQ32_P9, FQ32_P10, FQ32_P11};
    return P[i];
}

// One CIOS round: T += a*bi + m*p, T /= 2^32, where T = E + O (both limb offset 0). E takes the products of
// a's and p's even limbs (limbs 0..11), O those of the odd limbs (limbs 1..12); O[0] is first added into E[0]
// and that carry enters O's chain at limb 1. After the shift the roles swap (the caller alternates E and O),
// which keeps every (lo, hi) accumulator pair on the same register pair from round to round.
FQ32_FN void fq32_round(fq32_u32 (&E)[13], fq32_u32 (&O)[13], const fq32_u32 (&a)[12], fq32_u32 bi) {
    E[0] = mad_lo_cc(a[0], bi, E[0]);
    E[1] = madc_hi_cc(a[0], bi, E[1]);
#pragma unroll
    for (int j = 2; j < 12; j += 2) {
        E[j] = madc_lo_cc(a[j], bi, E[j]);
        E[j + 1] = madc_hi_cc(a[j], bi, E[j + 1]);
    }
    E[12] = addc(E[12], 0);
    E[0] = add_cc(E[0], O[0]);
#pragma unroll
    for (int j = 1; j < 12; j += 2) {
        O[j] = madc_lo_cc(a[j], bi, O[j]);
        O[j + 1] = madc_hi_cc(a[j], bi, O[j + 1]);
    }
    // m makes the low limb of T + m*p zero
    const fq32_u32 m = E[0] * FQ32_INV;
    E[0] = mad_lo_cc(fq32_p(0), m, E[0]);
    E[1] = madc_hi_cc(fq32_p(0), m, E[1]);
#pragma unroll
    for (int j = 2; j < 12; j += 2) {
        E[j] = madc_lo_cc(fq32_p(j), m, E[j]);
        E[j + 1] = madc_hi_cc(fq32_p(j), m, E[j + 1]);
    }
    E[12] = addc(E[12], 0);
    O[1] = mad_lo_cc(fq32_p(1), m, O[1]);
    O[2] = madc_hi_cc(fq32_p(1), m, O[2]);
#pragma unroll
    for (int j = 3; j < 12; j += 2) {
        O[j] = madc_lo_cc(fq32_p(j), m, O[j]);
        O[j + 1] = madc_hi_cc(fq32_p(j), m, O[j + 1]);
    }
    // T /= 2^32: E[0] is zero, O[0] was consumed above
#pragma unroll
    for (int k = 0; k < 12; k++) { E[k] = E[k + 1]; O[k] = O[k + 1]; }
    E[12] = 0;
    O[12] = 0;
}

// r = a * b * 2^-384 mod p (all 12-limb little-endian, < p).
FQ32_FN void fq32_mont_mul(fq32_u32 (&r)[12], const fq32_u32 (&a)[12], const fq32_u32 (&b)[12]) {
    fq32_u32 X[13], Y[13];
#pragma unroll
    for (int k = 0; k < 13; k++) { X[k] = 0; Y[k] = 0; }
#pragma unroll
    for (int i = 0; i < 12; i += 2) {
        fq32_round(Y, X, a, b[i]);
        fq32_round(X, Y, a, b[i + 1]);
    }
    // T = X + Y < 2p; subtract p once if T >= p
    fq32_u32 s[12], d[12];
    s[0] = add_cc(X[0], Y[0]);
#pragma unroll
    for (int k = 1; k < 11; k++) s[k] = addc_cc(X[k], Y[k]);
    s[11] = addc(X[11], Y[11]);
    d[0] = sub_cc(s[0], fq32_p(0));
#pragma unroll
    for (int k = 1; k < 12; k++) d[k] = subc_cc(s[k], fq32_p(k));
    const fq32_u32 borrow = subc(0, 0);  // all ones if s < p
#pragma unroll
    for (int k = 0; k < 12; k++) r[k] = borrow ? s[k] : d[k];
}

// The same on 6 64-bit limbs (field.cuh's layout).
FQ32_FN void fq32_mont_mul64(fq32_u64 (&r)[6], const fq32_u64 (&a)[6], const fq32_u64 (&b)[6]) {
    fq32_u32 a32[12], b32[12], r32[12];
#pragma unroll
    for (int k = 0; k < 6; k++) {
        a32[2 * k] = (fq32_u32)a[k]; a32[2 * k + 1] = (fq32_u32)(a[k] >> 32);
        b32[2 * k] = (fq32_u32)b[k]; b32[2 * k + 1] = (fq32_u32)(b[k] >> 32);
    }
    fq32_mont_mul(r32, a32, b32);
#pragma unroll
    for (int k = 0; k < 6; k++) r[k] = (fq32_u64)r32[2 * k] | ((fq32_u64)r32[2 * k + 1] << 32);
}

// r = a + b mod p and r = a - b mod p on 6 64-bit limbs (inputs < p < 2^381, so a + b has no carry out of
// limb 11): one carry chain and one conditional subtraction (or addition) of p.
FQ32_FN void fq32_add64(fq32_u64 (&r)[6], const fq32_u64 (&a)[6], const fq32_u64 (&b)[6]) {
    fq32_u32 s[12], d[12];
    s[0] = add_cc((fq32_u32)a[0], (fq32_u32)b[0]);
    s[1] = addc_cc((fq32_u32)(a[0] >> 32), (fq32_u32)(b[0] >> 32));
#pragma unroll
    for (int k = 1; k < 5; k++) {
        s[2 * k] = addc_cc((fq32_u32)a[k], (fq32_u32)b[k]);
        s[2 * k + 1] = addc_cc((fq32_u32)(a[k] >> 32), (fq32_u32)(b[k] >> 32));
    }
    s[10] = addc_cc((fq32_u32)a[5], (fq32_u32)b[5]);
    s[11] = addc((fq32_u32)(a[5] >> 32), (fq32_u32)(b[5] >> 32));
    d[0] = sub_cc(s[0], fq32_p(0));
#pragma unroll
    for (int k = 1; k < 12; k++) d[k] = subc_cc(s[k], fq32_p(k));
    const fq32_u32 borrow = subc(0, 0);  // all ones if s < p
#pragma unroll
    for (int k = 0; k < 6; k++)
        r[k] = borrow ? ((fq32_u64)s[2 * k] | ((fq32_u64)s[2 * k + 1] << 32))
                      : ((fq32_u64)d[2 * k] | ((fq32_u64)d[2 * k + 1] << 32));
}

FQ32_FN void fq32_sub64(fq32_u64 (&r)[6], const fq32_u64 (&a)[6], const fq32_u64 (&b)[6]) {
    fq32_u32 d[12], s[12];
    d[0] = sub_cc((fq32_u32)a[0], (fq32_u32)b[0]);
    d[1] = subc_cc((fq32_u32)(a[0] >> 32), (fq32_u32)(b[0] >> 32));
#pragma unroll
    for (int k = 1; k < 6; k++) {
        d[2 * k] = subc_cc((fq32_u32)a[k], (fq32_u32)b[k]);
        d[2 * k + 1] = subc_cc((fq32_u32)(a[k] >> 32), (fq32_u32)(b[k] >> 32));
    }
    const fq32_u32 mask = subc(0, 0);  // all ones if a < b: add p back
    s[0] = add_cc(d[0], fq32_p(0) & mask);
#pragma unroll
    for (int k = 1; k < 11; k++) s[k] = addc_cc(d[k], fq32_p(k) & mask);
    s[11] = addc(d[11], fq32_p(11) & mask);
#pragma unroll
    for (int k = 0; k < 6; k++) r[k] = (fq32_u64)s[2 * k] | ((fq32_u64)s[2 * k + 1] << 32);
}
