// The accumulation model (accumulate.hpp, docs/accumulation.md): exact chunk
// sums, their rounding through float32 and the format plugin, promotion.
//
// The work is laid out for speed without changing a bit of the result: the
// operands are packed once (A as [M, K] rows, B as [K, N] rows, both padded
// with zeros to whole tiles); a tile of kRows rows x two vectors of columns
// keeps its chunk sums in registers while the chunk's K runs (plain float64
// sums where the operands' bit spans prove them exact, as they do for
// low-precision operands; TwoSum pairs elsewhere); the rounding of
// a whole row block's accumulators is one plugin call per chunk; threads take
// whole row blocks. Every output is computed by the same operations in the
// same order whatever the tile, the vector width or the thread.
#include "quant/accumulate.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <altgrad/sdk/philox.hpp>    // sdk::detail::cpu_vector_isa
#include <altgrad/sdk/rounding.hpp>  // sdk::float_bits, sdk::bits_float

#include "util/abi_names.hpp"
#include "util/error.hpp"

namespace altgrad::host::quant {

namespace {

uint64_t double_bits(double x) {
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    return b;
}
double bits_double(uint64_t b) {
    double x = 0;
    std::memcpy(&x, &b, sizeof x);
    return x;
}
using sdk::bits_float;  // float32's bits, as the format plugins take them
using sdk::float_bits;

#define ALTGRAD_ACCUMULATE_INLINE inline __attribute__((always_inline))

// a > 0 (not NaN) truncated to float32's grid: 24 significant bits, steps of
// 2^-149 below 2^-126, FLT_MAX above the range.
ALTGRAD_ACCUMULATE_INLINE double truncate_to_float32(double a) {
    if (a > FLT_MAX) return FLT_MAX;
    // a in [2^e, 2^(e+1)); a double subnormal (e = -1023) is far below float32's smallest step.
    const int e = static_cast<int>((double_bits(a) >> 52) & 0x7FF) - 1023;
    const int kept = e >= -126 ? 23 : e + 149;  // fraction bits float32 keeps in that binade
    if (kept < 0) return 0.0;
    return bits_double(double_bits(a) & ~((uint64_t{1} << (52 - kept)) - 1u));
}

// round_to_float32, inlined into the kernels (once per output and chunk: a call costs as much).
ALTGRAD_ACCUMULATE_INLINE float rounded_to_float32(double h, int side, float32_step step) {
    if (h == 0.0) return 0.0f;  // then S = 0: the model's exact zero is +0
    const bool negative = h < 0;
    const double a = std::fabs(h);
    const int above = negative ? -side : side;  // the sign of |S| - |h|
    const double t = truncate_to_float32(a);
    uint32_t bits = float_bits(static_cast<float>(t));  // exact: t is a float32
    bool sticky = true;                                 // |S| is no float32
    if (t == a && above == 0) sticky = false;
    else if (t == a && above < 0) bits -= 1u;  // |S| lies just below the float32 |h|: the one below it
    // bits is now the truncation of |S| to float32, |S| in [bits, bits + 1 step).
    if (step == float32_step::odd) bits |= sticky ? 1u : 0u;
    if (step == float32_step::nearest_even && sticky) {
        // The midpoint of bits and the float32 above (Inf above FLT_MAX: the step is that below it).
        const double low = bits_float(bits);
        const double up = bits == 0x7F7FFFFFu ? low + (low - bits_float(bits - 1u)) : bits_float(bits + 1u);
        const double mid = low + (up - low) / 2;
        // Without branches: which side of the midpoint S lies on is a coin toss for random data.
        const bool odd_tie = (above == 0) & ((bits & 1u) != 0);
        bits += static_cast<uint32_t>((a > mid) | ((a == mid) & ((above > 0) | odd_tie)));
    }
    return bits_float(bits | (negative ? 0x80000000u : 0u));
}

}  // namespace

float round_to_float32(double h, int side, float32_step step) { return rounded_to_float32(h, side, step); }

namespace {

// An exact sum of doubles whose bits lie between 2^-352 and 2^351 (float32
// values, products of two, and sums of fewer than 2^31 of those: products lie
// in [2^-298, 2^256)): a two's-complement fixed-point number whose last bit
// weighs 2^kLowExponent. Kulisch's long accumulator, for the chunks the
// float64 path cannot prove exact.
class long_sum {
public:
    void add(double x) {
        if (x == 0.0) return;
        const uint64_t b = double_bits(x);
        const int exponent_field = static_cast<int>((b >> 52) & 0x7FF);
        const uint64_t significand = (b & ((uint64_t{1} << 52) - 1u)) | (uint64_t{1} << 52);
        const int shift = exponent_field - 1075 - kLowExponent;  // of the significand's last bit
        if (exponent_field == 0 || shift < 0 || shift + 53 > kLimbs * 64 - 2)
            throw error("accumulator: internal error: a term outside the long accumulator's range");
        const size_t limb = static_cast<size_t>(shift) / 64;
        const unsigned __int128 v = static_cast<unsigned __int128>(significand) << (shift % 64);
        uint64_t part[2] = {static_cast<uint64_t>(v), static_cast<uint64_t>(v >> 64)};
        if (x > 0) add_at(limb, part);
        else subtract_at(limb, part);
    }

