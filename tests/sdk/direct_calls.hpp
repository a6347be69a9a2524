// The SDK's format helpers called directly, not through a plugin: each
// templated element function with run-time modes, and the check that a
// helper's quantize_bits, encode_bits (and branch-free kernel, where it has one
// that applies) agree with a reference model (reference.hpp). Shared by
// sdk_helpers_test.cpp and exmy_variants_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/rounding.hpp>

#include "test_common.hpp"

namespace agtest {

namespace sdk = altgrad::sdk;

constexpr altgrad_rounding RNE = ALTGRAD_ROUND_NEAREST_EVEN;
constexpr altgrad_rounding RSR = ALTGRAD_ROUND_STOCHASTIC;
constexpr altgrad_rounding RTZ = ALTGRAD_ROUND_TOWARD_ZERO;
constexpr altgrad_overflow SAT = ALTGRAD_OVERFLOW_SATURATE;
constexpr altgrad_overflow NONFINITE = ALTGRAD_OVERFLOW_NONFINITE;
inline const float kInf = std::numeric_limits<float>::infinity();
inline const float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------
// Calling a helper's templated element functions with run-time modes.
// ---------------------------------------------------------------------------
template <altgrad_rounding R, altgrad_overflow O, class F>
uint32_t q_bits(const F& f, uint32_t bits, uint32_t random, sdk::element_counts& c) {
    return f.template quantize_bits<R, O>(bits, random, c);
}

template <class F>
float direct_quantize(const F& f, float x, altgrad_rounding r, altgrad_overflow o, uint32_t random,
                      sdk::element_counts& c) {
    const uint32_t b = fbits(x);
    const bool sat = o == SAT;
    switch (r) {
        case RNE:
            return bfloat(sat ? q_bits<RNE, SAT>(f, b, random, c) : q_bits<RNE, NONFINITE>(f, b, random, c));
        case RSR:
            return bfloat(sat ? q_bits<RSR, SAT>(f, b, random, c) : q_bits<RSR, NONFINITE>(f, b, random, c));
        case RTZ:
            return bfloat(sat ? q_bits<RTZ, SAT>(f, b, random, c) : q_bits<RTZ, NONFINITE>(f, b, random, c));
    }
    return kNaN;
}

template <altgrad_rounding R, altgrad_overflow O, class F>
uint32_t e_bits(const F& f, uint32_t bits, uint32_t random, sdk::element_counts& c, bool& bad) {
    return f.template encode_bits<R, O>(bits, random, c, bad);
}

template <class F>
uint32_t direct_encode(const F& f, float x, altgrad_rounding r, altgrad_overflow o, uint32_t random,
                       sdk::element_counts& c, bool& bad) {
    const uint32_t b = fbits(x);
    const bool sat = o == SAT;
    switch (r) {
        case RNE:
            return sat ? e_bits<RNE, SAT>(f, b, random, c, bad)
                       : e_bits<RNE, NONFINITE>(f, b, random, c, bad);
        case RSR:
            return sat ? e_bits<RSR, SAT>(f, b, random, c, bad)
                       : e_bits<RSR, NONFINITE>(f, b, random, c, bad);
        case RTZ:
            return sat ? e_bits<RTZ, SAT>(f, b, random, c, bad)
                       : e_bits<RTZ, NONFINITE>(f, b, random, c, bad);
    }
    return 0;
}

// A helper may also carry a branch-free twin of quantize_bits for the
// adapter's vectorized loop (exmy_format's quantize_bits_branchless); when it
// does, that kernel is held to the same reference.
template <class F, class = void>
struct has_branchless : std::false_type {};
template <class F>
struct has_branchless<
    F, std::void_t<decltype(std::declval<const F&>().template quantize_bits_branchless<RNE, SAT>(
           uint32_t{}, uint32_t{}, std::declval<sdk::element_counts&>()))>> : std::true_type {};

// (exmy_format's applies only with a sign bit and subnormals: branchless_applies.)
template <altgrad_rounding R, altgrad_overflow O, class F>
uint32_t qb_bits(const F& f, uint32_t bits, uint32_t random, sdk::element_counts& c) {
    if constexpr (has_branchless<F>::value) {
        if (f.branchless_applies()) return f.template quantize_bits_branchless<R, O>(bits, random, c);
    }
    return f.template quantize_bits<R, O>(bits, random, c);
}

template <class F>
float direct_quantize_branchless(const F& f, float x, altgrad_rounding r, altgrad_overflow o, uint32_t random,
                                 sdk::element_counts& c) {
    const uint32_t b = fbits(x);
    const bool sat = o == SAT;
    switch (r) {
        case RNE:
            return bfloat(sat ? qb_bits<RNE, SAT>(f, b, random, c)
                              : qb_bits<RNE, NONFINITE>(f, b, random, c));
        case RSR:
            return bfloat(sat ? qb_bits<RSR, SAT>(f, b, random, c)
                              : qb_bits<RSR, NONFINITE>(f, b, random, c));
        case RTZ:
            return bfloat(sat ? qb_bits<RTZ, SAT>(f, b, random, c)
                              : qb_bits<RTZ, NONFINITE>(f, b, random, c));
    }
    return kNaN;
}

// quantize_bits and encode_bits of helper f agree with the reference on xs
// (element i draws the random bits of (seed, offset + i)); decode of the code
// equals the quantized value; NaN into a format without NaN sets the
// unrepresentable flag of encode.
template <class F>
::testing::AssertionResult helper_matches_reference(const F& f, const FormatModel& m,
                                                    const std::vector<float>& xs, const Mode& mode) {
    sdk::element_counts qc, ec, bc;
    size_t bad = 0;
    uint64_t want_over = 0, want_under = 0;
    std::ostringstream msg;
    for (size_t i = 0; i < xs.size(); ++i) {
        const uint32_t random = mode.rounding == RSR ? ref_random_bits(mode.seed, mode.offset + i) : 0u;
        const RefResult want = ref_quantize(m, xs[i], mode.rounding, mode.overflow, random);
        if (want.ambiguous) continue;
        want_over += want.overflow;
        want_under += want.underflow;
        const float got = direct_quantize(f, xs[i], mode.rounding, mode.overflow, random, qc);
        bool unrepresentable = false;
        const uint32_t code =
            direct_encode(f, xs[i], mode.rounding, mode.overflow, random, ec, unrepresentable);
        const float got_b = direct_quantize_branchless(f, xs[i], mode.rounding, mode.overflow, random, bc);
        bool ok = same_float(got, want.value) && same_float(got_b, want.value);
        if (want.code >= 0)
            ok = ok && code == static_cast<uint32_t>(want.code) && same_float(f.decode(code), want.value);
        else if (m.has_nan) ok = ok && std::isnan(m.by_code.at(code)) && !unrepresentable;
        else ok = ok && unrepresentable;
        if (!ok && ++bad <= 10)
            msg << "\n  x=" << hexf(xs[i]) << " expected " << hexf(want.value) << " code " << want.code
                << ", got " << hexf(got) << " code " << code << (unrepresentable ? " (unrepresentable)" : "")
                << (has_branchless<F>::value ? ", branch-free kernel " + hexf(got_b) : std::string());
    }
    if (bad == 0 && qc.overflow == want_over && qc.underflow == want_under && ec.overflow == want_over &&
        ec.underflow == want_under && bc.overflow == want_over && bc.underflow == want_under)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << m.name << " " << describe(mode) << ": " << bad << " values differ; "
           << "overflow " << qc.overflow << "/" << ec.overflow << "/" << bc.overflow << " (expected "
           << want_over << "), underflow " << qc.underflow << "/" << ec.underflow << "/" << bc.underflow
           << " (expected " << want_under << ")" << msg.str();
}

template <class F>
void expect_matches_everywhere(const F& f, const FormatModel& m, size_t edge_stride = 1) {
    std::vector<float> xs;
    const std::vector<float> edges = edge_points(m);
    for (size_t i = 0; i < edges.size(); i += edge_stride) xs.push_back(edges[i]);
    const std::vector<float> r = random_points(m, 50000, 77);
    xs.insert(xs.end(), r.begin(), r.end());
    for (const Mode& mode : all_modes(1.0f, 0xFEEDull, 31))
        EXPECT_TRUE(helper_matches_reference(f, m, xs, mode));
}

template <class Fn>
void expect_invalid_argument(Fn&& fn, const char* what) {
    try {
        fn();
        ADD_FAILURE() << what << ": no exception";
    } catch (const sdk::plugin_error& e) {
        EXPECT_EQ(e.status(), ALTGRAD_STATUS_INVALID_ARGUMENT) << what;
        EXPECT_NE(std::string(e.what()), "") << what;
    } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": threw something other than plugin_error: " << e.what();
    }
}

struct CodeResult {
    float value;
    uint32_t code;
    uint64_t overflow, underflow;
    bool unrepresentable;
};

template <class F>
CodeResult run(const F& f, float x, altgrad_rounding r = RNE, altgrad_overflow o = SAT, uint32_t random = 0) {
    sdk::element_counts qc, ec;
    CodeResult out{};
    out.value = direct_quantize(f, x, r, o, random, qc);
    out.code = direct_encode(f, x, r, o, random, ec, out.unrepresentable);
    out.overflow = qc.overflow;
    out.underflow = qc.underflow;
    EXPECT_EQ(qc.overflow, ec.overflow);
    EXPECT_EQ(qc.underflow, ec.underflow);
    return out;
}

}  // namespace agtest
