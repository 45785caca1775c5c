// Witness generation for the Merkle/Poseidon circuit (prover/circuit.py) from a host plan
// (prover/witness_plan.py: its docstring gives the layout; plan_witness is this file's reference).
//
// All Fr values are Montgomery form, 4 u64 each. One thread per (circuit, challenge) of a batch of B circuits
// of one shape; one launch per tree level, because a sibling may be another challenge's node of the same level
// (computed by the previous launch). consts: the 195 round constants, then the 3x3 MDS matrix row-major.
// Per circuit j: idx (B, K), sib_src (B, depth, K), sib_const (B, depth, K, 4), cur (B, depth + 1, K, 4) nodes
// (level 0 = the leaves, filled by the host; level l+1 written by launch l), z (B, nvars, 4) with the ni inputs
// first; abc (3B, n, 4): circuit j's a, b and c rows are rows j*sj, j*sj + sv and j*sj + 2*sv (sj = 1, sv = B:
// [a_0 .. a_B-1, b_0 .., c_0 ..], the batch flow's block; sj = 3, sv = 1: [a_0, b_0, c_0, a_1, ..], one
// contiguous (3, n, 4) block per circuit, the stream flow's).
#include "field.cuh"

#define PW 3
#define P_RF 8
#define P_RP 57
#define P_ROUNDS (P_RF + P_RP)
#define PER_ROWS (2 + 3 * (P_RF * PW + P_RP))
#define PER_VARS (3 + 3 * (P_RF * PW + P_RP))

__device__ __forceinline__ void put_row(u64* a, u64* b, u64* c, u64 r, const fr_t& x, const fr_t& y,
                                        const fr_t& z) {
    x.store(a + 4 * r);
    y.store(b + 4 * r);
    z.store(c + 4 * r);
}

// Level `level` of every challenge: rows bool, select and the Poseidon S-box rows; variables sib, bit, t and
// (x^2, x^4, x^5) per S-box (z_aux = the private part of z); the challenge's node at level + 1.
extern "C" __global__ void merkle_level(const u64* __restrict__ consts, int level, int depth, u64 K, u64 B,
                                        const u64* __restrict__ idx_all, const int* __restrict__ sib_src_all,
                                        const u64* __restrict__ sib_const_all, u64* cur_all, u64* abc, u64 n,
                                        u64* z_all, u64 nvars, u64 ni, u64 sj, u64 sv) {
    u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= B * K) return;
    const u64 jc = g / K, k = g % K;
    const u64* idx = idx_all + jc * K;
    const int* sib_src = sib_src_all + jc * (u64)depth * K;
    const u64* sib_const = sib_const_all + 4 * jc * (u64)depth * K;
    u64* cur = cur_all + 4 * jc * (u64)(depth + 1) * K;
    u64* a = abc + 4 * n * (jc * sj);
    u64* b = abc + 4 * n * (jc * sj + sv);
    u64* c = abc + 4 * n * (jc * sj + 2 * sv);
    u64* z_aux = z_all + 4 * (jc * nvars + ni);
    const u64 rows_ch = (u64)depth * PER_ROWS + 2, vars_ch = 1 + (u64)depth * PER_VARS;
    u64 r = k * rows_ch + (u64)level * PER_ROWS;
    u64 v = k * vars_ch + 1 + (u64)level * PER_VARS;
    const u64 lk = (u64)level * K;
    fr_t cu = fr_t::load(cur + 4 * (lk + k));
    int j = sib_src[lk + k];
    fr_t sib = j >= 0 ? fr_t::load(cur + 4 * (lk + (u64)j)) : fr_t::load(sib_const + 4 * (lk + k));
    bool bit = (idx[k] >> level) & 1ull;
    fr_t bv = bit ? fr_t::one() : fr_t::zero();
    fr_t diff = sib - cu;
    fr_t t = bit ? diff : fr_t::zero();
    sib.store(z_aux + 4 * v);
    bv.store(z_aux + 4 * (v + 1));
    t.store(z_aux + 4 * (v + 2));
    v += 3;
    put_row(a, b, c, r, bv, bv, bv);
    put_row(a, b, c, r + 1, bv, diff, t);
    r += 2;
    fr_t s0 = fr_t::zero(), s1 = cu + t, s2 = sib - t;
    for (int rnd = 0; rnd < P_ROUNDS; rnd++) {
        s0 = s0 + fr_t::load(consts + 4 * (3 * rnd));
        s1 = s1 + fr_t::load(consts + 4 * (3 * rnd + 1));
        s2 = s2 + fr_t::load(consts + 4 * (3 * rnd + 2));
        bool full = rnd < P_RF / 2 || rnd >= P_RF / 2 + P_RP;
        for (int i = 0; i < (full ? PW : 1); i++) {
            fr_t x = i == 0 ? s0 : (i == 1 ? s1 : s2);
            fr_t x2 = x * x;
            fr_t x4 = x2 * x2;
            fr_t x5 = x4 * x;
            put_row(a, b, c, r, x, x, x2);
            put_row(a, b, c, r + 1, x2, x2, x4);
            put_row(a, b, c, r + 2, x4, x, x5);
            x2.store(z_aux + 4 * v);
            x4.store(z_aux + 4 * (v + 1));
            x5.store(z_aux + 4 * (v + 2));
            r += 3;
            v += 3;
            if (i == 0) s0 = x5; else if (i == 1) s1 = x5; else s2 = x5;
        }
        const u64* m = consts + 4 * (3 * P_ROUNDS);
        fr_t n0 = fr_t::load(m) * s0 + fr_t::load(m + 4) * s1 + fr_t::load(m + 8) * s2;
        fr_t n1 = fr_t::load(m + 12) * s0 + fr_t::load(m + 16) * s1 + fr_t::load(m + 20) * s2;
        fr_t n2 = fr_t::load(m + 24) * s0 + fr_t::load(m + 28) * s1 + fr_t::load(m + 32) * s2;
        s0 = n0; s1 = n1; s2 = n2;
    }
    s0.store(cur + 4 * (lk + K + k));
}