    // The sum truncated to 53 bits (h) and the sign of what was cut (side), as round_to_float32 takes them.
    std::pair<double, int> truncated() const {
        uint64_t mag[kLimbs];
        std::copy(limb_, limb_ + kLimbs, mag);
        const bool negative = (mag[kLimbs - 1] >> 63) != 0;
        if (negative) {  // two's complement: invert and add 1
            unsigned carry = 1;
            for (uint64_t& w : mag) {
                w = ~w + carry;
                carry = carry && w == 0;
            }
        }
        int top = -1;  // the highest set bit
        for (int i = kLimbs - 1; i >= 0 && top < 0; --i)
            if (mag[i] != 0) top = i * 64 + 63 - __builtin_clzll(mag[i]);
        if (top < 0) return {0.0, 0};
        const int low = std::max(0, top - 52);  // the 53 bits [low, top] are kept
        const uint64_t kept = bits_at(mag, low, top - low + 1);
        bool sticky = false;
        for (int i = 0; i < low / 64; ++i) sticky = sticky || mag[i] != 0;
        if (low % 64 != 0) sticky = sticky || (mag[low / 64] & ((uint64_t{1} << (low % 64)) - 1u)) != 0;
        const double h = std::ldexp(static_cast<double>(kept), low + kLowExponent);
        const int sign = negative ? -1 : 1;
        return {sign * h, sticky ? sign : 0};
    }

private:
    static constexpr int kLimbs = 11;
    static constexpr int kLowExponent = -352;

    void add_at(size_t limb, const uint64_t (&part)[2]) {
        uint64_t carry = 0;
        for (size_t i = limb; i < kLimbs; ++i) {
            const uint64_t addend = i - limb < 2 ? part[i - limb] : 0, s = limb_[i] + addend;
            const uint64_t carry_out = (s < addend) | (s + carry < carry);
            limb_[i] = s + carry;
            carry = carry_out;
            if (i > limb && carry == 0) break;
        }
    }
    void subtract_at(size_t limb, const uint64_t (&part)[2]) {
        uint64_t borrow = 0;
        for (size_t i = limb; i < kLimbs; ++i) {
            const uint64_t subtrahend = i - limb < 2 ? part[i - limb] : 0, x = limb_[i];
            const uint64_t borrow_out = (x < subtrahend) | (x - subtrahend < borrow);
            limb_[i] = x - subtrahend - borrow;
            borrow = borrow_out;
            if (i > limb && borrow == 0) break;
        }
    }
    // count <= 64 bits of `mag` from bit `from` up.
    static uint64_t bits_at(const uint64_t* mag, int from, int count) {
        const int limb = from / 64, off = from % 64;
        unsigned __int128 w = mag[limb];
        if (limb + 1 < kLimbs) w |= static_cast<unsigned __int128>(mag[limb + 1]) << 64;
        const uint64_t v = static_cast<uint64_t>(w >> off);
        return count == 64 ? v : v & ((uint64_t{1} << count) - 1u);
    }

