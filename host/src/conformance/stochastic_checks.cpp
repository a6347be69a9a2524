// The stochastic.* checks: stochastic rounding picks one of the two
// neighbours, without bias, reproducibly from (seed, offset + i), whatever
// the chunking of the call; with b random bits (ABI 1.4), at the biased rate
// floor(f * 2^b) / 2^b.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "conformance/checks.hpp"

namespace altgrad::host::conformance {

namespace {

bool has_stochastic(const env& e) {
    return (e.format->info().rounding_modes & (1u << ALTGRAD_ROUND_STOCHASTIC)) != 0;
}

}  // namespace

result check_sr_neighbours(env& e) {
    e.drew_random = true;
    if (!has_stochastic(e)) return skip("the format does not implement stochastic rounding");
    if (!e.table) return needs_table(e);
    std::vector<float> in;
    for (float x : all_probes(e))
        if (x <= e.table->max() && x >= e.table->lowest()) in.push_back(x);
    quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
    o.seed = e.opts.seed;
    const std::vector<float> out = quantize(e, in, o);
    for (size_t k = 0; k < in.size(); ++k) {
        const auto n = e.table->neighbours(in[k]);
        if (!(out[k] == n->first.value || out[k] == n->second.value))
            return fail("got " + hex_float(out[k]) + ", not one of the neighbours " +
                            hex_float(n->first.value) + " and " + hex_float(n->second.value),
                        "x = " + hex_float(in[k]) + " (stochastic, seed " + std::to_string(o.seed) +
                            ", offset " + std::to_string(k) + ")",
                        "stochastic rounding picks one of the two neighbouring values");
    }
    return pass(std::to_string(in.size()) + " inputs each went to one of their two neighbours");
}

result check_sr_unbiased(env& e) {
    e.drew_random = true;
    if (!has_stochastic(e)) return skip("the format does not implement stochastic rounding");
    if (!e.table) return needs_table(e);
    const auto& f = e.table->finite();
    // Intervals: the first positive one (subnormal range), one near 1 (or
    // the middle), and the last below max.
    std::vector<size_t> starts;
    for (size_t k = 0; k + 1 < f.size(); ++k)
        if (f[k].value >= 0) {
            starts.push_back(k);
            break;
        }
    size_t near_one = 0;
    for (size_t k = 0; k + 1 < f.size(); ++k)
        if (f[k].value <= 1.0f) near_one = k;
    starts.push_back(near_one);
    starts.push_back(f.size() - 2);
    const size_t draws = 20000;
    for (size_t k : starts) {
        const double lo = f[k].value, hi = f[k + 1].value;
        for (double frac : {0.125, 1.0 / 3, 0.5, 0.9}) {
            const float x = static_cast<float>(lo + frac * (hi - lo));
            const double p = (static_cast<double>(x) - lo) / (hi - lo);
            if (p <= 0 || p >= 1) continue;
            quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
            o.seed = e.opts.seed + k;
            const std::vector<float> out = quantize(e, std::vector<float>(draws, x), o);
            double sum = 0;
            for (float y : out) sum += y;
            const double mean = sum / draws;
            const double bound = 5 * (hi - lo) * std::sqrt(p * (1 - p) / draws);
            if (std::fabs(mean - x) > bound)
                return fail(
                    "mean of " + std::to_string(draws) + " draws is " + hex_float(mean) + ", " +
                        std::to_string((mean - x) / (hi - lo)) + " steps from x; the 5-sigma bound is " +
                        std::to_string(bound / (hi - lo)) + " steps",
                    "x = " + hex_float(x) + " between " + hex_float(lo) + " and " + hex_float(hi) +
                        " (seed " + std::to_string(o.seed) + ")",
                    "round away from zero with probability equal to the distance from the lower neighbour "
                    "divided by the gap");
        }
    }
    return pass("the mean error at 4 points in each of " + std::to_string(starts.size()) +
                " intervals is within 5 sigma of zero (20000 draws each)");
}

result check_sr_reproducible(env& e) {
    e.drew_random = true;
    if (!has_stochastic(e)) return skip("the format does not implement stochastic rounding");
    // Only inputs that are not representable leave the generator a choice.
    std::vector<float> in;
    {
        const std::vector<float> probes = random_probes(e, 20000);
        const std::vector<float> nearest = quantize(e, probes, mode(ALTGRAD_ROUND_NEAREST_EVEN));
        for (size_t k = 0; k < probes.size() && in.size() < 4096; ++k)
            if (!same(nearest[k], probes[k]) && std::isfinite(nearest[k])) in.push_back(probes[k]);
    }
    if (in.size() < 64) return skip("almost every input is representable: nothing for rounding to choose");
    quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
    o.seed = e.opts.seed;
    o.offset = 12345;
    const std::vector<float> a = quantize(e, in, o), b = quantize(e, in, o);
    for (size_t k = 0; k < in.size(); ++k)
        if (!same(a[k], b[k]))
            return fail("two calls with the same seed and offset differ: " + hex_float(a[k]) + " vs " +
                            hex_float(b[k]),
                        "x = " + hex_float(in[k]) + " (seed " + std::to_string(o.seed) + ", offset " +
                            std::to_string(o.offset + k) + ")",
                        "draw the random bits from (seed, offset + i) only");
    o.seed += 1;
    const std::vector<float> c = quantize(e, in, o);
    if (std::equal(a.begin(), a.end(), c.begin(), same))
        return fail("a different seed gave identical results on " + std::to_string(in.size()) + " inputs",
                    "seeds " + std::to_string(o.seed - 1) + " and " + std::to_string(o.seed),
                    "the seed must key the generator");
    return pass("same seed and offset give the same bits; another seed gives others");
}

result check_sr_chunking(env& e) {
    e.drew_random = true;
    if (!has_stochastic(e)) return skip("the format does not implement stochastic rounding");
    const std::vector<float> in = random_probes(e, 5000);
    quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
    o.seed = e.opts.seed;
    o.offset = 7;
    const std::vector<float> whole = quantize(e, in, o);
    for (size_t piece : {size_t{1}, size_t{3}, size_t{511}, size_t{513}}) {
        std::vector<float> out;
        for (size_t start = 0; start < in.size(); start += piece) {
            const size_t n = std::min(piece, in.size() - start);
            quantize_options p = o;
            p.offset = o.offset + start;
            const std::vector<float> part =
                quantize(e, std::vector<float>(in.begin() + start, in.begin() + start + n), p);
            out.insert(out.end(), part.begin(), part.end());
        }
        for (size_t k = 0; k < in.size(); ++k)
            if (!same(out[k], whole[k]))
                return fail("in pieces of " + std::to_string(piece) + " element " + std::to_string(k) +
                                " gave " + hex_float(out[k]) + ", in one call " + hex_float(whole[k]),
                            "x = " + hex_float(in[k]) + " (seed " + std::to_string(o.seed) + ", offset " +
                                std::to_string(o.offset + k) + ")",
                            "element i must draw from (seed, offset + i), whatever the call's length");
    }
    return pass("one call equals pieces of 1, 3, 511 and 513 elements with matching offsets");
}

namespace {

// The rate of rounding away from zero of x, between lo and hi (0 <= lo < hi),
// over `draws` elements with b random bits, against floor(f * 2^b) / 2^b.
std::optional<result> away_rate_differs(env& e, double lo, double hi, double f, uint32_t b, size_t draws) {
    const float x = static_cast<float>(lo + f * (hi - lo));
    const double p = (static_cast<double>(x) - lo) / (hi - lo);  // exact: the actual position of x
    const double want = std::floor(std::ldexp(p, static_cast<int>(b))) / std::ldexp(1.0, static_cast<int>(b));
    quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
    o.seed = e.opts.seed + b;
    o.random_bits = b;
    const std::vector<float> out = quantize(e, std::vector<float>(draws, x), o);
    const size_t away = static_cast<size_t>(std::count(out.begin(), out.end(), static_cast<float>(hi)));
    const double rate = static_cast<double>(away) / draws;
    // 5 binomial sigmas; a rate of 0 or 1 leaves no randomness, so it must be exact.
    const double bound = 5 * std::sqrt(want * (1 - want) / draws);
    if (std::fabs(rate - want) <= bound) return std::nullopt;
    return fail("rounded away " + std::to_string(away) + " times in " + std::to_string(draws) + " (rate " +
                    std::to_string(rate) + "), expected floor(f * 2^" + std::to_string(b) + ") / 2^" +
                    std::to_string(b) + " = " + std::to_string(want) + " within 5 sigma (" +
                    std::to_string(bound) + ")",
                "x = " + hex_float(x) + " between " + hex_float(lo) + " and " + hex_float(hi) +
                    ", f = " + std::to_string(p) + " (stochastic, random_bits " + std::to_string(b) +
                    ", seed " + std::to_string(o.seed) + ")",
                "with random_bits b use R & ~(2^(32-b) - 1), the top b of the 32 random bits, in "
                "floor(f * 2^32) + R >= 2^32 (abi/format.h)");
}

}  // namespace

result check_sr_random_bits(env& e) {
    e.drew_random = true;
    if (!has_stochastic(e)) return skip("the format does not implement stochastic rounding");
    if (!e.format->takes_random_bits())
        return skip(
            "the plugin does not declare ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS: the host refuses "
            "random_bits 1..31 for it");
    if (!e.table) return needs_table(e);
    // 0 and 32 are the full 32 bits: the same bits.
    const std::vector<float> in = random_probes(e, 5000);
    quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
    o.seed = e.opts.seed;
    o.random_bits = 0;
    const std::vector<float> all = quantize(e, in, o);
    o.random_bits = 32;
    const std::vector<float> thirty_two = quantize(e, in, o);
    for (size_t k = 0; k < in.size(); ++k)
        if (!same(all[k], thirty_two[k]))
            return fail("random_bits 32 gave " + hex_float(thirty_two[k]) + ", 0 gave " + hex_float(all[k]),
                        "x = " + hex_float(in[k]) + " (seed " + std::to_string(o.seed) + ", offset " +
                            std::to_string(k) + ")",
                        "random_bits 0 and 32 both mean all 32 random bits");
    // The interval just below (or at) 1, on the non-negative side.
    const auto& f = e.table->finite();
    size_t k = f.size();
    for (size_t i = 0; i + 1 < f.size(); ++i)
        if (f[i].value >= 0 && (k == f.size() || f[i].value <= 1.0f)) k = i;
    if (k == f.size()) return skip("no interval between two non-negative values");
    const size_t draws = 20000;
    for (uint32_t b : {1u, 2u, 4u, 8u})
        for (double frac : {0.3, 0.7})
            if (auto bad = away_rate_differs(e, f[k].value, f[k + 1].value, frac, b, draws)) return *bad;
    return pass(
        "random_bits 0 and 32 give the same bits; with 1, 2, 4 and 8 random bits x at f = 0.3 and "
        "0.7 of a step rounds away at floor(f * 2^b) / 2^b within 5 sigma (20000 draws each)");
}

}  // namespace altgrad::host::conformance
