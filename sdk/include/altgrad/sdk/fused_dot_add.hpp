// AltGrad SDK: the fused dot-add of a matrix-multiply-accumulate instruction,
// exactly, in integers (abi/accumulator.h states the definition;
// docs/accumulation.md its sources, MMA-Sim and the GPUs it was checked on).
//
// Every value splits into an integer significand with 23 fractional bits and
// an exponent: |x| = m * 2^(e - 23), m < 2^24. A product's significand is
// then ma * mb < 2^48 with 46 fractional bits, so aligning it to the largest
// exponent E and truncating it to F fractional bits is one right shift,
// trunc(ma * mb * 2^(F - 46 + e - E)) = (ma * mb) >> (E + 46 - F - e) (F <= 46),
// of its magnitude, and the terms (each below 2^(F + 2)) add exactly in int64.
//
// fused_dot_add(instruction, args) computes a whole call: it splits each row
// of b once, each row of a once, and then for each output takes the largest
// exponent and the sum of shifted products over the row pair, two plain loops
// the compiler vectorizes (compiled for AVX-512, AVX2 and the baseline, picked
// at run time like the format loops); an output whose operands or C hold a
// NaN or Inf goes through the special-value rule instead. Where every product
// is exact in float32 and the sums fit 24 bits (FP8 operands at F = 13), the
// same loops run in float32 and int32 lanes: the float path, the same bits;
// it takes four rows of a at a time, so that each of b's values loaded serves
// four outputs. The loops over lanes are in fused_dot_add_lanes.inc.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <altgrad/abi/accumulator.h>
#include <altgrad/sdk/philox.hpp>    // detail::cpu_vector_isa
#include <altgrad/sdk/rounding.hpp>  // ALTGRAD_SDK_INLINE, float_bits, bits_float

