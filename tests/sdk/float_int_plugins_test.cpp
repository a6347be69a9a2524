// The bundled `float` and `int` plugins, loaded through the C ABI with
// parameters as the host passes them:
//  - with the right parameters `float` is every bundled ExMy plugin, bit for
//    bit: over more than 10^6 inputs per format (every code's value, every
//    midpoint and the floats beside it, the edges at max and at the subnormal
//    boundary, NaN and Inf, random in-range values and random bit patterns),
//    each rounding mode (stochastic with one seed and offset) and overflow
//    mode, scales 1, 0.25 and 3: the outputs, the overflow and underflow
//    counts, the codes of encode and the values of decode are the same;
//    `int` with bits=8 symmetric=false fraction_bits=7 is e0m7 likewise;
//  - values worked out by hand or published (ml_dtypes, OCP MX);
//  - what create refuses, with its message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "plugin_host.hpp"
#include "reference.hpp"
#include "test_common.hpp"

namespace {

using agtest::FormatPlugin;
using agtest::Mode;
using agtest::Param;

std::vector<Param> float_params(int e, int m, int bias, const std::string& specials, bool subnormals = true,
                                bool has_sign = true) {
    return {Param::integer("exponent_bits", e), Param::integer("mantissa_bits", m),
            Param::integer("bias", bias),       Param::boolean("subnormals", subnormals),
            Param::text("specials", specials),  Param::boolean("signed", has_sign)};
}

std::vector<Param> int_params(int bits, bool symmetric, int fraction_bits = 0) {
    return {Param::integer("bits", bits), Param::boolean("symmetric", symmetric),
            Param::integer("fraction_bits", fraction_bits)};
}

const FormatPlugin& float_plugin(const std::vector<Param>& params) { return agtest::plugin("float", params); }
const FormatPlugin& int_plugin(const std::vector<Param>& params) { return agtest::plugin("int", params); }

// Each bundled ExMy plugin and the parameters that make `float` it, from the
// published definitions (OCP FP8 and MX, IEEE 754, ml_dtypes, P3109).
struct Twin {
    const char* bundled;
    std::vector<Param> params;
};

void PrintTo(const Twin& t, std::ostream* os) {
    *os << t.bundled << " = float " << agtest::params_text(t.params);
}

const std::vector<Twin>& float_twins() {
    static const std::vector<Twin> twins = {
        {"e5m2", float_params(5, 2, 15, "ieee")},    {"e4m3", float_params(4, 3, 7, "fn")},
        {"e3m4", float_params(3, 4, 3, "ieee")},     {"e1m6", float_params(1, 6, 1, "p3109")},
        {"e7m0", float_params(7, 0, 64, "p3109")},   {"bf16", float_params(8, 7, 127, "ieee")},
        {"fp16", float_params(5, 10, 15, "ieee")},   {"fp32", float_params(8, 23, 127, "ieee")},
        {"fp4_e2m1", float_params(2, 1, 1, "none")}, {"fp6_e2m3", float_params(2, 3, 1, "none")},
        {"fp6_e3m2", float_params(3, 2, 3, "none")},
    };
    return twins;
}

void add(std::vector<float>& xs, double v) {
    if (!(std::fabs(v) <= FLT_MAX) || static_cast<double>(static_cast<float>(v)) != v) return;
    const float f = static_cast<float>(v);
    for (float x : {f, std::nextafter(f, INFINITY), std::nextafter(f, -INFINITY)}) {
        xs.push_back(x);
        xs.push_back(-x);
    }
}

// At least 2^20 inputs for a format: the edges (see the file's head), then
// random ones, a quarter of them uniform bit patterns (anything, NaN
// included), the rest log-uniform from a sixteenth of the smallest value to
// four times max, either sign.
std::vector<float> twin_inputs(const FormatPlugin& p) {
    const altgrad_format_info& i = p.info();
    std::vector<float> xs;
    if (i.total_bits <= 16) {
        std::vector<uint32_t> codes(size_t{1} << i.total_bits);
        for (uint32_t c = 0; c < codes.size(); ++c) codes[c] = c;
        std::vector<double> values;
        for (float v : p.decode(codes).out)
            if (std::isfinite(v)) values.push_back(v);
        std::sort(values.begin(), values.end());
        for (size_t k = 0; k < values.size(); ++k) {
            add(xs, values[k]);
            if (k + 1 < values.size()) add(xs, (values[k] + values[k + 1]) / 2);
        }
    }
    const double max = i.max_finite, smallest = i.min_subnormal > 0 ? i.min_subnormal : i.min_normal;
    const double top_step = std::ldexp(1.0, std::ilogb(max) - static_cast<int>(i.mantissa_bits));
    for (double v : {max, max + top_step / 2, max + top_step, 2 * max, static_cast<double>(FLT_MAX), smallest,
                     smallest / 2, smallest / 4, smallest * 0.75, i.min_normal, i.min_normal / 2,
                     i.min_normal - smallest / 2, static_cast<double>(FLT_MIN)})
        add(xs, v);
    const float inf = std::numeric_limits<float>::infinity();
    for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                    -std::numeric_limits<float>::quiet_NaN(), agtest::bfloat(0x7F800001u),
                    std::numeric_limits<float>::denorm_min()})
        xs.push_back(v);
    std::mt19937_64 rng(20261121);
    const double lo = std::log2(smallest / 16),
                 hi = std::log2(std::min(4 * max, static_cast<double>(FLT_MAX)));
    std::uniform_real_distribution<double> exponent(lo, hi);
    const size_t n = std::max<size_t>(size_t{1} << 20, xs.size() + (size_t{1} << 18));
    while (xs.size() < n) {
        const uint64_t r = rng();
        if (r % 4 == 0) xs.push_back(agtest::bfloat(static_cast<uint32_t>(r >> 32)));
        else xs.push_back(static_cast<float>((r & 2) ? -std::exp2(exponent(rng)) : std::exp2(exponent(rng))));
    }
    return xs;
}

