#include "conformance/accumulator_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace altgrad::host::conformance {

namespace {

// x = s * 2^e, 1 <= |s| < 2, or |s| < 1 at e = min_exponent; 0 at e = -126.
struct split {
    double s = 0;
    int e = -126;
};
split split_at(double x, int min_exponent) {
    if (x == 0) return {};
    int e = 0;
    std::frexp(x, &e);
    const int exponent = std::max(e - 1, min_exponent);
    return {std::ldexp(x, -exponent), exponent};
}

// trunc(s * 2^shift): exact in double (a power-of-two scaling of a value of
// at most 53 bits, below 2^63 by the ABI's limits), 0 when far below 1.
int64_t aligned(double s, int shift) {
    if (shift < -1000) return 0;
    return static_cast<int64_t>(std::trunc(std::ldexp(s, shift)));
}

struct term {
    double s;
    int e;
};

// Steps 2 and 3: align to the largest exponent, truncate to F bits, add, round.
float fused_sum(const std::vector<term>& terms, const altgrad_accumulator_info& info) {
    int largest = std::numeric_limits<int>::min();
    for (const term& t : terms) largest = std::max(largest, t.e);
    const int f = static_cast<int>(info.fraction_bits);
    int64_t sum = 0;
    for (const term& t : terms) sum += aligned(t.s, f + t.e - largest);
    return model_round(std::ldexp(static_cast<long double>(sum), largest - f), info.output);
}

// NaN or Inf in C and the products (with their scales, UE4M3 by magnitude),
// summed in long double, where no product of float32 values overflows.
long double special_sum(const acc_row_pair& x, size_t l0, size_t l1, float c) {
    const size_t block = acc_scale_block(x.scale_kind);
    long double sum = c;
    for (size_t l = l0; l < l1; ++l) {
        long double p = static_cast<long double>(x.a[l]) * x.b[l];
        if (block != 0)
            p *=
                std::fabs(static_cast<long double>(x.a_scales[l / block])) * std::fabs(x.b_scales[l / block]);
        sum += p;
    }
    return sum;
}

float special_result(long double sum, altgrad_acc_output out) {
    if (std::isnan(sum)) {
        const uint32_t bits = model_nan_bits(out);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }
    return sum > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
}

int c_min_exponent(const altgrad_accumulator_info& info) {
    return info.output == ALTGRAD_ACC_OUTPUT_FLOAT16 ? -14 : -126;
}

// One fused dot-add of products [l0, l1) onto c.
float dot_add(const altgrad_accumulator_info& info, const acc_row_pair& x, size_t l0, size_t l1, float c) {
    const long double special = special_sum(x, l0, l1, c);
    if (!std::isfinite(special)) return special_result(special, info.output);
    const size_t block = acc_scale_block(x.scale_kind);
    std::vector<term> terms;
    const split cs = split_at(c, c_min_exponent(info));
    terms.push_back({cs.s, cs.e});
    for (size_t l = l0; l < l1; ++l) {
        const split a = split_at(x.a[l], x.a_min_exponent), b = split_at(x.b[l], x.b_min_exponent);
        int e = a.e + b.e;
        if (block != 0)
            e += split_at(x.a_scales[l / block], -127).e + split_at(x.b_scales[l / block], -127).e;
        terms.push_back({a.s * b.s, e});
    }
    return fused_sum(terms, info);
}

// Block-scaled FP4: groups of E2M1 products summed exactly, times their scales' significands.
float grouped_dot_add(const altgrad_accumulator_info& info, const acc_row_pair& x, float c) {
    const long double special = special_sum(x, 0, x.k, c);
    if (!std::isfinite(special)) return special_result(special, info.output);
    const size_t block = acc_scale_block(x.scale_kind), g = info.group_size;
    const int scale_min = x.scale_kind == ALTGRAD_ACC_SCALE_UE4M3_16 ? -6 : -127;
    std::vector<term> terms;
    const split cs = split_at(c, c_min_exponent(info));
    terms.push_back({cs.s, cs.e});
    for (size_t g0 = 0; g0 < x.k; g0 += g) {
        double sum = 0;  // E2M1 products are multiples of 1/4 below 36: every partial sum exact
        for (size_t l = g0; l < std::min(x.k, g0 + g); ++l) sum += static_cast<double>(x.a[l]) * x.b[l];
        const split sa = split_at(std::fabs(x.a_scales[g0 / block]), scale_min);
        const split sb = split_at(std::fabs(x.b_scales[g0 / block]), scale_min);
        terms.push_back({sum * sa.s * sb.s, sa.e + sb.e});
    }
    return fused_sum(terms, info);
}

}  // namespace

size_t acc_scale_block(altgrad_acc_scale_kind kind) {
    return kind == ALTGRAD_ACC_SCALE_UE8M0_32 ? 32 : kind == ALTGRAD_ACC_SCALE_UE4M3_16 ? 16 : 0;
}

uint32_t model_nan_bits(altgrad_acc_output out) {
    return out == ALTGRAD_ACC_OUTPUT_FLOAT16 ? 0x7FFFE000u : 0x7FFFFFFFu;
}

float model_round(long double value, altgrad_acc_output out) {
    if (value == 0) return 0.0f;
    const bool half = out == ALTGRAD_ACC_OUTPUT_FLOAT16;
    const int bits = half ? 10 : out == ALTGRAD_ACC_OUTPUT_E8M13 ? 13 : 23;
    const int lowest = half ? -14 : -126, highest = half ? 15 : 127;
    const int exponent = std::max(std::ilogb(value), lowest);
    const long double steps = std::ldexp(std::fabs(value), bits - exponent);
    const long double kept = std::ldexp(half ? std::nearbyint(steps) : std::trunc(steps), exponent - bits);
    if (kept == 0) return 0.0f;
    if (kept >= std::ldexp(1.0L, highest + 1))
        return value < 0 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    return static_cast<float>(value < 0 ? -kept : kept);
}

float model_output(const altgrad_accumulator_info& info, const acc_row_pair& x, float c) {
    if (info.group_size != 0) return grouped_dot_add(info, x, c);
    if (info.halves != 2) return dot_add(info, x, 0, x.k, c);
    const size_t half = info.depth / 2;
    return dot_add(info, x, half, std::max(x.k, half), dot_add(info, x, 0, std::min(x.k, half), c));
}

std::vector<float> model_tile(const altgrad_accumulator_info& info, const altgrad_accumulator_args& args) {
    const size_t block = acc_scale_block(args.scale_kind);
    const size_t per_row = block == 0 ? 0 : (args.k + block - 1) / block;
    std::vector<float> d(args.m * args.n);
    for (size_t i = 0; i < args.m; ++i)
        for (size_t j = 0; j < args.n; ++j) {
            acc_row_pair x;
            x.a = args.a + i * args.k;
            x.b = args.b + j * args.k;
            x.k = args.k;
            x.a_min_exponent = args.a_min_exponent;
            x.b_min_exponent = args.b_min_exponent;
            x.scale_kind = args.scale_kind;
            if (block != 0) {
                x.a_scales = args.a_scales + i * per_row;
                x.b_scales = args.b_scales + j * per_row;
            }
            d[i * args.n + j] = model_output(info, x, args.c[i * args.n + j]);
        }
    return d;
}

}  // namespace altgrad::host::conformance
