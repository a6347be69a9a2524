// The quantize.block_scales check (ABI 1.2): a call with block scales equals
// one call per block, for quantize, encode and decode; a bad block scale is
// refused.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "conformance/checks.hpp"
#include "util/error.hpp"

namespace altgrad::host::conformance {

namespace {

// Scales as block-scaling hosts make them: powers of two over a wide range
// (OCP MX) and general values (amax / max).
std::vector<float> kit_block_scales(size_t blocks) {
    std::vector<float> s;
    for (size_t b = 0; b < blocks; ++b)
        s.push_back(b % 3 == 2 ? 0.37f * static_cast<float>(b + 1)
                               : std::ldexp(1.0f, static_cast<int>(b % 23) - 11));
    return s;
}

const char* const kBlockScaleHint =
    "element i must use block_scales[i / block_size] in place of scale, and draw its random bits from (seed, "
    "offset + i): exactly one call per block";

// Quantize of `in` with block scales against one call per block (the
// definition in abi/format.h): values and summed counts.
std::optional<result> block_quantize_differs(env& e, const std::vector<float>& in,
                                             const std::vector<float>& scales, const float* guarded_scales,
                                             size_t block, altgrad_rounding r) {
    quantize_options o = mode(r);
    o.seed = e.opts.seed;
    o.offset = 5;
    std::vector<float> want;
    quantize_counts want_counts;
    for (size_t first = 0; first < in.size(); first += block) {
        quantize_options one = o;
        one.scale = scales[first / block];
        one.offset = o.offset + first;
        quantize_counts c;
        const std::vector<float> part = quantize(
            e, std::vector<float>(in.begin() + first, in.begin() + std::min(in.size(), first + block)), one,
            &c);
        want.insert(want.end(), part.begin(), part.end());
        want_counts.overflow += c.overflow;
        want_counts.underflow += c.underflow;
    }
    o.block_scales = guarded_scales;
    o.block_size = block;
    quantize_counts got_counts;
    const std::vector<float> got = quantize(e, in, o, &got_counts);
    for (size_t k = 0; k < in.size(); ++k)
        if (!same(got[k], want[k]))
            return fail("element " + std::to_string(k) + " (block " + std::to_string(k / block) + ", scale " +
                            hex_float(scales[k / block]) + ") gave " + hex_float(got[k]) +
                            "; as a call of its own the block gives " + hex_float(want[k]),
                        "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")", kBlockScaleHint);
    if (got_counts.overflow != want_counts.overflow || got_counts.underflow != want_counts.underflow)
        return fail("reported overflow " + std::to_string(got_counts.overflow) + ", underflow " +
                        std::to_string(got_counts.underflow) + "; the calls per block report " +
                        std::to_string(want_counts.overflow) + " and " +
                        std::to_string(want_counts.underflow),
                    mode_text(o), "the counts of a block-scaled call are the sums over its blocks");
    return std::nullopt;
}

// decode(encode(x)) with block scales against quantize with them.
std::optional<result> block_codes_differ(env& e, std::vector<float> in, const float* guarded_scales,
                                         size_t block) {
    if (e.format->info().nan_code_count == 0)
        std::replace_if(
            in.begin(), in.end(), [](float x) { return std::isnan(x); }, 0.5f);
    quantize_options o = mode(ALTGRAD_ROUND_NEAREST_EVEN);
    o.block_scales = guarded_scales;
    o.block_size = block;
    const std::vector<float> decoded = decode(e, encode(e, in, o), 1.0f, guarded_scales, block);
    const std::vector<float> quantized = quantize(e, in, o);
    for (size_t k = 0; k < in.size(); ++k)
        if (!same(decoded[k], quantized[k]))
            return fail("decode(encode(x)) with block scales gave " + hex_float(decoded[k]) + ", quantize " +
                            hex_float(quantized[k]),
                        "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                        "encode and decode take the block scales as quantize does");
    return std::nullopt;
}

// A block scale that is zero, negative, NaN or Inf (in the short last block) is refused.
std::optional<result> bad_block_scale_accepted(env& e) {
    for (float bad : {0.0f, -1.0f, NAN, INFINITY}) {
        guarded_array<float> scale_buffer(std::vector<float>{1.0f, 2.0f, bad}, "block_scales");
        scale_buffer.seal();
        quantize_options o = mode(ALTGRAD_ROUND_NEAREST_EVEN);
        o.block_scales = scale_buffer.data();
        o.block_size = 4;
        try {
            quantize(e, std::vector<float>(10, 1.0f), o);
        } catch (const error&) {
            continue;
        }
        return fail("a block scale of " + hex_float(bad) + " was accepted",
                    "10 elements in blocks of 4, scales 1, 2, " + hex_float(bad),
                    "every block scale must be finite and > 0 (ALTGRAD_STATUS_INVALID_ARGUMENT otherwise)");
    }
    return std::nullopt;
}

}  // namespace

// A block-scaled call must equal one call per block with its scale and
// offset (abi/format.h), for quantize, encode and decode; a bad block scale
// must be refused.
result check_block_scales(env& e) {
    e.drew_random = true;
    if (!e.format->takes_block_scales())
        return skip("ABI " + version_string(e.format->plugin().entry->abi_version, false) +
                    ", no ALTGRAD_FORMAT_CAPABILITY_BLOCK_SCALES: the host calls it once per block");
    // Grid and random probes, thinned to about 5000 (one call per block of 7
    // over a 16-bit format's full grid would take minutes).
    const std::vector<float> probes = all_probes(e, 3000);
    std::vector<float> in;
    const size_t stride = probes.size() / 5000 + 1;
    for (size_t k = 0; k < probes.size(); k += stride) in.push_back(probes[k]);
    for (size_t block : {size_t{32}, size_t{7}}) {  // 7 leaves a short last block
        const std::vector<float> scales = kit_block_scales((in.size() + block - 1) / block);
        guarded_array<float> scale_buffer(scales, "block_scales");
        scale_buffer.seal();
        for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC})
            if (e.format->info().rounding_modes & (1u << r))
                if (auto bad = block_quantize_differs(e, in, scales, scale_buffer.data(), block, r))
                    return *bad;
        if (auto bad = block_codes_differ(e, in, scale_buffer.data(), block)) return *bad;
    }
    if (auto bad = bad_block_scale_accepted(e)) return *bad;
    return pass(
        "calls with block scales (blocks of 32 and of 7, a short last block) equal one call per block; "
        "zero, negative, NaN and Inf block scales are refused");
}

}  // namespace altgrad::host::conformance