namespace altgrad::sdk {

// What an instruction computes: the fields of altgrad_accumulator_info that
// define its arithmetic.
struct instruction {
    uint32_t depth = 0;
    uint32_t group_size = 0;
    uint32_t fraction_bits = 0;
    uint32_t halves = 1;
    altgrad_acc_output output = ALTGRAD_ACC_OUTPUT_FLOAT32;
    uint32_t scale_kinds = 1u << ALTGRAD_ACC_SCALE_NONE;
};

// The limits of abi/accumulator.h.
constexpr uint32_t kMaxDepth = 1024;
constexpr uint32_t kMaxFractionBits = 46;
constexpr int32_t kLowestMinExponent = -149;
constexpr int32_t kHighestMinExponent = 127;

// Elements per scale along k of a scale kind (0 for none).
inline size_t scale_block(altgrad_acc_scale_kind kind) {
    return kind == ALTGRAD_ACC_SCALE_UE8M0_32 ? 32 : kind == ALTGRAD_ACC_SCALE_UE4M3_16 ? 16 : 0;
}

// What is wrong with an instruction's declaration (abi/accumulator.h, the
// fields' comments), or "" when nothing is: one rule set for the adapter,
// which refuses to create such an instance, and the host, which refuses to
// use one.
inline std::string instruction_problem(const altgrad_accumulator_info& i) {
    const uint32_t known_scales = (1u << ALTGRAD_ACC_SCALE_NONE) | (1u << ALTGRAD_ACC_SCALE_UE8M0_32) |
                                  (1u << ALTGRAD_ACC_SCALE_UE4M3_16);
    if (i.depth < 1 || i.depth > kMaxDepth)
        return "depth " + std::to_string(i.depth) + " is outside 1.." + std::to_string(kMaxDepth);
    if (i.fraction_bits < 1 || i.fraction_bits > kMaxFractionBits)
        return "fraction_bits " + std::to_string(i.fraction_bits) + " is outside 1.." +
               std::to_string(kMaxFractionBits);
    if (i.halves != 1 && i.halves != 2) return "halves " + std::to_string(i.halves) + " is not 1 or 2";
    if (i.halves == 2 && (i.depth % 2 != 0 || i.group_size != 0))
        return "halves 2 needs an even depth and group_size 0";
    if (i.group_size != 0 && (16 % i.group_size != 0 || i.depth % i.group_size != 0))
        return "group_size " + std::to_string(i.group_size) + " does not divide 16 and the depth " +
               std::to_string(i.depth);
    int32_t output;
    std::memcpy(&output, &i.output, sizeof output);  // any int a plugin stored (raw_enum.hpp)
    if (output < ALTGRAD_ACC_OUTPUT_FLOAT32 || output > ALTGRAD_ACC_OUTPUT_FLOAT16)
        return "output " + std::to_string(output) + " is not one of float32 (1), e8m13 (2), float16 (3)";
    if (i.scale_kinds == 0 || (i.scale_kinds & ~known_scales) != 0)
        return "scale_kinds " + std::to_string(i.scale_kinds) + " is empty or has unknown bits";
    const bool none = (i.scale_kinds & (1u << ALTGRAD_ACC_SCALE_NONE)) != 0;
    if (i.group_size == 0 && (i.scale_kinds & (1u << ALTGRAD_ACC_SCALE_UE4M3_16)) != 0)
        return "UE4M3 scales need group_size > 0";
    if (i.group_size != 0 && none) return "a grouped (block-scaled FP4) instruction takes scales always";
    if (i.group_size != 0 && i.fraction_bits > 40)
        return "a grouped instruction keeps at most 40 fraction_bits (its sum's int64 bound)";
    if ((i.memory_kinds & (1u << ALTGRAD_MEMORY_HOST)) == 0) return "host memory is required";
    return "";
}

// ---------------------------------------------------------------- one value

// |x| = m * 2^(e - 23); negative is 0 or -1 (a mask).
struct split_value {
    uint32_t m;
    int32_t e;
    int32_t negative;
};

// A finite x of a format whose smallest normal exponent is min_exponent:
// e = max(floor(log2 |x|), min_exponent), a zero at e = -126. A value below
// 2^min_exponent keeps its bits only when it is a value of that format (the
// ABI's promise); otherwise the bits below 2^(min_exponent - 23) are lost.
ALTGRAD_SDK_INLINE split_value split_at(float x, int32_t min_exponent) {
    const uint32_t bits = float_bits(x);
    const int32_t negative = -static_cast<int32_t>(bits >> 31);
    const uint32_t field = (bits >> 23) & 0xFFu, fraction = bits & 0x7FFFFFu;
    if (field == 0 && fraction == 0) return {0, -126, negative};
    uint32_t m = fraction | 0x800000u;
    int32_t e = static_cast<int32_t>(field) - 127;
    if (field == 0) {  // a float32 subnormal: normalize it first
        const int lead = __builtin_clz(fraction) - 8;
        m = fraction << lead;
        e = -126 - lead;
    }
    if (e < min_exponent) {
        const int32_t shift = min_exponent - e;
        m = shift > 24 ? 0u : m >> shift;
        e = min_exponent;
    }
    return {m, e, negative};
}

// ---------------------------------------------------------------- the result

// The canonical NaN of an output, as float32 bits.
inline uint32_t output_nan_bits(altgrad_acc_output out) {
    return out == ALTGRAD_ACC_OUTPUT_FLOAT16 ? 0x7FFFE000u : 0x7FFFFFFFu;
}

// sum * 2^unit_exponent, normalized to the output: float32 or E8M13 truncated
// toward zero (subnormals at 2^-126, overflow to Inf), FP16 to nearest even
// (subnormals at 2^-14, overflow to Inf). A zero result is +0.
inline float normalize_sum(int64_t sum, int32_t unit_exponent, altgrad_acc_output out) {
    if (sum == 0) return 0.0f;
    const uint64_t mag = sum < 0 ? 0u - static_cast<uint64_t>(sum) : static_cast<uint64_t>(sum);
    const uint32_t sign = sum < 0 ? 0x80000000u : 0u;
    const bool half = out == ALTGRAD_ACC_OUTPUT_FLOAT16;
    const int32_t bits = half ? 10 : out == ALTGRAD_ACC_OUTPUT_E8M13 ? 13 : 23;
    const int32_t lowest = half ? -14 : -126, highest = half ? 15 : 127;
    const int32_t top = 63 - __builtin_clzll(mag) + unit_exponent;  // floor(log2 |value|)
    int32_t exponent = std::max(top, lowest);
    const int32_t shift = exponent - bits - unit_exponent;  // r = |value| / 2^(exponent - bits)
    uint64_t r;
    if (shift <= 0) {
        r = mag << -shift;  // only small sums come here: r < 2^(bits + 1)
    } else if (shift >= 64) {
        r = 0;  // |value| < 2^-1 steps, below half a step too
    } else {
        r = mag >> shift;
        const uint64_t rest = mag & ((uint64_t{1} << shift) - 1), halfway = uint64_t{1} << (shift - 1);
        if (half && (rest > halfway || (rest == halfway && (r & 1) != 0))) ++r;
    }
    if (r == 0) return 0.0f;
    if (r >> (bits + 1) != 0) {  // rounded up into the next binade
        r >>= 1;
        ++exponent;
    }
    if (exponent > highest) return bits_float(sign | 0x7F800000u);
    if (half) return bits_float(sign | float_bits(std::ldexp(static_cast<float>(r), exponent - bits)));
    if (r >> bits == 0) return bits_float(sign | static_cast<uint32_t>(r << (23 - bits)));  // subnormal
    return bits_float(sign | static_cast<uint32_t>(exponent + 127) << 23 |
                      (static_cast<uint32_t>(r << (23 - bits)) & 0x7FFFFFu));
}

// The NaN and Inf rule: C and the products (with their scales) tallied in
// double, where no product of float32 values and scales overflows, so a NaN
// or an Inf in the tally is one in the exact sum.
struct special_tally {
    bool nan = false, plus_inf = false, minus_inf = false;