    uint64_t limb_[kLimbs] = {};
};

// One chunk's rounded sum, exactly: acc + sum of a[k] * b[k * ldb] over k < count, with IEEE's
// non-finite rules (a NaN, 0 x Inf, or Infs of both signs: NaN; else an Inf wins), then
// round_to_float32. The path of the chunks the float64 sums cannot prove exact.
float exact_chunk(float acc, const float* a, const float* b, size_t ldb, size_t count, float32_step step) {
    bool nan = false, plus_inf = false, minus_inf = false;
    long_sum sum;
    const auto term = [&](double x) {
        if (std::isnan(x)) nan = true;
        else if (std::isinf(x)) (x > 0 ? plus_inf : minus_inf) = true;
        else sum.add(x);
    };
    term(acc);
    for (size_t k = 0; k < count; ++k) term(static_cast<double>(a[k]) * static_cast<double>(b[k * ldb]));
    if (nan || (plus_inf && minus_inf)) return std::numeric_limits<float>::quiet_NaN();
    if (plus_inf || minus_inf) return plus_inf ? INFINITY : -INFINITY;
    const auto [h, side] = sum.truncated();
    return round_to_float32(h, side, step);
}

// The operands packed for the kernel: A as [m_pad, k] rows, B as [k, n_pad] rows, zeros in the
// padding; the chunks of K in the order the model sums them, and for each chunk every row of A's
// and every column of B's bit span (see bit_span).
constexpr size_t kRows = 4;        // rows of A per block
constexpr size_t kColumnPad = 16;  // n_pad: a multiple of the widest tile (two AVX-512 vectors of 8)
struct k_chunk {
    size_t k0, count;
    bool last_of_interval;  // a promotion follows it
};
struct packed_operands {
    size_t m = 0, k = 0, n = 0, m_pad = 0, n_pad = 0;
    std::vector<float> a, b;
    std::vector<k_chunk> chunks;
    std::vector<int16_t> a_spans, b_spans;  // [row * chunks + c], [c * n_pad + column]
    const float* a_rows(size_t i0, size_t k0) const { return a.data() + i0 * k + k0; }
    const float* b_rows(size_t k0, size_t j0) const { return b.data() + k0 * n_pad + j0; }
    int16_t a_span(size_t row, size_t c) const { return a_spans[row * chunks.size() + c]; }
    const int16_t* b_span(size_t c, size_t j0) const { return b_spans.data() + c * n_pad + j0; }
};

// Over the nonzero values of a run of float32s: (the largest exponent, floor(log2 |x|)) minus
// (the smallest exponent of a set bit). Every nonzero value v of the run is then a multiple of
// 2^lo with |v| < 2^(lo + span + 1). 0 when all are zero; kNoSpan with a NaN or an Inf.
constexpr int16_t kNoSpan = 1000;
struct span_meter {
    int hi = -1000, lo = 1000;
    bool nonfinite = false;
    void add(float x) {
        uint32_t bits = 0;
        std::memcpy(&bits, &x, sizeof bits);
        const int biased = static_cast<int>((bits >> 23) & 0xFFu);
        uint32_t significand = bits & 0x7FFFFFu;
        if (biased == 0xFF) nonfinite = true;
        if (biased == 0xFF || (biased == 0 && significand == 0)) return;
        if (biased != 0) significand |= 0x800000u;
        const int unit = (biased == 0 ? 1 : biased) - 150;  // the exponent of the significand's last bit
        hi = std::max(hi, unit + 31 - __builtin_clz(significand));
        lo = std::min(lo, unit + __builtin_ctz(significand));
    }
    int16_t span() const { return nonfinite ? kNoSpan : hi < lo ? 0 : static_cast<int16_t>(hi - lo); }
};

packed_operands pack(const gemm_operands& p, const accumulator_spec& spec) {
    packed_operands q;
    q.m = p.m, q.k = p.k, q.n = p.n;
    q.m_pad = (p.m + kRows - 1) / kRows * kRows;
    q.n_pad = (p.n + kColumnPad - 1) / kColumnPad * kColumnPad;
    q.a.assign(q.m_pad * q.k, 0.0f);
    q.b.assign(q.k * q.n_pad, 0.0f);
    const bool a_as_is = p.a_layout == operand_layout::as_is, b_as_is = p.b_layout == operand_layout::as_is;
    for (size_t i = 0; i < p.m; ++i)
        for (size_t k = 0; k < p.k; ++k) q.a[i * q.k + k] = a_as_is ? p.a[i * p.k + k] : p.a[k * p.m + i];
    for (size_t k = 0; k < p.k; ++k)
        for (size_t j = 0; j < p.n; ++j) q.b[k * q.n_pad + j] = b_as_is ? p.b[k * p.n + j] : p.b[j * p.k + k];
    const size_t interval = spec.promote_every ? spec.promote_every : p.k;
    for (size_t start = 0; start < p.k; start += interval) {
        const size_t end = std::min(p.k, start + interval);
        for (size_t k0 = start; k0 < end; k0 += spec.mma_depth)
            q.chunks.push_back({k0, std::min(spec.mma_depth, end - k0), k0 + spec.mma_depth >= end});
    }
    const size_t chunks = q.chunks.size();
    q.a_spans.assign(q.m_pad * chunks, 0);
    q.b_spans.assign(chunks * q.n_pad, 0);
    for (size_t c = 0; c < chunks; ++c) {
        const k_chunk& ch = q.chunks[c];
        for (size_t i = 0; i < p.m; ++i) {
            span_meter m;
            for (size_t k = ch.k0; k < ch.k0 + ch.count; ++k) m.add(q.a[i * q.k + k]);
            q.a_spans[i * chunks + c] = m.span();
        }
        std::vector<span_meter> columns(p.n);
        for (size_t k = ch.k0; k < ch.k0 + ch.count; ++k)
            for (size_t j = 0; j < p.n; ++j) columns[j].add(q.b[k * q.n_pad + j]);
        for (size_t j = 0; j < p.n; ++j) q.b_spans[c * q.n_pad + j] = columns[j].span();
    }
    return q;
}

// Whether a plain float64 sum of a chunk's products is exact for every output of a tile: each
// product a·b of the chunk is a multiple of 2^(lo_a + lo_b) below 2^(lo_a + lo_b + span_a +
// span_b + 2) in magnitude, so every partial sum of `count` of them is a multiple of that below
// 2^(lo_a + lo_b + span_a + span_b + 2 + ceil(log2 count)): a float64 when that exponent
// exceeds the multiple's by at most 53 (one bit kept in hand).
bool plain_sum_is_exact(int span_a, int span_b, size_t count) {
    int log2_count = 0;
    while ((size_t{1} << log2_count) < count) ++log2_count;
    return span_a + span_b + 2 + log2_count <= 52;
}

// L doubles (and their int64 masks, and L floats) in one GCC vector.
template <int L>
struct lanes {
    typedef double d __attribute__((vector_size(8 * L)));
    typedef int64_t i __attribute__((vector_size(8 * L)));
    typedef float f __attribute__((vector_size(4 * L)));
};

// Knuth's TwoSum: s + x = the new s + err exactly (no overflow here: every term is below 2^288).
template <class D>
ALTGRAD_ACCUMULATE_INLINE void two_sum(D& s, D x, D& err) {
    const D t = s + x, x_part = t - s;
    err = (s - (t - x_part)) + (x - x_part);
    s = t;
}

// rounded_to_float32 on L lanes at once, for S = h + l exactly with |l| at most half an ulp of h
// (what TwoSum leaves): the same steps with masks for branches, lane by lane the same float32.
template <int L>
ALTGRAD_ACCUMULATE_INLINE void rounded_lanes(typename lanes<L>::d h, typename lanes<L>::d l,
                                             float32_step step, float* out) {
    using D = typename lanes<L>::d;
    using I = typename lanes<L>::i;
    typedef uint32_t U __attribute__((vector_size(4 * L)));
    typedef float F __attribute__((vector_size(4 * L)));
    I hb;
    std::memcpy(&hb, &h, sizeof hb);
    const I negative = hb < 0, zero = h == 0;
    const I ab = hb & INT64_MAX;
    D a;
    std::memcpy(&a, &ab, sizeof a);
    const I side = (l < 0) - (l > 0);  // a true comparison is -1: +1 where l > 0
    const I above = (negative & -side) | (~negative & side);
    // truncate_to_float32(a): the fraction bits float32 keeps in a's binade, the rest cut.
    const I e = ((ab >> 52) & 0x7FF) - 1023, normal = e >= -126;
    const I kept = (normal & 23) | (~normal & (e + 149));
    const I cut = 52 - kept, cut_in_range = cut > 63;
    const I shift = (cut_in_range & 63) | (~cut_in_range & cut);
    // The cut bits' mask in unsigned lanes: 1 << 63, and 0 - 1, overflow a signed lane.
    typedef uint64_t UL __attribute__((vector_size(8 * L)));
    UL one = {};
    one += 1;
    const UL cut_mask = (one << reinterpret_cast<const UL&>(shift)) - 1;
    I tb = ab & ~reinterpret_cast<const I&>(cut_mask) & ~(kept < 0);
    const I overflow = a > static_cast<double>(FLT_MAX);
    tb = (overflow & static_cast<int64_t>(double_bits(FLT_MAX))) | (~overflow & tb);
    D t;
    std::memcpy(&t, &tb, sizeof t);
    const F tf = __builtin_convertvector(t, F);  // exact: t is a float32
    U bits;
    std::memcpy(&bits, &tf, sizeof bits);
    const I same = t == a;
    const I sticky = ~(same & (above == 0));
    bits += __builtin_convertvector(same & (above < 0), U);  // -1: the float32 below |h|
    if (step == float32_step::odd) bits |= __builtin_convertvector(sticky, U) & 1u;
    if (step == float32_step::nearest_even) {
        F low_f, below_f, up_f;
        const U below_bits = bits - 1u, up_bits = bits + 1u;
        std::memcpy(&low_f, &bits, sizeof low_f);
        std::memcpy(&below_f, &below_bits, sizeof below_f);
        std::memcpy(&up_f, &up_bits, sizeof up_f);
        const D low = __builtin_convertvector(low_f, D);
        const I top = __builtin_convertvector(bits == 0x7F7FFFFFu, I);
        const D up_finite = __builtin_convertvector(up_f, D),
                up_top = low + (low - __builtin_convertvector(below_f, D));
        D up;
        I upf, upt;
        std::memcpy(&upf, &up_finite, sizeof upf);
        std::memcpy(&upt, &up_top, sizeof upt);
        const I up_bits64 = (top & upt) | (~top & upf);
        std::memcpy(&up, &up_bits64, sizeof up);
        const D mid = low + (up - low) / 2;
        const I odd_tie = (above == 0) & (__builtin_convertvector(bits & 1u, I) != 0);
        const I increment = sticky & ((a > mid) | ((a == mid) & ((above > 0) | odd_tie)));
        bits -= __builtin_convertvector(increment, U);  // -1 where it rounds up
    }
    bits |= __builtin_convertvector(negative, U) & 0x80000000u;
    bits &= ~__builtin_convertvector(zero, U);  // S = 0: +0
    std::memcpy(out, &bits, sizeof bits);
}

// The two vectors of a tile's columns at row k of B (2L floats at `row`), as float64.
template <int L>
ALTGRAD_ACCUMULATE_INLINE void load_columns(const float* row, typename lanes<L>::d (&column)[2]) {
    for (int v = 0; v < 2; ++v) {
        typename lanes<L>::f f;
        std::memcpy(&f, row + v * L, sizeof f);
        column[v] = __builtin_convertvector(f, typename lanes<L>::d);
    }
}

// A tile's chunk sums: hi + lo is the exact sum of each output's terms unless its `unproven` is set.
template <int L>
struct tile_sums {
    double hi[kRows][2 * L], lo[kRows][2 * L];
    int64_t unproven[kRows][2 * L];
};

// The chunk k0 .. k0 + count of the tile of rows i0 .. i0 + kRows, columns j0 .. j0 + 2L, each
// output starting from its accumulator acc[r * n_pad + j]: products of float32 are exact in
// float64; hi gathers them by TwoSum, lo the errors by TwoSum again, and any error of the
// latter (NaN included) marks the output unproven.
template <int L>
ALTGRAD_ACCUMULATE_INLINE void sum_tile(const packed_operands& p, size_t i0, size_t j0, size_t k0,
                                        size_t count, const float* acc, tile_sums<L>& out) {
    using D = typename lanes<L>::d;
    using I = typename lanes<L>::i;
    using F = typename lanes<L>::f;
    D hi[kRows][2], lo[kRows][2];
    I unproven[kRows][2];
    for (size_t r = 0; r < kRows; ++r)
        for (int v = 0; v < 2; ++v) {
            F f;
            std::memcpy(&f, acc + r * p.n_pad + j0 + v * L, sizeof f);
            hi[r][v] = __builtin_convertvector(f, D);
            lo[r][v] = D{};
            unproven[r][v] = I{};
        }
    const float* a = p.a_rows(i0, k0);
    const float* b = p.b_rows(k0, j0);
    for (size_t k = 0; k < count; ++k) {
        D column[2];
        load_columns<L>(b + k * p.n_pad, column);
        for (size_t r = 0; r < kRows; ++r) {
            const double x = a[r * p.k + k];
            for (int v = 0; v < 2; ++v) {
                D err, err_of_lo;
                two_sum(hi[r][v], x * column[v], err);
                two_sum(lo[r][v], err, err_of_lo);
                unproven[r][v] |= err_of_lo != 0;
            }
        }
    }
    for (size_t r = 0; r < kRows; ++r)
        for (int v = 0; v < 2; ++v) {
            std::memcpy(&out.hi[r][v * L], &hi[r][v], sizeof(D));
            std::memcpy(&out.lo[r][v * L], &lo[r][v], sizeof(D));
            std::memcpy(&out.unproven[r][v * L], &unproven[r][v], sizeof(I));
        }
}

// The chunk's products of the tile as plain float64 sums, from zero (exact where
// plain_sum_is_exact says so), each added to its accumulator by TwoSum and rounded to float32.
template <int L>
ALTGRAD_ACCUMULATE_INLINE void plain_sum_tile(const packed_operands& p, size_t i0, size_t j0, size_t k0,
                                              size_t count, const float* acc, float* rounded,
                                              float32_step step) {
    using D = typename lanes<L>::d;
    using F = typename lanes<L>::f;
    D sum[kRows][2] = {};
    const float* a = p.a_rows(i0, k0);
    const float* b = p.b_rows(k0, j0);
    for (size_t k = 0; k < count; ++k) {
        D column[2];
        load_columns<L>(b + k * p.n_pad, column);
        for (size_t r = 0; r < kRows; ++r) {
            const double x = a[r * p.k + k];
            for (int v = 0; v < 2; ++v) sum[r][v] += x * column[v];
        }
    }
    for (size_t r = 0; r < kRows; ++r)
        for (int v = 0; v < 2; ++v) {
            const size_t at = r * p.n_pad + j0 + v * L;
            F f;
            std::memcpy(&f, acc + at, sizeof f);
            D h = __builtin_convertvector(f, D), l;
            two_sum(h, sum[r][v], l);  // h + l = acc + the chunk's sum, exactly
            rounded_lanes<L>(h, l, step, rounded + at);
        }
}

// One chunk (number c) of a row block: every output's chunk sum, rounded to float32 by `step`,
// into rounded[r * n_pad + j] (the accumulators stay in acc until the plugin rounds `rounded`).
// A tile whose bit spans prove the plain float64 sums exact takes them (then acc + sum by
// TwoSum); any other the TwoSum tile, and its unproven outputs the long accumulator.
template <int L>
ALTGRAD_ACCUMULATE_INLINE void chunk_of_block(const packed_operands& p, size_t i0, size_t c, const float* acc,
                                              float* rounded, float32_step step) {
    const size_t k0 = p.chunks[c].k0, count = p.chunks[c].count;
    int span_a = 0;
    for (size_t r = 0; r < kRows; ++r) span_a = std::max<int>(span_a, p.a_span(i0 + r, c));
    tile_sums<L> s;
    for (size_t j0 = 0; j0 < p.n_pad; j0 += 2 * L) {
        const int16_t* spans_b = p.b_span(c, j0);
        const int span_b = *std::max_element(spans_b, spans_b + 2 * L);
        if (plain_sum_is_exact(span_a, span_b, count)) {
            plain_sum_tile<L>(p, i0, j0, k0, count, acc, rounded, step);
            continue;
        }
        sum_tile<L>(p, i0, j0, k0, count, acc, s);
        for (size_t r = 0; r < kRows; ++r)
            for (size_t v = 0; v < 2 * L; ++v) {
                const size_t at = r * p.n_pad + j0 + v;
                if (s.unproven[r][v] != 0) {
                    rounded[at] = exact_chunk(acc[at], p.a_rows(i0 + r, k0), p.b_rows(k0, j0 + v), p.n_pad,
                                              count, step);
                    continue;
                }
                double h = s.hi[r][v], l = s.lo[r][v];
                two_sum(h, l, l);  // h = the double nearest the sum, l = the rest, exactly
                rounded[at] = rounded_to_float32(h, (l > 0) - (l < 0), step);
            }
    }
}

using chunk_function = void (*)(const packed_operands&, size_t, size_t, const float*, float*, float32_step);

void chunk_baseline(const packed_operands& p, size_t i0, size_t c, const float* acc, float* rounded,
                    float32_step step) {
    chunk_of_block<2>(p, i0, c, acc, rounded, step);
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) void chunk_avx2(const packed_operands& p, size_t i0, size_t c,
                                                const float* acc, float* rounded, float32_step step) {
    chunk_of_block<4>(p, i0, c, acc, rounded, step);
}
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void chunk_avx512(
    const packed_operands& p, size_t i0, size_t c, const float* acc, float* rounded, float32_step step) {
    chunk_of_block<8>(p, i0, c, acc, rounded, step);
}
#endif

// The kernel for this CPU (the same results from each: the same operations on each output).
chunk_function chunk_for_this_cpu() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    switch (sdk::detail::cpu_vector_isa()) {
        case sdk::detail::vector_isa::avx512:  // fused multiply-adds: a product is exact, so the same sums
            if (__builtin_cpu_supports("fma")) return chunk_avx512;
            return chunk_avx2;
        case sdk::detail::vector_isa::avx2: return chunk_avx2;
        case sdk::detail::vector_isa::baseline: break;
    }
#endif
    return chunk_baseline;
}

// Row blocks [first, last) of C: for each, every interval's chunks, each rounded to float32
// (chunk) and to the format (one plugin call for the block), then the promotion.
void gemm_blocks(const packed_operands& p, const accumulator& acc, size_t first, size_t last, float* c) {
    const size_t width = kRows * p.n_pad;
    std::vector<float> accumulators(width), rounded(width), total(width);
    quantize_options mode;
    mode.rounding = acc.spec().rounding;
    mode.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    const chunk_function chunk = chunk_for_this_cpu();
    for (size_t block = first; block < last; ++block) {
        const size_t i0 = block * kRows;
        std::fill(accumulators.begin(), accumulators.end(), 0.0f);
        std::fill(total.begin(), total.end(), 0.0f);
        for (size_t c = 0; c < p.chunks.size(); ++c) {
            chunk(p, i0, c, accumulators.data(), rounded.data(), acc.step());
            acc.format().quantize(rounded.data(), accumulators.data(), width, mode);
            if (!p.chunks[c].last_of_interval) continue;
            for (size_t x = 0; x < width; ++x) {  // promotion
                total[x] += accumulators[x];
                accumulators[x] = 0.0f;
            }
        }
        for (size_t r = 0; r < kRows && i0 + r < p.m; ++r)
            std::copy(total.begin() + r * p.n_pad, total.begin() + r * p.n_pad + p.n, c + (i0 + r) * p.n);
    }
}

bool is_float32_grid(const altgrad_format_info& i) {
    return i.family == ALTGRAD_FAMILY_FLOAT && i.exponent_bits == 8 && i.mantissa_bits == 23 &&
           i.bias == 127 && i.has_subnormals != 0 && i.max_finite == FLT_MAX;
}

// How the exact sum reaches float32 for this format and rounding (accumulate.hpp says why).
float32_step step_for(const format_handle& f, altgrad_rounding r) {
    const std::string what = "accumulator format '" + f.name() + "': ";
    if (r != ALTGRAD_ROUND_NEAREST_EVEN && r != ALTGRAD_ROUND_TOWARD_ZERO)
        throw error(what + "rounding '" + rounding_name(r) + "' is not modelled (nearest or toward-zero)");
    if ((f.info().rounding_modes & (1u << r)) == 0)
        throw error(what + "the plugin has no rounding '" + rounding_name(r) + "'");
    if (!f.accepts(ALTGRAD_MEMORY_HOST)) throw error(what + "the plugin takes no host memory");
    if (r == ALTGRAD_ROUND_TOWARD_ZERO) return float32_step::toward_zero;
    const altgrad_format_info& i = f.info();
    if (is_float32_grid(i)) return float32_step::nearest_even;
    // Every value and every midpoint of neighbours must be a float32 with an even last bit.
    const double smallest_step =
        i.has_subnormals ? i.min_subnormal : std::ldexp(i.min_normal, -static_cast<int>(i.mantissa_bits));
    if (i.family == ALTGRAD_FAMILY_FLOAT && i.mantissa_bits <= 21 && smallest_step >= 0x1p-147)
        return float32_step::odd;
    throw error(what +
                "nearest rounding of an exact sum is modelled for float formats of at most 22 significant "
                "bits, and float32 itself (this one: " +
                format_family_names().name(i.family) + ", " + std::to_string(i.mantissa_bits) +
                " mantissa bits); use toward-zero");
}

}  // namespace