// The first index where a and b differ bit for bit, or a.size().
size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t k = 0; k < a.size(); ++k)
        if (agtest::fbits(a[k]) != agtest::fbits(b[k])) return k;
    return a.size();
}
size_t first_difference(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
    for (size_t k = 0; k < a.size(); ++k)
        if (a[k] != b[k]) return k;
    return a.size();
}

// `twin` quantizes, encodes and decodes exactly as `bundled`.
void expect_same_format(const FormatPlugin& bundled, const FormatPlugin& twin) {
    ASSERT_EQ(bundled.info().total_bits, twin.info().total_bits);
    const std::vector<float> xs = twin_inputs(bundled);
    ASSERT_GE(xs.size(), size_t{1000000});
    for (float scale : {1.0f, 0.25f, 3.0f})
        for (const Mode& m : agtest::all_modes(scale, 0x5EED0F10A7ull, (uint64_t{1} << 32) + 5)) {
            SCOPED_TRACE(agtest::describe(m));
            const agtest::QuantizeResult a = bundled.quantize(xs, m), b = twin.quantize(xs, m);
            ASSERT_EQ(a.status, ALTGRAD_STATUS_OK) << a.message;
            ASSERT_EQ(b.status, ALTGRAD_STATUS_OK) << b.message;
            const size_t k = first_difference(a.out, b.out);
            ASSERT_EQ(k, xs.size()) << "x = " << agtest::hexf(xs[k]) << ": " << agtest::hexf(a.out[k])
                                    << " vs " << agtest::hexf(b.out[k]);
            EXPECT_EQ(a.overflow, b.overflow);
            EXPECT_EQ(a.underflow, b.underflow);
            const agtest::EncodeResult ea = bundled.encode(xs, m), eb = twin.encode(xs, m);
            ASSERT_EQ(ea.status, eb.status) << ea.message << " / " << eb.message;
            const size_t c = first_difference(ea.codes, eb.codes);
            ASSERT_EQ(c, xs.size()) << "x = " << agtest::hexf(xs[c]) << ": code " << ea.codes[c] << " vs "
                                    << eb.codes[c];
            EXPECT_EQ(ea.overflow, eb.overflow);
            EXPECT_EQ(ea.underflow, eb.underflow);
        }
    // Decode: every code (formats of at most 16 bits), else 2^20 random ones.
    std::vector<uint32_t> codes;
    std::mt19937_64 rng(7);
    const uint32_t bits = bundled.info().total_bits;
    for (uint64_t c = 0; c < (uint64_t{1} << std::min(bits, 20u)); ++c)
        codes.push_back(bits <= 20 ? static_cast<uint32_t>(c) : static_cast<uint32_t>(rng() >> (64 - bits)));
    for (float scale : {1.0f, 3.0f}) {
        const agtest::DecodeResult a = bundled.decode(codes, scale), b = twin.decode(codes, scale);
        ASSERT_EQ(a.status, ALTGRAD_STATUS_OK) << a.message;
        const size_t k = first_difference(a.out, b.out);
        ASSERT_EQ(k, codes.size()) << "code " << codes[k];
    }
}

