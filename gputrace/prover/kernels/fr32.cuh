// Fr (BLS12-381 scalar field) in 8 x 32-bit limbs with PTX carry chains: the NTT's arithmetic.
//
// Same values and memory layout as field.cuh's fr_t (4 little-endian u64 limbs, Montgomery form with
// R = 2^256, fully reduced), so the two mix freely through memory. Why a second type: fr_t's 64-bit
// CIOS is written in C (carries by comparison), which the compiler turns into about 640 SASS
// instructions per multiplication (sm_90, counted with cuobjdump: 303 IMAD, 134 ISETP, 130 IADD3,
// 70 SEL); this one is CIOS over two accumulators whose product rows are unbroken mad.lo.cc /
// madc.hi.cc chains (the technique of sppark's and of this project's fq_mul32.cuh), which ptxas turns
// into wide multiply-adds with the carry in hardware (instruction count in RESULTS.md), and the NTT is
// bound by its multiplications. Only the NTT includes this header; field.cuh is unchanged.
//
// The carry-chain primitives are single PTX instructions on the device. Compiled for the host (no
// __CUDA_ARCH__), they are emulated with an explicit carry flag, so the algorithms above them can be
// checked on a machine without a GPU; the device path is checked against the CPU oracle by
// tests/gpu/test_ntt_kernels.py.
#pragma once
#include "field.cuh"