    void add(double v) {
        if (v != v) nan = true;
        else if (v == std::numeric_limits<double>::infinity()) plus_inf = true;
        else if (v == -std::numeric_limits<double>::infinity()) minus_inf = true;
    }
    bool any() const { return nan || plus_inf || minus_inf; }
    float result(altgrad_acc_output out) const {
        if (nan || (plus_inf && minus_inf)) return bits_float(output_nan_bits(out));
        return plus_inf ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
    }
};

// ---------------------------------------------------------------- one call

namespace detail {

// A padding element: no product, and an exponent below any real one.
constexpr int32_t kPadExponent = -(1 << 20);

// Each row's split operands, laid out for the loops: `halves` segments of
// `segment` elements (a multiple of 8), padded.
struct split_rows {
    size_t segment = 0, stride = 0;
    std::vector<uint32_t> m;
    std::vector<int32_t> e, negative;
    std::vector<float> value;      // the operands themselves (padding 0), for the float path
    std::vector<uint8_t> special;  // a NaN or Inf among the row's operands or scales
    // Every operand of the row has at most 12 significant bits and splits
    // without loss (a product of two is then exact in float32): the float path's condition.
    std::vector<uint8_t> narrow;

    void reset(size_t rows, size_t segment_length, uint32_t halves) {
        segment = (segment_length + 7) / 8 * 8;
        stride = segment * halves;
        m.assign(rows * stride, 0u);
        e.assign(rows * stride, kPadExponent);
        negative.assign(rows * stride, 0);
        value.assign(rows * stride, 0.0f);
        special.assign(rows, 0);
        narrow.assign(rows, 0);
    }
};

// Whether finite x has at most 12 significant bits and split_at(x, min_exponent) keeps them all.
ALTGRAD_SDK_INLINE bool narrow_value(float x, const split_value& s) {
    const uint32_t bits = float_bits(x);
    if ((bits & 0x7FFFFFFFu) == 0) return true;
    if ((bits & 0x7F800000u) == 0 || (bits & 0xFFFu) != 0) return false;  // a float32 subnormal, or wide
    // The bits split_at drops below the format's smallest normal exponent must be zeros.
    const int32_t shift = s.e - (static_cast<int32_t>((bits >> 23) & 0xFFu) - 127);
    const uint32_t m = (bits & 0x7FFFFFu) | 0x800000u;
    return shift == 0 || (shift < 24 && (m & ((1u << shift) - 1u)) == 0);
}

// Where element l of a row goes: its segment, then its place in it.
inline size_t slot(size_t l, const instruction& ins, size_t segment) {
    const size_t half = ins.depth / 2;
    return ins.halves == 2 && l >= half ? segment + (l - half) : l;
}

// L values side by side (GCC and Clang vector extensions).
template <size_t kLanes>
struct lanes {
    typedef int32_t i32 __attribute__((vector_size(kLanes * 4)));
    typedef uint32_t u32 __attribute__((vector_size(kLanes * 4)));
    typedef int64_t i64 __attribute__((vector_size(kLanes * 8)));
    typedef uint64_t u64 __attribute__((vector_size(kLanes * 8)));
    typedef float f32 __attribute__((vector_size(kLanes * 4)));
};

// v = the lanes at p (an out-parameter: a vector returned by value would be a
// by-ABI-width value GCC warns about where the caller's ISA is narrower).
template <class V, class T>
ALTGRAD_SDK_INLINE void load_lanes(V& v, const T* p) {
    std::memcpy(&v, p, sizeof v);
}

// split_row's split of a row of zeros and normal float32 values (no NaN,
// Inf or float32 subnormal) of a length a multiple of 8: split_at and
// narrow_value in 8 lanes without a branch. False, with nothing to keep,
// where the row has another value or length (split_row's general loop then
// splits it).
ALTGRAD_SDK_INLINE bool split_plain(uint32_t* m, int32_t* e, int32_t* negative, float* value, const float* x,
                                    size_t k, int32_t min_exponent, uint8_t& narrow) {
    typedef lanes<8>::u32 u32s;
    typedef lanes<8>::i32 i32s;
    if (k % 8 != 0) return false;
    u32s odd = {}, wide = {}, bits;
    for (size_t l = 0; l < k; l += 8) {
        load_lanes(bits, x + l);
        const i32s field = (i32s)((bits >> 23) & 0xFFu);
        const u32s full = (bits & 0x7FFFFFu) | 0x800000u;
        const i32s zero = (i32s)(bits & 0x7FFFFFFFu) == 0;
        odd |= (u32s)(((field == 0) & ~zero) | (field == 0xFF));
        const i32s e0 = field - 127;
        const i32s shift = min_exponent > e0 ? min_exponent - e0 : 0;  // below the format's normal range
        const u32s capped = (u32s)(shift < 31 ? shift : 31);
        const u32s mv = (zero | (shift > 24)) != 0 ? 0u : full >> capped;
        const i32s ev = zero != 0 ? -126 : (e0 > min_exponent ? e0 : min_exponent);
        const i32s nv = -(i32s)(bits >> 31);
        const u32s one = (capped & 0u) + 1u;
        const u32s lost = (bits & 0xFFFu) | (u32s)(shift >= 24) | (full & ((one << capped) - 1u));
        wide |= zero != 0 ? 0u : lost;
        std::memcpy(m + l, &mv, sizeof mv);
        std::memcpy(e + l, &ev, sizeof ev);
        std::memcpy(negative + l, &nv, sizeof nv);
        std::memcpy(value + l, x + l, sizeof bits);
    }
    bool some_odd = false, some_wide = false;
    for (size_t w = 0; w < 8; ++w) {
        some_odd |= odd[w] != 0;
        some_wide |= wide[w] != 0;
    }
    narrow = narrow && !some_wide;
    return !some_odd;
}

// Split row r of x (k values, with its UE8M0 scales folded in as exponents).
ALTGRAD_SDK_INLINE void split_row(split_rows& rows, size_t r, const float* x, size_t k, int32_t min_exponent,
                                  const float* scales, size_t block, const instruction& ins) {
    uint8_t special = 0, narrow = block == 0;  // the float path takes no block scales
    uint32_t* m = rows.m.data() + r * rows.stride;
    int32_t* e = rows.e.data() + r * rows.stride;
    int32_t* negative = rows.negative.data() + r * rows.stride;
    float* value = rows.value.data() + r * rows.stride;
    const bool plain = ins.halves == 1 && split_plain(m, e, negative, value, x, k, min_exponent, narrow);
    for (size_t l = 0; !plain && l < k; ++l) {
        const float v = x[l];
        special |= !std::isfinite(v);
        const split_value s = split_at(std::isfinite(v) ? v : 0.0f, min_exponent);
        narrow &= std::isfinite(v) && narrow_value(v, s);
        const size_t at = slot(l, ins, rows.segment);
        m[at] = s.m;
        e[at] = s.e;
        negative[at] = s.negative;
        value[at] = v;
    }
    rows.narrow[r] = narrow;
    for (size_t b = 0; block != 0 && b * block < k; ++b) {
        const float s = scales[b];
        special |= !std::isfinite(s);
        const int32_t se = split_at(std::isfinite(s) ? s : 1.0f, -127).e;
        for (size_t l = b * block; l < std::min(k, (b + 1) * block); ++l) e[slot(l, ins, rows.segment)] += se;
    }
    rows.special[r] = special;
}

// The largest of ea[l] + eb[l] over n elements.
ALTGRAD_SDK_INLINE int32_t largest_exponent(const int32_t* ea, const int32_t* eb, size_t n) {
    int32_t best = kPadExponent * 2;
    for (size_t l = 0; l < n; ++l) {
        const int32_t e = ea[l] + eb[l];
        best = e > best ? e : best;
    }
    return best;
}

// The sum over n elements of +-((ma * mb) >> (base - ea - eb)), each shift at
// most 63: the products aligned to 2^(base - 46) and truncated toward zero.
ALTGRAD_SDK_INLINE int64_t aligned_sum(const uint32_t* ma, const int32_t* ea, const int32_t* na,
                                       const uint32_t* mb, const int32_t* eb, const int32_t* nb, size_t n,
                                       int32_t base) {
    int64_t sum = 0;
    for (size_t l = 0; l < n; ++l) {
        const uint64_t product = uint64_t{ma[l]} * mb[l];
        const uint32_t shift = std::min(static_cast<uint32_t>(base - ea[l] - eb[l]), 63u);
        const int64_t negative = na[l] ^ nb[l];
        sum += (static_cast<int64_t>(product >> shift) ^ negative) - negative;
    }
    return sum;
}

// C aligned to 2^(largest - F) and truncated toward zero.
ALTGRAD_SDK_INLINE int64_t aligned_c(const split_value& c, int32_t largest, uint32_t fraction_bits) {
    const int32_t up = static_cast<int32_t>(fraction_bits) - 23 - (largest - c.e);
    const uint64_t mag = up >= 0 ? uint64_t{c.m} << up : uint64_t{c.m} >> std::min(-up, 63);
    return (static_cast<int64_t>(mag) ^ c.negative) - c.negative;
}

inline int32_t c_min_exponent(const instruction& ins) {
    return ins.output == ALTGRAD_ACC_OUTPUT_FLOAT16 ? -14 : -126;
}

// One fused dot-add of n (padded) split products onto a finite c.
ALTGRAD_SDK_INLINE float segment_dot_add(const uint32_t* ma, const int32_t* ea, const int32_t* na,
                                         const uint32_t* mb, const int32_t* eb, const int32_t* nb, size_t n,
                                         float c, const instruction& ins) {
    const split_value cs = split_at(c, c_min_exponent(ins));
    const int32_t largest = std::max(largest_exponent(ea, eb, n), cs.e);
    const int32_t f = static_cast<int32_t>(ins.fraction_bits);
    const int64_t sum =
        aligned_sum(ma, ea, na, mb, eb, nb, n, largest + 46 - f) + aligned_c(cs, largest, ins.fraction_bits);
    return normalize_sum(sum, largest - f, ins.output);
}

// The tally of C and the products [l0, l1) of one output (block scales by
// magnitude for UE4M3, as they apply).
inline special_tally tally_products(const float* a, const float* b, const float* sa, const float* sb,
                                    size_t block, size_t l0, size_t l1, float c) {
    special_tally t;
    t.add(c);
    for (size_t l = l0; l < l1; ++l) {
        double p = static_cast<double>(a[l]) * b[l];
        if (block != 0) p *= std::fabs(static_cast<double>(sa[l / block])) * std::fabs(sb[l / block]);
        t.add(p);
    }
    return t;
}

// The pieces of one call the output loops share.
struct call_view {
    const altgrad_accumulator_args& args;
    const instruction& ins;
    size_t block;             // elements per scale along k, 0 without scales
    bool float_path = false;  // the call may take the float path where its rows are narrow
};

// Output (i, j) from split rows a (row i) and b (row j), segment by segment;
// the special rule wherever a NaN or Inf is in reach.
ALTGRAD_SDK_INLINE float output_dot_add(const call_view& v, size_t i, size_t j, const split_rows& a,
                                        size_t ra, const split_rows& b) {
    const altgrad_accumulator_args& x = v.args;
    float acc = x.c[i * x.n + j];
    const bool rows_special = a.special[ra] || b.special[j];
    const size_t half = v.ins.halves == 2 ? v.ins.depth / 2 : x.k;
    for (uint32_t s = 0; s < v.ins.halves; ++s) {
        const size_t l0 = s == 0 ? 0 : half, l1 = s == 0 ? std::min(half, x.k) : x.k;
        if (rows_special || !std::isfinite(acc)) {
            const float* sa =
                x.a_scales == nullptr ? nullptr : x.a_scales + i * ((x.k + v.block - 1) / v.block);
            const float* sb =
                x.b_scales == nullptr ? nullptr : x.b_scales + j * ((x.k + v.block - 1) / v.block);
            const special_tally t =
                tally_products(x.a + i * x.k, x.b + j * x.k, sa, sb, v.block, l0, l1, acc);
            if (t.any()) {
                acc = t.result(v.ins.output);
                continue;
            }
        }
        const size_t at = s * a.segment;
        acc = segment_dot_add(a.m.data() + ra * a.stride + at, a.e.data() + ra * a.stride + at,
                              a.negative.data() + ra * a.stride + at, b.m.data() + j * b.stride + at,
                              b.e.data() + j * b.stride + at, b.negative.data() + j * b.stride + at,
                              a.segment, acc, v.ins);
    }
    return acc;
}

// ---------------------------------------------------------------- outputs side by side

#include <altgrad/sdk/fused_dot_add_lanes.inc>

// Row i of a, split into row r of `a` (its UE8M0 scales folded in).
ALTGRAD_SDK_INLINE void split_a_row(const call_view& v, split_rows& a, size_t r, size_t i) {
    const altgrad_accumulator_args& x = v.args;
    const size_t scales_per_row = v.block == 0 ? 0 : (x.k + v.block - 1) / v.block;
    split_row(a, r, x.a + i * x.k, x.k, x.a_min_exponent,
              x.a_scales == nullptr ? nullptr : x.a_scales + i * scales_per_row, v.block, v.ins);
}

// A call's split operands, kept by each thread from one call to the next so
// that their buffers are allocated once rather than per call (b's
// transposed arrays of a call of 512 columns are 128 KiB each: fresh pages,
// faulted in, every call).
template <size_t kLanes>
struct dot_add_buffers {
    split_rows a, b;
    split_columns<kLanes> bt;
};

// Not inlined: GCC would otherwise compute the thread-local address again
// inside the loops that use the buffers (a call of __tls_get_addr each time).
template <size_t kLanes>
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
inline dot_add_buffers<kLanes>&
thread_buffers() {
    static thread_local dot_add_buffers<kLanes> buffers;
    return buffers;
}

// The non-grouped call: b's rows split once (and transposed into blocks of
// lanes for float32 and E8M13 outputs), then a's rows kRows at a time where
// the call may take the float path with one segment (rows_block), and one
// at a time otherwise.
template <size_t kLanes>
ALTGRAD_SDK_INLINE void dot_add_body(const call_view& v) {
    constexpr size_t kRows = 4;
    const altgrad_accumulator_args& x = v.args;
    const size_t segment_length = v.ins.halves == 2 ? v.ins.depth / 2 : x.k;
    const size_t scales_per_row = v.block == 0 ? 0 : (x.k + v.block - 1) / v.block;
    dot_add_buffers<kLanes>& buffers = thread_buffers<kLanes>();
    split_rows &a = buffers.a, &b = buffers.b;
    b.reset(x.n, segment_length, v.ins.halves);
    for (size_t j = 0; j < x.n; ++j)
        split_row(b, j, x.b + j * x.k, x.k, x.b_min_exponent,
                  x.b_scales == nullptr ? nullptr : x.b_scales + j * scales_per_row, v.block, v.ins);
    const bool lanes = v.ins.output != ALTGRAD_ACC_OUTPUT_FLOAT16;
    split_columns<kLanes>& bt = buffers.bt;
    if (lanes) bt.transpose(b, x.n, v.float_path);
    const bool blocked = lanes && v.float_path && v.ins.halves == 1;
    a.reset(blocked ? kRows : 1, segment_length, v.ins.halves);
    size_t i = 0;
    for (; blocked && i + kRows <= x.m; i += kRows) {
        for (size_t q = 0; q < kRows; ++q) split_a_row(v, a, q, i + q);
        for (size_t j0 = 0; j0 < x.n; j0 += kLanes) rows_block<kLanes, kRows>(v, i, j0, a, b, bt);
    }
    for (; i < x.m; ++i) {
        split_a_row(v, a, 0, i);
        if (lanes)
            for (size_t j0 = 0; j0 < x.n; j0 += kLanes) block_of_row(v, i, j0, a, 0, b, bt);
        else
            for (size_t j = 0; j < x.n; ++j) x.d[i * x.n + j] = output_dot_add(v, i, j, a, 0, b);
    }
}

// ---------------------------------------------------------------- block-scaled FP4

// Each row's E2M1 operands as integers q = 2x (|q| <= 12), and its scales as
// significands with 3 fractional bits (UE4M3 by magnitude; UE8M0's is 8)
// and exponents.
struct fp4_rows {
    std::vector<int32_t> q, scale_m, scale_e;
    std::vector<uint8_t> special;
    size_t k = 0, scales = 0;