accumulator::accumulator(std::shared_ptr<const format_handle> format, const accumulator_spec& spec)
    : format_(std::move(format)), spec_(spec) {
    if (!format_) throw error("accumulator: no format");
    if (spec.mma_depth < 1 || spec.mma_depth > kMaxMmaDepth)
        throw error("accumulator: mma_depth " + std::to_string(spec.mma_depth) + ": expected 1 .. " +
                    std::to_string(kMaxMmaDepth));
    step_ = step_for(*format_, spec.rounding);
}

void round_to_float32(const double* h, const double* l, size_t n, float32_step step, float* out) {
    using D = lanes<8>::d;
    size_t x = 0;
    for (; x + 8 <= n; x += 8) {
        D hv, lv;
        std::memcpy(&hv, h + x, sizeof hv);
        std::memcpy(&lv, l + x, sizeof lv);
        rounded_lanes<8>(hv, lv, step, out + x);
    }
    for (; x < n; ++x) out[x] = rounded_to_float32(h[x], (l[x] > 0) - (l[x] < 0), step);
}

void accumulator::gemm(const gemm_operands& p, float* c, unsigned threads) const {
    if (p.m == 0 || p.n == 0) return;
    const packed_operands packed = pack(p, spec_);
    const size_t blocks = packed.m_pad / kRows;
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    const size_t parts = std::min<size_t>(threads, blocks);
    if (parts <= 1) return gemm_blocks(packed, *this, 0, blocks, c);
    std::vector<std::thread> workers;
    std::vector<std::exception_ptr> errors(parts);
    for (size_t t = 0; t < parts; ++t)
        workers.emplace_back([&, t] {
            try {
                gemm_blocks(packed, *this, blocks * t / parts, blocks * (t + 1) / parts, c);
            } catch (...) {
                errors[t] = std::current_exception();
            }
        });
    for (std::thread& w : workers) w.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace altgrad::host::quant
