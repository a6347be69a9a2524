#include "block_reference.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "plugins/registry.hpp"

namespace block_reference {

namespace host = altgrad::host;
namespace sdk = altgrad::sdk;

const std::vector<recipe_spec>& published() {
    static const std::vector<recipe_spec> specs = {
        {"mxfp8_floor", "e4m3", "ue8m0", 32, quant::scale_rule::mx_floor},
        {"mxfp8_round_up", "e4m3", "ue8m0", 32, quant::scale_rule::round_up},
        {"nvfp4", "fp4_e2m1", "e4m3", 16, quant::scale_rule::two_level}};
    return specs;
}

std::shared_ptr<const host::format_handle> bundled(const std::string& name) {
    static host::registry plugins(ALTGRAD_BUNDLED_PLUGIN_DIR);
    static std::map<std::string, std::shared_ptr<const host::format_handle>> made;
    auto& f = made[name];
    if (!f) f = host::format_handle::create(plugins.load(name));
    return f;
}

const quant::scale_grid& grid_of(const std::string& scale_format) {
    static std::map<std::string, std::unique_ptr<quant::scale_grid>> made;
    auto& g = made[scale_format];
    if (!g)
        g = std::make_unique<quant::scale_grid>(
            quant::scale_grid_named(scale_format, [&] { return bundled(scale_format); }));
    return *g;
}

result on_host(const recipe_spec& r, const std::vector<float>& x, const sdk::conversion_mode& m) {
    const auto element = bundled(r.element);
    const quant::block_recipe recipe{r.rule, &grid_of(r.scale_format), element->info().max_finite};
    result out;
    out.out.assign(x.size(), 0.0f);
    out.scales.assign(sdk::block_count(x.size(), r.block_size), 0.0f);
    host::quantize_options o;
    o.rounding = m.rounding;
    o.overflow = m.overflow;
    o.seed = m.seed;
    o.offset = m.offset;
    o.random_bits = m.random_bits;
    const quant::blocked_quantize_result q =
        quant::quantize_blocked(element.get(), x.data(), out.out.data(), 1, x.size(), {1, r.block_size},
                                recipe, o, 1.0f, quant::in_threads(1), out.scales.data());
    out.overflow = q.counts.overflow;
    out.underflow = q.counts.underflow;
    out.stats = q.stats;
    return out;
}

std::vector<sdk::conversion_mode> modes_at(uint64_t offset) {
    std::vector<sdk::conversion_mode> out;
    for (const altgrad_rounding r :
         {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_ROUND_TOWARD_ZERO})
        for (const altgrad_overflow o : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            sdk::conversion_mode m;
            m.rounding = r;
            m.overflow = o;
            m.seed = 0xB10C5EEDull;
            m.offset = offset;
            m.random_bits = offset % 2 == 1 ? 5u : 0u;
            out.push_back(m);
        }
    return out;
}

std::string describe(const sdk::conversion_mode& m) {
    return "rounding " + std::to_string(m.rounding) + " overflow " + std::to_string(m.overflow) + " offset " +
           std::to_string(m.offset) + " random_bits " + std::to_string(m.random_bits);
}

quant::block_scale_stats stats_of(const sdk::block_tally& t, size_t blocks) {
    quant::block_scale_stats s;
    s.blocks = blocks;
    s.saturated = t.counts[sdk::block_tally::kSaturated];
    s.underflowed = t.counts[sdk::block_tally::kUnderflowed];
    s.neutral = t.counts[sdk::block_tally::kNeutral];
    s.amax = sdk::bits_float(t.amax_bits);
    if (t.largest_scale_bits != 0) {  // the decode scales X = 1/s, as scales_from_amaxes gives their range
        s.smallest_scale = 1.0 / sdk::bits_float(t.largest_scale_bits);
        s.largest_scale = 1.0 / sdk::bits_float(t.smallest_scale_bits);
    }
    return s;
}

namespace {

// Equal doubles, NaN equal to NaN.
bool same_double(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

std::string hex(float f) {
    std::ostringstream s;
    s << std::hexfloat << f;
    return s.str();
}

}  // namespace

::testing::AssertionResult same_result(const std::vector<float>& x, const result& want, const result& got) {
    std::ostringstream msg;
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const float a = want.out[i], b = got.out[i];
        if ((std::isnan(a) && std::isnan(b)) || sdk::float_bits(a) == sdk::float_bits(b)) continue;
        if (bad++ < 8)
            msg << "\n  element " << i << " x=" << hex(x[i]) << " host " << hex(a) << " device " << hex(b);
    }
    for (size_t b = 0; b < want.scales.size(); ++b)
        if (sdk::float_bits(want.scales[b]) != sdk::float_bits(got.scales[b]) && bad++ < 8)
            msg << "\n  block " << b << " scale host " << hex(want.scales[b]) << " device "
                << hex(got.scales[b]);
    const quant::block_scale_stats &w = want.stats, &g = got.stats;
    if (want.overflow != got.overflow || want.underflow != got.underflow) {
        ++bad;
        msg << "\n  counts host " << want.overflow << "/" << want.underflow << " device " << got.overflow
            << "/" << got.underflow;
    }
    if (w.blocks != g.blocks || w.saturated != g.saturated || w.underflowed != g.underflowed ||
        w.neutral != g.neutral || !same_double(w.amax, g.amax) ||
        !same_double(w.smallest_scale, g.smallest_scale) || !same_double(w.largest_scale, g.largest_scale)) {
        ++bad;
        msg << "\n  stats host blocks " << w.blocks << " saturated " << w.saturated << " underflowed "
            << w.underflowed << " neutral " << w.neutral << " amax " << w.amax << " scales "
            << w.smallest_scale << ".." << w.largest_scale << "; device " << g.blocks << " " << g.saturated
            << " " << g.underflowed << " " << g.neutral << " " << g.amax << " " << g.smallest_scale << ".."
            << g.largest_scale;
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " differences" << msg.str();
}

std::vector<float> sample_inputs(size_t n, uint64_t seed, bool wide) {
    std::vector<float> x(n);
    uint64_t state = seed;
    const auto next = [&state] {
        state += 0x9E3779B97F4A7C15ull;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    };
    const float inf = std::numeric_limits<float>::infinity();
    for (size_t first = 0; first < n;
         first += 16) {  // a kind per 16 elements (every NVFP4 block, half an MX one)
        const uint64_t kind = wide ? next() % 12 : 3 + next() % 9;  // narrow: no zero, NaN or Inf block
        const int exponent = wide ? static_cast<int>(next() % 261) - 140 : static_cast<int>(next() % 25) - 12;
        for (size_t i = first; i < first + 16 && i < n; ++i) {
            const uint64_t h = next();
            // A value in (-2, 2) with 16 random significant bits, at the block's magnitude.
            float v = std::ldexp(static_cast<float>(static_cast<int64_t>(h % 131072) - 65536), exponent - 16);
            switch (kind) {
                case 0: v = 0.0f; break;                                // a block of zeros
                case 1: v = i == first + 3 ? std::nanf("") : v; break;  // a NaN inside
                case 2: v = i == first + 5 ? -inf : v; break;
                case 3:
                    v = std::ldexp(static_cast<float>(h % 64) - 32.0f, -149);
                    break;  // float32 subnormals
                case 4:
                    v = std::ldexp(1.0f, exponent) * (i == first ? 1.0f : 0.5f);
                    break;  // amax a power of 2
                case 5: v = std::ldexp(448.0f, exponent) * (i == first ? -1.0f : 0.25f); break;  // amax M 2^k
                case 6: v = std::ldexp(6.0f, exponent) * (i == first ? 1.0f : 0.75f); break;
                case 7: v = std::ldexp(static_cast<float>(2 * (h % 8) + 1), exponent - 4); break;  // ties
                default: break;
            }
            x[i] = v;
        }
    }
    return x;
}

}  // namespace block_reference
