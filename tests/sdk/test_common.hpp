// Shared checks: a plugin's quantize and encode against the reference model.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "plugin_host.hpp"
#include "reference.hpp"

namespace agtest {

inline std::string describe(const Mode& m) {
    std::ostringstream s;
    s << rounding_name(m.rounding) << "/" << overflow_name(m.overflow) << " scale=" << m.scale;
    if (m.rounding == ALTGRAD_ROUND_STOCHASTIC) s << " seed=" << m.seed << " offset=" << m.offset;
    if (m.rounding == ALTGRAD_ROUND_STOCHASTIC && m.random_bits != 0) s << " random_bits=" << m.random_bits;
    return s.str();
}

// What the reference says quantize must return for xs under mode m:
// q(fl32(x * s)) / s, with the random bits of element offset + i.
struct Expected {
    std::vector<float> out;
    std::vector<RefResult> ref;
    uint64_t overflow = 0, underflow = 0;
};

inline Expected reference_quantize(const FormatModel& model, const std::vector<float>& xs, const Mode& m) {
    Expected e;
    e.out.resize(xs.size());
    e.ref.resize(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
        // ABI 1.2's rule: element i takes its block's scale where block scales are given.
        const float s = m.block_scales != nullptr ? m.block_scales[i / m.block_size] : m.scale;
        const float scaled = s == 1.0f ? xs[i] : xs[i] * s;
        uint32_t random = m.rounding == ALTGRAD_ROUND_STOCHASTIC ? ref_random_bits(m.seed, m.offset + i) : 0u;
        // ABI 1.4's random_bits b in 1..31: only the top b bits count (the low 32 - b cleared).
        if (m.random_bits >= 1 && m.random_bits <= 31)
            random = random >> (32 - m.random_bits) << (32 - m.random_bits);
        const RefResult r = ref_quantize(model, scaled, m.rounding, m.overflow, random);
        e.ref[i] = r;
        e.out[i] = s == 1.0f ? r.value : r.value / s;
        e.overflow += r.overflow;
        e.underflow += r.underflow;
    }
    return e;
}

// The plugin's quantize of xs equals the reference bit for bit (any NaN for
// NaN), with the same overflow and underflow counts.
inline ::testing::AssertionResult quantize_matches_reference(const FormatPlugin& p, const FormatModel& model,
                                                             const std::vector<float>& xs, const Mode& m) {
    const QuantizeResult got = p.quantize(xs, m);
    if (got.status != ALTGRAD_STATUS_OK)
        return ::testing::AssertionFailure()
               << p.name() << " " << describe(m) << ": status " << got.status << " " << got.message;
    const Expected want = reference_quantize(model, xs, m);
    size_t bad = 0, ambiguous = 0;
    std::ostringstream msg;
    for (size_t i = 0; i < xs.size(); ++i) {
        if (want.ref[i].ambiguous) {
            ++ambiguous;  // a tie between two codes of the same parity: only a codebook can have one
            continue;
        }
        if (!same_float(want.out[i], got.out[i])) {
            if (bad < 10)
                msg << "\n  x=" << hexf(xs[i]) << " expected " << hexf(want.out[i]) << " got "
                    << hexf(got.out[i]);
            ++bad;
        }
    }
    if (ambiguous > 0 && model.beyond == Beyond::grid)
        return ::testing::AssertionFailure()
               << model.name << ": the reference met " << ambiguous << " ties between codes of equal parity";
    if (bad == 0 && got.overflow == want.overflow && got.underflow == want.underflow)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << p.name() << " " << describe(m) << ": " << bad << " of " << xs.size()
           << " values differ; overflow_count " << got.overflow << " (expected " << want.overflow
           << "), underflow_count " << got.underflow << " (expected " << want.underflow << ")" << msg.str();
}

// The four deterministic mode pairs and the two stochastic ones.
inline std::vector<Mode> all_modes(float scale = 1.0f, uint64_t seed = 0x5EED5EEDull, uint64_t offset = 977) {
    std::vector<Mode> modes;
    for (altgrad_rounding r :
         {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO, ALTGRAD_ROUND_STOCHASTIC})
        for (altgrad_overflow o : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            Mode m;
            m.rounding = r;
            m.overflow = o;
            m.scale = scale;
            m.seed = seed;
            m.offset = offset;
            modes.push_back(m);
        }
    return modes;
}

// Names the instantiations of a test suite parameterized by plugin name.
struct PluginNameGen {
    std::string operator()(const ::testing::TestParamInfo<std::string>& info) const { return info.param; }
};

}  // namespace agtest
