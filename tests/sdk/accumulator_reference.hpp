// The fused dot-add of abi/accumulator.h written again for the tests, slowly
// and plainly, sharing nothing with the SDK's integer implementation
// (altgrad/sdk/fused_dot_add.hpp): every significand an exact dyadic rational
// (a Boost.Multiprecision cpp_int times a power of two), each step as MMA-Sim
// states it (microsoft/MMA-Sim, mmasim/simulator/arithmetic.py: the split by
// frexp, fused_sum, nv_fused_dot_add, nv_fused_dot_add_with_block_scale), the
// exact sum normalized through long double (64 significant bits hold it).
#pragma once

#include <boost/multiprecision/cpp_int.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace acctest {

using big = boost::multiprecision::cpp_int;

// n * 2^p, exactly.
struct dyadic {
    big n = 0;
    int p = 0;
};

inline dyadic operator*(const dyadic& x, const dyadic& y) { return {x.n * y.n, x.p + y.p}; }

// trunc(x * 2^shift), toward zero (cpp_int's division truncates, as C++'s does).
inline big truncated(const dyadic& x, int shift) {
    const int p = x.p + shift;
    if (p >= 0) return x.n << p;
    return x.n / (big(1) << -p);
}

// A finite double, exactly: x = f 2^e with f in [0.5, 1) of 53 bits.
inline dyadic exact(double x) {
    int e = 0;
    const double f = std::frexp(x, &e);
    return {big(static_cast<int64_t>(std::ldexp(f, 53))), e - 53};
}

// MMA-Sim's extract_significand_exponent: x = s * 2^e with 1 <= |s| < 2,
// or |s| < 1 at e = min_exponent below it; a zero is (0, -126).
struct term {
    dyadic s;
    int e = 0;
};
inline term split(double x, int min_exponent) {
    if (x == 0) return {dyadic{}, -126};
    int e = 0;
    std::frexp(x, &e);
    const int exponent = std::max(e - 1, min_exponent);
    dyadic s = exact(x);
    s.p -= exponent;
    return {s, exponent};
}

enum class output { float32, e8m13, float16 };

struct instruction {
    int depth = 32;
    int fraction_bits = 13;
    int halves = 1;
    int group_size = 0;  // > 0: block-scaled FP4 (E2M1 operands)
    output out = output::float32;
};

// sum * 2^unit normalized: float32 or E8M13 truncated toward zero, FP16 to
// nearest even, each with its subnormals; beyond the largest binade, Inf. A
// zero is +0.
inline float normalize(const big& sum, int unit, output out) {
    if (sum == 0) return 0.0f;
    if (boost::multiprecision::msb(abs(sum)) >= 63)
        throw std::logic_error("the reference's sum exceeds 63 bits");
    const long double v = std::ldexp(static_cast<long double>(sum.convert_to<int64_t>()), unit);
    const int bits = out == output::float16 ? 10 : out == output::e8m13 ? 13 : 23;
    const int lowest = out == output::float16 ? -14 : -126, highest = out == output::float16 ? 15 : 127;
    const int exponent = std::max(std::ilogb(v), lowest);
    const long double steps = std::ldexp(std::fabs(v), bits - exponent);
    const long double r =
        out == output::float16 ? std::nearbyint(steps) : std::trunc(steps);  // nearest: ties even
    const long double magnitude = std::ldexp(r, exponent - bits);
    if (magnitude == 0) return 0.0f;
    if (magnitude >= std::ldexp(1.0L, highest + 1)) return v < 0 ? -INFINITY : INFINITY;
    return static_cast<float>(v < 0 ? -magnitude : magnitude);
}