class FloatIsEveryBundledExMy : public ::testing::TestWithParam<Twin> {};

TEST_P(FloatIsEveryBundledExMy, BitForBit) {
    const Twin& t = GetParam();
    expect_same_format(agtest::plugin(t.bundled), float_plugin(t.params));
}

INSTANTIATE_TEST_SUITE_P(Twins, FloatIsEveryBundledExMy, ::testing::ValuesIn(float_twins()),
                         [](const ::testing::TestParamInfo<Twin>& info) {
                             return std::string(info.param.bundled);
                         });

// e0m7 is two's-complement fixed point (Q0.7: k/128, k = -128..127), which no
// sign-magnitude float is (its range is not symmetric), but int is.
TEST(IntIsE0M7, BitForBit) {
    expect_same_format(agtest::plugin("e0m7"), int_plugin(int_params(8, false, 7)));
}

// The standard bias (bias = 128, the manifest's default): 2^(E-1) - 1, and
// 2^(E-1) for fnuz and p3109. So E5M2 is OCP E5M2 (15), E4M3 fn OCP E4M3FN
// (7), E4M3 fnuz ml_dtypes' float8_e4m3fnuz (8), E1M6 and E7M0 p3109 P3109's
// binary8p7 and binary8p1 (1 and 64), E8M7 bfloat16 (127).
TEST(FloatPlugin, StandardBias) {
    const struct {
        int e, m;
        const char* specials;
        int32_t bias;
    } cases[] = {{5, 2, "ieee", 15}, {4, 3, "fn", 7},     {4, 3, "fnuz", 8},   {5, 2, "fnuz", 16},
                 {1, 6, "p3109", 1}, {7, 0, "p3109", 64}, {8, 7, "ieee", 127}, {2, 1, "none", 1}};
    for (const auto& c : cases) {
        const altgrad_format_info& i = float_plugin(float_params(c.e, c.m, 128, c.specials)).info();
        EXPECT_EQ(i.bias, c.bias) << "E" << c.e << "M" << c.m << " " << c.specials;
    }
}