    void reset(size_t rows, size_t k_, size_t scales_per_row) {
        k = k_;
        scales = scales_per_row;
        q.assign(rows * k, 0);
        scale_m.assign(rows * scales, 0);
        scale_e.assign(rows * scales, 0);
        special.assign(rows, 0);
    }

    void split(size_t r, const float* x, const float* s, altgrad_acc_scale_kind kind) {
        uint8_t nonfinite = 0;
        for (size_t l = 0; l < k; ++l) {
            nonfinite |= !std::isfinite(x[l]);
            // A value outside E2M1 (the host's promise broken) is clamped, so it stays an int.
            q[r * k + l] =
                std::isfinite(x[l]) ? static_cast<int32_t>(std::max(-6.0f, std::min(6.0f, x[l])) * 2) : 0;
        }
        for (size_t b = 0; b < scales; ++b) {
            nonfinite |= !std::isfinite(s[b]);
            const float magnitude = std::isfinite(s[b]) ? std::fabs(s[b]) : 1.0f;
            const split_value v = split_at(magnitude, kind == ALTGRAD_ACC_SCALE_UE4M3_16 ? -6 : -127);
            scale_m[r * scales + b] = static_cast<int32_t>(v.m >> 20);
            scale_e[r * scales + b] = v.e;
        }
        special[r] = nonfinite;
    }
};

// A group's term: its exact sum g (units of 2^-2) times its scales'
// significands (units of 2^-6 together), at the scales' exponent sum eg,
// aligned to 2^(largest - F) and truncated toward zero.
ALTGRAD_SDK_INLINE int64_t aligned_group(int64_t g, int32_t eg, int32_t largest, int32_t f) {
    const int32_t down = largest - eg + 8 - f;
    const uint64_t mag = g < 0 ? 0u - static_cast<uint64_t>(g) : static_cast<uint64_t>(g);
    const uint64_t t = down <= 0 ? mag << -down : mag >> std::min(down, 63);
    return g < 0 ? -static_cast<int64_t>(t) : static_cast<int64_t>(t);
}

// Output (i, j) of a grouped call from split rows a (row ra) and b (row j).
ALTGRAD_SDK_INLINE float output_grouped(const call_view& v, size_t i, size_t j, const fp4_rows& a, size_t ra,
                                        const fp4_rows& b) {
    const altgrad_accumulator_args& x = v.args;
    const float c = x.c[i * x.n + j];
    if (a.special[ra] || b.special[j] || !std::isfinite(c)) {
        const special_tally t = tally_products(x.a + i * x.k, x.b + j * x.k, x.a_scales + i * a.scales,
                                               x.b_scales + j * b.scales, v.block, 0, x.k, c);
        if (t.any()) return t.result(v.ins.output);
    }
    const size_t gs = v.ins.group_size, groups = (x.k + gs - 1) / gs;
    const int32_t* qa = a.q.data() + ra * a.k;
    const int32_t* qb = b.q.data() + j * b.k;
    const split_value cs = split_at(c, c_min_exponent(v.ins));
    int32_t largest = cs.e;
    for (size_t s = 0; s < a.scales; ++s)
        largest = std::max(largest, a.scale_e[ra * a.scales + s] + b.scale_e[j * b.scales + s]);
    const int32_t f = static_cast<int32_t>(v.ins.fraction_bits);
    int64_t sum = aligned_c(cs, largest, v.ins.fraction_bits);
    for (size_t g = 0; g < groups; ++g) {
        int32_t group = 0;
        for (size_t l = g * gs; l < std::min(x.k, (g + 1) * gs); ++l) group += qa[l] * qb[l];
        const size_t s = g * gs / v.block;
        const int64_t scaled = int64_t{group} * a.scale_m[ra * a.scales + s] * b.scale_m[j * b.scales + s];
        sum += aligned_group(scaled, a.scale_e[ra * a.scales + s] + b.scale_e[j * b.scales + s], largest, f);
    }
    return normalize_sum(sum, largest - f, v.ins.output);
}

ALTGRAD_SDK_INLINE void grouped_body(const call_view& v) {
    const altgrad_accumulator_args& x = v.args;
    const size_t scales_per_row = (x.k + v.block - 1) / v.block;
    fp4_rows a, b;
    b.reset(x.n, x.k, scales_per_row);
    for (size_t j = 0; j < x.n; ++j) b.split(j, x.b + j * x.k, x.b_scales + j * scales_per_row, x.scale_kind);
    a.reset(1, x.k, scales_per_row);
    for (size_t i = 0; i < x.m; ++i) {
        a.split(0, x.a + i * x.k, x.a_scales + i * scales_per_row, x.scale_kind);
        for (size_t j = 0; j < x.n; ++j) x.d[i * x.n + j] = output_grouped(v, i, j, a, 0, b);
    }
}

// ---------------------------------------------------------------- dispatch

template <size_t kLanes>
ALTGRAD_SDK_INLINE void call_body(const call_view& v) {
    if (v.ins.group_size != 0) grouped_body(v);
    else dot_add_body<kLanes>(v);
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) inline void call_avx2(const call_view& v) { call_body<4>(v); }
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,prefer-vector-width=512"))) inline void
call_avx512(const call_view& v) {
    call_body<8>(v);
}
#else
inline void call_avx2(const call_view& v) { call_body<4>(v); }
inline void call_avx512(const call_view& v) { call_body<4>(v); }
#endif
inline void call_baseline(const call_view& v) { call_body<4>(v); }

}  // namespace detail

// d = fused_dot_add(c, a, b, scales) for every output of the call, as `ins`
// defines it (abi/accumulator.h). The arguments must be valid (the adapter,
// accumulator_plugin.hpp, checks them: check_accumulator_args). `isa` picks
// the loops' instruction set (the tests run each); every one gives the same
// bits.
inline void fused_dot_add(const instruction& ins, const altgrad_accumulator_args& args,
                          detail::vector_isa isa = detail::cpu_vector_isa()) {
    if (args.m == 0 || args.n == 0) return;
    const size_t segment_length = ins.halves == 2 ? ins.depth / 2 : args.k;
    const detail::call_view v{args, ins, scale_block(args.scale_kind),
                              detail::float_path_fits(ins, segment_length)};
    switch (isa) {
        case detail::vector_isa::avx512: return detail::call_avx512(v);
        case detail::vector_isa::avx2: return detail::call_avx2(v);
        case detail::vector_isa::baseline: break;
    }
    detail::call_baseline(v);
}

}  // namespace altgrad::sdk