inline float canonical_nan(output out) {
    const uint32_t bits = out == output::float16 ? 0x7FFFE000u : 0x7FFFFFFFu;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// fused_sum: align to the largest exponent, truncate each to F fractional bits, add.
inline float fused_sum(const std::vector<term>& terms, const instruction& ins) {
    int largest = std::numeric_limits<int>::min();
    for (const term& t : terms) largest = std::max(largest, t.e);
    big sum = 0;
    for (const term& t : terms) sum += truncated(t.s, ins.fraction_bits + t.e - largest);
    return normalize(sum, largest - ins.fraction_bits, ins.out);
}

// One operand row pair with its block scales (each scale covering `block`
// elements; none when block is 0).
struct operands {
    std::vector<float> a, b, scale_a, scale_b;
    int a_min_exponent = -6, b_min_exponent = -6;
    int block = 0;
    bool ue4m3 = false;  // the scales are UE4M3 (by magnitude), else UE8M0
};

// nv_fused_dot_add over products [l0, l1) onto c.
inline float nv_fused_dot_add(const operands& x, size_t l0, size_t l1, float c, const instruction& ins) {
    long double check = c;  // MMA-Sim: NaN or Inf anywhere in the float64 sum
    for (size_t l = l0; l < l1; ++l) {
        long double p = static_cast<long double>(x.a[l]) * x.b[l];
        if (x.block) p *= static_cast<long double>(x.scale_a[l / x.block]) * x.scale_b[l / x.block];
        check += p;
    }
    if (std::isnan(check)) return canonical_nan(ins.out);
    if (std::isinf(check)) return static_cast<float>(check);
    const int c_min = ins.out == output::float16 ? -14 : -126;
    std::vector<term> terms{split(c, c_min)};
    for (size_t l = l0; l < l1; ++l) {
        const term ta = split(x.a[l], x.a_min_exponent), tb = split(x.b[l], x.b_min_exponent);
        int e = ta.e + tb.e;
        if (x.block) e += split(x.scale_a[l / x.block], -127).e + split(x.scale_b[l / x.block], -127).e;
        terms.push_back({ta.s * tb.s, e});
    }
    return fused_sum(terms, ins);
}

// nv_fused_dot_add_with_block_scale (groups of ins.group_size E2M1 products);
// an Inf C, which MMA-Sim leaves undefined, gives that Inf.
inline float grouped_dot_add(const operands& x, size_t k, float c, const instruction& ins) {
    for (size_t s = 0; s < x.scale_a.size(); ++s)
        if (std::isnan(x.scale_a[s]) || std::isnan(x.scale_b[s])) return canonical_nan(ins.out);
    if (std::isnan(c)) return canonical_nan(ins.out);
    if (std::isinf(c)) return c;
    const int scale_min = x.ue4m3 ? -6 : -127;
    std::vector<term> terms{split(c, -126)};
    for (size_t g0 = 0; g0 < k; g0 += ins.group_size) {
        dyadic group{0, 0};
        for (size_t l = g0; l < std::min(k, g0 + ins.group_size); ++l) {
            const dyadic p = exact(x.a[l]) * exact(x.b[l]);  // align both to 2^-200 and add
            group.n += p.n << (p.p + 200);
        }
        group.p = -200;
        const term sa = split(std::fabs(x.scale_a[g0 / x.block]), scale_min);
        const term sb = split(std::fabs(x.scale_b[g0 / x.block]), scale_min);
        terms.push_back({group * sa.s * sb.s, sa.e + sb.e});
    }
    return fused_sum(terms, ins);
}

// One output of the instruction: D from C and k products (k <= depth),
// halves in sequence where the instruction has two.
inline float instruction_output(const operands& x, size_t k, float c, const instruction& ins) {
    if (ins.group_size > 0) return grouped_dot_add(x, k, c, ins);
    if (ins.halves == 1) return nv_fused_dot_add(x, 0, k, c, ins);
    const size_t half = static_cast<size_t>(ins.depth / 2);
    const float first = nv_fused_dot_add(x, 0, std::min(k, half), c, ins);
    return nv_fused_dot_add(x, half, std::max(k, half), first, ins);
}

}  // namespace acctest