// ml_dtypes' finfo of float8_e4m3fnuz and float8_e5m2fnuz: max 240 and
// 57344, smallest normal 2^-7 and 2^-15, smallest subnormal 2^-10 and 2^-17,
// NaN 0x80, no Inf.
TEST(FloatPlugin, FnuzIsMlDtypes) {
    const altgrad_format_info& e4 = float_plugin(float_params(4, 3, 128, "fnuz")).info();
    EXPECT_EQ(e4.max_finite, 240.0);
    EXPECT_EQ(e4.min_normal, std::ldexp(1.0, -7));
    EXPECT_EQ(e4.min_subnormal, std::ldexp(1.0, -10));
    EXPECT_EQ(e4.canonical_nan_code, 0x80u);
    EXPECT_EQ(e4.has_inf, 0u);
    const altgrad_format_info& e5 = float_plugin(float_params(5, 2, 128, "fnuz")).info();
    EXPECT_EQ(e5.max_finite, 57344.0);
    EXPECT_EQ(e5.min_normal, std::ldexp(1.0, -15));
    EXPECT_EQ(e5.min_subnormal, std::ldexp(1.0, -17));
}

// E8M13 (IEEE specials, bias 127): 22 bits; max (2 - 2^-13) * 2^127 =
// 2^128 - 2^114, smallest normal 2^-126, smallest subnormal 2^-126 * 2^-13.
TEST(FloatPlugin, E8M13Extremes) {
    const FormatPlugin& f = float_plugin(float_params(8, 13, 128, "ieee"));
    EXPECT_EQ(f.info().total_bits, 22u);
    EXPECT_EQ(f.info().code_bytes, 4u);
    EXPECT_EQ(f.info().max_finite, std::ldexp(1.0, 128) - std::ldexp(1.0, 114));
    EXPECT_EQ(f.info().min_normal, std::ldexp(1.0, -126));
    EXPECT_EQ(f.info().min_subnormal, std::ldexp(1.0, -139));
    // 1 + 2^-14 is the tie between 1 (even) and 1 + 2^-13; 1 + 3 * 2^-14 the
    // tie between 1 + 2^-13 (odd) and 1 + 2^-12.
    EXPECT_EQ(f.quantize_one(1.0f + std::ldexp(1.0f, -14)), 1.0f);
    EXPECT_EQ(f.quantize_one(1.0f + std::ldexp(3.0f, -14)), 1.0f + std::ldexp(1.0f, -12));
    // FLT_MAX = (2 - 2^-23) * 2^127 lies past max by more than half a step:
    // an overflow, saturated to max.
    uint64_t over = 0;
    EXPECT_EQ(f.quantize_one(FLT_MAX, Mode{}, &over), std::ldexp(2.0f - std::ldexp(1.0f, -13), 127));
    EXPECT_EQ(over, 1u);
}

// E2M5 (IEEE specials, bias 1): exponent 3 is Inf and NaN, so max is
// (2 - 2^-5) * 2^(2-1) = 3.9375, the smallest normal 2^0 = 1 and the smallest
// subnormal 2^-5 = 0.03125; 1 + 1/64 is the tie between 1 (code 0x20, even)
// and 1 + 1/32.
TEST(FloatPlugin, E2M5Values) {
    const FormatPlugin& f = float_plugin(float_params(2, 5, 128, "ieee"));
    EXPECT_EQ(f.info().max_finite, 3.9375);
    EXPECT_EQ(f.info().min_normal, 1.0);
    EXPECT_EQ(f.info().min_subnormal, 0.03125);
    EXPECT_EQ(f.info().total_bits, 8u);
    EXPECT_EQ(f.quantize_one(1.0f + 1.0f / 64), 1.0f);
    EXPECT_EQ(f.quantize_one(1.0f + 3.0f / 64), 1.0f + 2.0f / 32);  // tie: 1 + 2/32 is code 0x22
    EXPECT_EQ(f.decode({0x60}).out[0], INFINITY);
    EXPECT_EQ(f.decode({0x5F}).out[0], 3.9375f);
}