// After the last level, per circuit: each challenge's leaf variable and its index and root rows; every input
// variable z[0 .. K+2) = (1, root, indices) and its input row (A = the input, B = C = 0: rows m .. m+K+2 of a).
// idx_mont (B, K, 4): the indices as Fr (Montgomery). root = challenge 0's top node.
extern "C" __global__ void merkle_finish(int depth, u64 K, u64 B, const u64* __restrict__ idx_mont_all,
                                         const u64* __restrict__ cur_all, u64* abc, u64 n, u64* z_all, u64 nvars,
                                         u64 m, u64 sj, u64 sv) {
    const u64 ni = K + 2;
    u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= B * ni) return;
    const u64 jc = g / ni, t = g % ni;
    const u64* idx_mont = idx_mont_all + 4 * jc * K;
    const u64* cur = cur_all + 4 * jc * (u64)(depth + 1) * K;
    u64* a = abc + 4 * n * (jc * sj);
    u64* b = abc + 4 * n * (jc * sj + sv);
    u64* c = abc + 4 * n * (jc * sj + 2 * sv);
    u64* z = z_all + 4 * jc * nvars;
    const u64 rows_ch = (u64)depth * PER_ROWS + 2, vars_ch = 1 + (u64)depth * PER_VARS;
    const u64* top = cur + 4 * ((u64)depth * K);
    fr_t root = fr_t::load(top);
    fr_t one = fr_t::one();
    if (t < K) {
        fr_t ix = fr_t::load(idx_mont + 4 * t);
        fr_t::load(cur + 4 * t).store(z + 4 * (ni + t * vars_ch));
        u64 r = t * rows_ch + (u64)depth * PER_ROWS;
        put_row(a, b, c, r, ix, one, ix);
        put_row(a, b, c, r + 1, fr_t::load(top + 4 * t), one, root);
    }
    fr_t in = t == 0 ? one : (t == 1 ? root : fr_t::load(idx_mont + 4 * (t - 2)));
    in.store(z + 4 * t);
    in.store(a + 4 * (m + t));
}