namespace fr32cc {
#if defined(__CUDA_ARCH__)
// One PTX instruction each (add/sub with carry). CC.CF (the carry flag) lives between consecutive statements of one
// chain; nothing the compiler emits between them writes it (only .cc instructions do).
#define FR32_OP2(name, ins)                                                         \
    __device__ __forceinline__ u32 name(u32 a, u32 b) {                             \
        u32 r;                                                                      \
        asm volatile(ins " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));                \
        return r;                                                                   \
    }
FR32_OP2(add_cc, "add.cc.u32")
FR32_OP2(addc_cc, "addc.cc.u32")
FR32_OP2(addc, "addc.u32")
FR32_OP2(sub_cc, "sub.cc.u32")
FR32_OP2(subc_cc, "subc.cc.u32")
FR32_OP2(subc, "subc.u32")
#define FR32_OP3(name, ins)                                                         \
    __device__ __forceinline__ u32 name(u32 a, u32 b, u32 c) {                      \
        u32 r;                                                                      \
        asm volatile(ins " %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));    \
        return r;                                                                   \
    }
FR32_OP3(mad_lo_cc, "mad.lo.cc.u32")
FR32_OP3(madc_lo_cc, "madc.lo.cc.u32")
FR32_OP3(madc_hi_cc, "madc.hi.cc.u32")
#undef FR32_OP2
#undef FR32_OP3
#else
// Host emulation (PTX semantics: add/mad set CF to the carry out, sub sets it to the borrow out;
// the ...c forms consume it; forms without .cc leave it unchanged).
static thread_local u32 cf;
inline u32 add_cc(u32 a, u32 b) { u64 s = (u64)a + b; cf = (u32)(s >> 32); return (u32)s; }
inline u32 addc_cc(u32 a, u32 b) { u64 s = (u64)a + b + cf; cf = (u32)(s >> 32); return (u32)s; }
inline u32 addc(u32 a, u32 b) { return a + b + cf; }
inline u32 sub_cc(u32 a, u32 b) { u64 d = (u64)a - b; cf = (u32)(d >> 63); return (u32)d; }
inline u32 subc_cc(u32 a, u32 b) { u64 d = (u64)a - b - cf; cf = (u32)(d >> 63); return (u32)d; }
inline u32 subc(u32 a, u32 b) { return a - b - cf; }
inline u32 mad_lo_cc(u32 a, u32 b, u32 c) { return add_cc((u32)((u64)a * b), c); }
inline u32 madc_lo_cc(u32 a, u32 b, u32 c) { return addc_cc((u32)((u64)a * b), c); }
inline u32 madc_hi_cc(u32 a, u32 b, u32 c) { return addc_cc((u32)(((u64)a * b) >> 32), c); }
#endif
}  // namespace fr32cc

// Fr modulus in 32-bit limbs (little-endian): 0x73eda753299d7d48_3339d80809a1d805_53bda402fffe5bfe_ffffffff00000001.
// p[0] = 1, so -p^-1 mod 2^32 = 0xffffffff and the Montgomery factor m of a step is -t0.
#define FR32_P0 0x00000001u
#define FR32_P1 0xffffffffu
#define FR32_P2 0xfffe5bfeu
#define FR32_P3 0x53bda402u
#define FR32_P4 0x09a1d805u
#define FR32_P5 0x3339d808u
#define FR32_P6 0x299d7d48u
#define FR32_P7 0x73eda753u

struct fr32 {
    static constexpr int LIMBS = 4;  // u64 words in memory, as fr_t
    u32 l[8];

    __device__ __forceinline__ static u32 p(int i) {
        const u32 P[8] = {FR32_P0, FR32_P1, FR32_P2, FR32_P3, FR32_P4, FR32_P5, FR32_P6, FR32_P7};
        return P[i];
    }

    // 32 bytes at src (16-byte aligned: element i of an Fr vector).
    __device__ __forceinline__ static fr32 load(const u64* src) {
        const ulonglong2* s = (const ulonglong2*)src;
        ulonglong2 x0 = s[0], x1 = s[1];
        fr32 r;
        r.l[0] = (u32)x0.x; r.l[1] = (u32)(x0.x >> 32); r.l[2] = (u32)x0.y; r.l[3] = (u32)(x0.y >> 32);
        r.l[4] = (u32)x1.x; r.l[5] = (u32)(x1.x >> 32); r.l[6] = (u32)x1.y; r.l[7] = (u32)(x1.y >> 32);
        return r;
    }
    // As load, through the read-only data cache (tables only: never memory this kernel writes).
    __device__ __forceinline__ static fr32 load_ro(const u64* src) {
#if defined(__CUDA_ARCH__)
        const ulonglong2* s = (const ulonglong2*)src;
        ulonglong2 x0 = __ldg(s), x1 = __ldg(s + 1);
        fr32 r;
        r.l[0] = (u32)x0.x; r.l[1] = (u32)(x0.x >> 32); r.l[2] = (u32)x0.y; r.l[3] = (u32)(x0.y >> 32);
        r.l[4] = (u32)x1.x; r.l[5] = (u32)(x1.x >> 32); r.l[6] = (u32)x1.y; r.l[7] = (u32)(x1.y >> 32);
        return r;
#else
        return load(src);
#endif
    }
    __device__ __forceinline__ void store(u64* dst) const {
        ulonglong2* d = (ulonglong2*)dst;
        ulonglong2 x0, x1;
        x0.x = (u64)l[0] | ((u64)l[1] << 32); x0.y = (u64)l[2] | ((u64)l[3] << 32);
        x1.x = (u64)l[4] | ((u64)l[5] << 32); x1.y = (u64)l[6] | ((u64)l[7] << 32);
        d[0] = x0;
        d[1] = x1;
    }

    // a + b mod p (a, b < p, so a + b < 2p < 2^256: no carry out of the top limb).
    __device__ __forceinline__ fr32 operator+(const fr32& b) const {
        using namespace fr32cc;
        u32 s[8], d[8];
        s[0] = add_cc(l[0], b.l[0]);
#pragma unroll
        for (int i = 1; i < 7; i++) s[i] = addc_cc(l[i], b.l[i]);
        s[7] = addc(l[7], b.l[7]);
        d[0] = sub_cc(s[0], p(0));
#pragma unroll
        for (int i = 1; i < 8; i++) d[i] = subc_cc(s[i], p(i));
        u32 borrow = subc(0u, 0u);  // 0xffffffff when s < p: keep s
        fr32 r;
#pragma unroll
        for (int i = 0; i < 8; i++) r.l[i] = borrow ? s[i] : d[i];
        return r;
    }

    // a - b mod p (a, b < p): a - b, plus p when it borrowed.
    __device__ __forceinline__ fr32 operator-(const fr32& b) const {
        using namespace fr32cc;
        u32 d[8];
        d[0] = sub_cc(l[0], b.l[0]);
#pragma unroll
        for (int i = 1; i < 8; i++) d[i] = subc_cc(l[i], b.l[i]);
        u32 mask = subc(0u, 0u);  // 0xffffffff when a < b
        fr32 r;
        r.l[0] = add_cc(d[0], p(0) & mask);
#pragma unroll
        for (int i = 1; i < 7; i++) r.l[i] = addc_cc(d[i], p(i) & mask);
        r.l[7] = addc(d[7], p(7) & mask);
        return r;
    }

    // p - a for a nonzero a < p (the twiddle tables' w^(j + n/2) = -w^j).
    __device__ __forceinline__ fr32 neg_nonzero() const {
        using namespace fr32cc;
        fr32 r;
        r.l[0] = sub_cc(p(0), l[0]);
#pragma unroll
        for (int i = 1; i < 7; i++) r.l[i] = subc_cc(p(i), l[i]);
        r.l[7] = subc(p(7), l[7]);
        return r;
    }

    // One CIOS round, T = (T + a * bi + m * p) / 2^32, on T = E + O (two 9-word accumulators at the same
    // offset). E takes the products of the even words of a and p (low half at word 2j, high half at 2j+1),
    // O those of the odd words (words 1..8), so every product row is one unbroken carry chain in which each
    // product's low and high halves are consecutive (mad.lo.cc then madc.hi.cc), and ptxas fuses each such
    // pair into one wide multiply-add carrying in hardware. O[0] is added into E[0] first (its carry enters
    // O's chain at word 1); m = -E[0] (-p^-1 mod 2^32 = -1 since p[0] = 1) makes word 0 of T + m p zero;
    // both arrays shift down one word. E and O are sums of non-negative terms, each at most
    // T + a bi + m p < 2^33 p < 2^288, so 9 words hold them and no chain carries out of word 8.
    __device__ __forceinline__ static void round(u32 (&E)[9], u32 (&O)[9], const u32 (&a)[8], u32 bi) {
        using namespace fr32cc;
        E[0] = mad_lo_cc(a[0], bi, E[0]);
        E[1] = madc_hi_cc(a[0], bi, E[1]);
#pragma unroll
        for (int j = 2; j < 8; j += 2) {
            E[j] = madc_lo_cc(a[j], bi, E[j]);
            E[j + 1] = madc_hi_cc(a[j], bi, E[j + 1]);
        }
        E[8] = addc(E[8], 0u);
        E[0] = add_cc(E[0], O[0]);
#pragma unroll
        for (int j = 1; j < 8; j += 2) {
            O[j] = madc_lo_cc(a[j], bi, O[j]);
            O[j + 1] = madc_hi_cc(a[j], bi, O[j + 1]);
        }
        const u32 m = 0u - E[0];
        E[0] = mad_lo_cc(m, p(0), E[0]);
        E[1] = madc_hi_cc(m, p(0), E[1]);
#pragma unroll
        for (int j = 2; j < 8; j += 2) {
            E[j] = madc_lo_cc(m, p(j), E[j]);
            E[j + 1] = madc_hi_cc(m, p(j), E[j + 1]);
        }
        E[8] = addc(E[8], 0u);
        O[1] = mad_lo_cc(m, p(1), O[1]);
        O[2] = madc_hi_cc(m, p(1), O[2]);
#pragma unroll
        for (int j = 3; j < 8; j += 2) {
            O[j] = madc_lo_cc(m, p(j), O[j]);
            O[j + 1] = madc_hi_cc(m, p(j), O[j + 1]);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) { E[k] = E[k + 1]; O[k] = O[k + 1]; }
        E[8] = 0u;
        O[8] = 0u;
    }

    // Montgomery product a * b / 2^256 mod p (a, b < p): 8 rounds, one word of b each, the accumulators
    // swapping roles every round (so each wide multiply-add's word pair stays on one register pair); then
    // T = E + O < 2p, and one conditional subtraction of p leaves it fully reduced.
    __device__ __forceinline__ fr32 operator*(const fr32& b) const {
        using namespace fr32cc;
        u32 X[9], Y[9];
#pragma unroll
        for (int k = 0; k < 9; k++) { X[k] = 0u; Y[k] = 0u; }
#pragma unroll
        for (int i = 0; i < 8; i += 2) {
            round(Y, X, l, b.l[i]);
            round(X, Y, l, b.l[i + 1]);
        }
        u32 t[8], d[8];
        t[0] = add_cc(X[0], Y[0]);
#pragma unroll
        for (int k = 1; k < 7; k++) t[k] = addc_cc(X[k], Y[k]);
        t[7] = addc(X[7], Y[7]);
        d[0] = sub_cc(t[0], p(0));
#pragma unroll
        for (int k = 1; k < 8; k++) d[k] = subc_cc(t[k], p(k));
        const u32 borrow = subc(0u, 0u);  // all ones when t < p
        fr32 r;
#pragma unroll
        for (int k = 0; k < 8; k++) r.l[k] = borrow ? t[k] : d[k];
        return r;
    }
};