// Unsigned E4M4 (bias 7): ieee max 2^7 * (1 + 15/16) = 248, fn 2^8 * (1 +
// 14/16) = 480, none 2^8 * (1 + 15/16) = 496; 8 bits, lowest 0.
TEST(FloatPlugin, UnsignedE4M4Maxima) {
    const double maxima[] = {248.0, 480.0, 496.0};
    const char* specials[] = {"ieee", "fn", "none"};
    for (int k = 0; k < 3; ++k) {
        const FormatPlugin& f = float_plugin(float_params(4, 4, 128, specials[k], true, false));
        EXPECT_EQ(f.info().max_finite, maxima[k]) << specials[k];
        EXPECT_EQ(f.info().lowest_finite, 0.0) << specials[k];
        EXPECT_EQ(f.info().total_bits, 8u) << specials[k];
        EXPECT_EQ(f.info().is_signed, 0u) << specials[k];
        EXPECT_EQ(f.quantize_one(1e6f), static_cast<float>(maxima[k])) << specials[k];
    }
}

// INT4, symmetric: codes 0..7 are 0..7, 9..15 are -7..-1, 8 is NaN. 6.5 is
// the tie between 6 (even) and 7; 7.5 the tie between 7 (odd) and the
// notional 8: it rounds to 8, an overflow, saturated to 7.
TEST(IntPlugin, Int4SymmetricValues) {
    const FormatPlugin& f = int_plugin(int_params(4, true));
    std::vector<uint32_t> codes;
    for (uint32_t c = 0; c < 16; ++c) codes.push_back(c);
    const std::vector<float> v = f.decode(codes).out;
    for (uint32_t c = 0; c < 8; ++c) EXPECT_EQ(v[c], static_cast<float>(c));
    EXPECT_TRUE(std::isnan(v[8]));
    for (uint32_t c = 9; c < 16; ++c) EXPECT_EQ(v[c], static_cast<float>(static_cast<int>(c) - 16));
    EXPECT_EQ(f.info().max_finite, 7.0);
    EXPECT_EQ(f.info().lowest_finite, -7.0);
    uint64_t over = 0, under = 0;
    EXPECT_EQ(f.quantize_one(6.5f), 6.0f);
    EXPECT_EQ(f.quantize_one(-3.5f), -4.0f);
    EXPECT_EQ(f.quantize_one(7.5f, Mode{}, &over), 7.0f);
    EXPECT_EQ(over, 1u);
    EXPECT_EQ(f.quantize_one(7.4f, Mode{}, &over), 7.0f);
    EXPECT_EQ(over, 0u);
    EXPECT_EQ(f.quantize_one(-100.0f), -7.0f);
    EXPECT_EQ(f.quantize_one(0.5f, Mode{}, nullptr, &under), 0.0f);
    EXPECT_EQ(under, 1u);
    Mode nonfinite;
    nonfinite.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    EXPECT_TRUE(std::isnan(f.quantize_one(-7.6f, nonfinite)));  // it has a NaN: overflow goes there
    EXPECT_EQ(f.encode({NAN, -7.0f, 7.0f}).codes, (std::vector<uint32_t>{8, 9, 7}));
}

// INT4 in full: -8..7, code 8 is -8; -8.5 is the tie between -8 (even) and
// the notional -9, so it stays -8.
TEST(IntPlugin, Int4FullRangeValues) {
    const FormatPlugin& f = int_plugin(int_params(4, false));
    EXPECT_EQ(f.decode({8}).out[0], -8.0f);
    EXPECT_EQ(f.info().lowest_finite, -8.0);
    EXPECT_EQ(f.info().nan_code_count, 0u);
    uint64_t over = 0;
    EXPECT_EQ(f.quantize_one(-8.5f, Mode{}, &over), -8.0f);
    EXPECT_EQ(over, 0u);
    EXPECT_EQ(f.encode({NAN}).status, ALTGRAD_STATUS_NOT_REPRESENTABLE);
}

// OCP MX v1.0's INT8 element: two's complement with an implicit scale 2^-6,
// so max 1 + 63/64 = 127/64, min -2 (code 0x80), step 1/64 (as Graphcore's
// gfloat has it: format_info_ocp_int8).
TEST(IntPlugin, MxInt8) {
    const FormatPlugin& f = int_plugin(int_params(8, false, 6));
    EXPECT_EQ(f.info().max_finite, 127.0 / 64);
    EXPECT_EQ(f.info().lowest_finite, -2.0);
    EXPECT_EQ(f.info().min_normal, 1.0 / 64);
    EXPECT_EQ(f.decode({0x80, 0xFF, 0x01, 0x7F}).out,
              (std::vector<float>{-2.0f, -1.0f / 64, 1.0f / 64, 127.0f / 64}));
    EXPECT_EQ(f.quantize_one(1.0f / 128), 0.0f);  // the tie between 0 (even) and 1/64
    EXPECT_EQ(f.quantize_one(3.0f / 128), 2.0f / 64);
}

// What create refuses, and the message (the host prints it after "plugin
// 'float': create failed (invalid argument): ").
std::string refusal(const char* name, const std::vector<Param>& params) {
    const FormatPlugin& p = agtest::plugin(
        name, name == std::string("float") ? float_params(5, 2, 15, "ieee") : int_params(8, true));
    altgrad_format* f = nullptr;
    altgrad_error err = agtest::blank_error();
    const altgrad_status st = p.create_raw(params, &f, &err);
    if (st == ALTGRAD_STATUS_OK) {
        p.vtable()->destroy(f);
        return "created";
    }
    EXPECT_EQ(st, ALTGRAD_STATUS_INVALID_ARGUMENT);
    return err.message;
}

TEST(FloatPlugin, CreateRefusesWhatIsNoFloat32Format) {
    EXPECT_EQ(refusal("float", float_params(4, 3, 128, "fnuz", true, false)),
              "specials=fnuz needs signed=true: fnuz's NaN is the code of -0, which has a sign bit");
    EXPECT_EQ(
        refusal("float", float_params(5, 0, 128, "ieee")),
        "specials=ieee needs mantissa_bits >= 1: its NaNs are the top exponent with a non-zero mantissa");
    // E1 with IEEE specials: field 1 is Inf and NaN, and nothing is normal.
    EXPECT_EQ(refusal("float", float_params(1, 3, 128, "ieee")),
              "no normal number: every exponent field above 0 holds special values only (exponent_bits=1 "
              "mantissa_bits=3 bias=0 (standard) subnormals=true specials=ieee signed=true)");
    // Without subnormals field 0's binade is 2^-bias, below float32's normals for bias 127.
    EXPECT_EQ(
        refusal("float", float_params(4, 3, 127, "fn", false)),
        "bias 127 puts the smallest value below float32's normals (without subnormals, exponent field 0 "
        "is 2^-bias * 1.m) (exponent_bits=4 mantissa_bits=3 bias=127 subnormals=false specials=fn "
        "signed=true)");
    // Subnormals of E4M3 with bias 126 would reach 2^-128: below float32's normals.
    EXPECT_EQ(refusal("float", float_params(4, 3, 126, "fn")),
              "subnormals of this format lie below float32's normal range (exponent_bits=4 mantissa_bits=3 "
              "bias=126 subnormals=true specials=fn signed=true)");
    // E8M7 with bias 0: 2^254 is beyond float32.
    EXPECT_EQ(refusal("float", float_params(8, 7, 0, "ieee")),
              "max finite exceeds float32's range (exponent_bits=8 mantissa_bits=7 bias=0 subnormals=true "
              "specials=ieee signed=true)");
    // Past the manifest's ranges (which the host checks first).
    EXPECT_EQ(refusal("float", float_params(4, 40, 128, "ieee")),
              "parameter 'mantissa_bits': 40 is not 0..23");
    EXPECT_EQ(refusal("float", float_params(4, 3, 128, "posit")),
              "parameter 'specials': \"posit\" is none of ieee, fn, fnuz, none, p3109");
    EXPECT_EQ(refusal("int", int_params(17, true)), "parameter 'bits': 17 is not 2..16");
}

}  // namespace
