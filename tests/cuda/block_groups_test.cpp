// The per-thread and per-block code of the device's block-scaled quantize
// (element_groups.hpp: each block's scale by the recipe's rule, its groups
// quantized by it), run on the CPU as the kernel runs it (cuda_kernels.cuh:
// the tensor's amax, each block's amax as the maximum of its groups', then
// quantize_block_group per group), against the host's block-scaled quantize
// (quant::quantize_blocked through the bundled plugins), and each piece against
// the host's own: the scale rules against scales_from_amaxes over a sweep of
// amaxes, the E4M3 grid's rounding against scale_grid's. Part of the default
// build: what a GPU adds (loads, shuffles, atomics) is tests/cuda's
// cuda_block_scaled_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <altgrad/sdk/element_groups.hpp>
#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_plugin.hpp>

#include "block_reference.hpp"

namespace {

namespace sdk = altgrad::sdk;
namespace quant = altgrad::host::quant;
using block_reference::recipe_spec;
using block_reference::result;

const sdk::exmy_format kE4m3({4, 3, 7, sdk::exmy_specials::finite_nan});
const sdk::exmy_format kE2m1({2, 1, 1, sdk::exmy_specials::finite});

const auto kNvfp4 = sdk::two_level_recipe(kE4m3, 6.0);

// The amaxes the rules are checked at: a sweep of every 4099th pattern, each
// power of two and each M 2^k with their neighbours, subnormals, 0, Inf, NaN.
std::vector<uint32_t> amax_sweep(const std::vector<float>& maxima) {
    std::vector<uint32_t> a;
    for (uint32_t b = 0; b < 0x7F800000u; b += 4099u) a.push_back(b);
    for (int k = -149; k <= 127; ++k) {
        std::vector<float> centres = {std::ldexp(1.0f, k)};
        for (float m : maxima)
            centres.push_back(std::ldexp(m, k - static_cast<int>(std::floor(std::log2(m)))));
        for (float c : centres) {
            if (!std::isfinite(c) || c == 0.0f) continue;
            for (int d = -2; d <= 2; ++d) {
                const uint32_t b = sdk::float_bits(c) + static_cast<uint32_t>(d);
                if (b < 0x7F800000u) a.push_back(b);
            }
        }
    }
    for (uint32_t b :
         {0u, 1u, 2u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0x7F800000u, 0x7FC00000u, 0x7FFFFFFFu})
        a.push_back(b);
    return a;
}

// One block's scale and stats on the host: scales_from_amaxes of that amax alone.
struct host_block {
    float scale;
    quant::block_scale_stats stats;
};
host_block on_host(float amax, const quant::block_recipe& r, double tensor_amax = 0.0) {
    float s = amax;
    const quant::block_scale_stats st = quant::scales_from_amaxes(&s, 1, r, tensor_amax);
    return {s, st};
}

template <class G>
void expect_rule_matches(const sdk::block_scale_recipe<G>& device, const quant::block_recipe& host,
                         const std::vector<uint32_t>& amaxes, float tensor_amax, const std::string& what) {
    const sdk::tensor_scale t = sdk::tensor_scale_of(device, sdk::float_bits(tensor_amax));
    size_t bad = 0;
    for (uint32_t a : amaxes) {
        const sdk::block_scale got = sdk::block_scale_for(device, a, t);
        const host_block want = on_host(sdk::bits_float(a), host, tensor_amax);
        const bool same = sdk::float_bits(got.scale) == sdk::float_bits(want.scale) &&
                          got.neutral == (want.stats.neutral == 1) &&
                          got.saturated == (want.stats.saturated == 1) &&
                          got.underflowed == (want.stats.underflowed == 1);
        if (!same && bad++ < 5)
            ADD_FAILURE() << what << " amax bits " << std::hex << a << ": host s " << std::hexfloat
                          << want.scale << " (saturated " << want.stats.saturated << ", underflowed "
                          << want.stats.underflowed << ", neutral " << want.stats.neutral << "), device "
                          << got.scale << " (" << got.saturated << ", " << got.underflowed << ", "
                          << got.neutral << ")";
    }
    EXPECT_EQ(bad, 0u) << what << ": of " << amaxes.size() << " amaxes";
}

// mx_floor on E8M0's and "pow2"'s grids for element formats whose largest values lie just below
// a power of two (E4M3's 448, E5M2's, E2M1's 6, E0M7's 127/128), on one (1.5 * 2^k) and at the
// top of float32; round_up where the grid reaches beyond every a / M (no clamp, as for MXFP8).
TEST(BlockGroups, PowerOfTwoRulesMatchTheHost) {
    const std::vector<float> maxima = {448.0f,          57344.0f, 6.0f,
                                       127.0f / 128.0f, 1.5f,     3.0f * std::ldexp(1.0f, 100)};
    const std::vector<uint32_t> amaxes = amax_sweep(maxima);
    const quant::scale_grid e8m0 = block_reference::grid_of("ue8m0"),
                            pow2 = quant::scale_grid::power_of_two();
    for (const auto* grid : {&e8m0, &pow2}) {
        const int kmin = static_cast<int>(std::log2(grid->smallest())),
                  kmax = static_cast<int>(std::log2(grid->largest()));
        for (const float m : maxima)
            expect_rule_matches(
                sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::mx_floor, kmin, kmax, m),
                quant::block_recipe{quant::scale_rule::mx_floor, grid, m}, amaxes, 0.0f,
                "mx_floor M=" + std::to_string(m) + " on " + grid->name());
        for (const float m : {448.0f, 57344.0f, 6.0f})
            expect_rule_matches(
                sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::round_up, kmin, kmax, m),
                quant::block_recipe{quant::scale_rule::round_up, grid, m}, amaxes, 0.0f,
                "round_up M=" + std::to_string(m) + " on " + grid->name());
    }
}

// round_up where X is clamped: at the top (saturated: s is then lowered until a * s <= M, into
// the subnormals where the grid reaches 2^127) and at the bottom of a grid, amaxes near each
// edge and beyond it (not far beyond the top: the host lowers s one float at a time).
TEST(BlockGroups, RoundUpAtTheGridsEdgesMatchesTheHost) {
    std::vector<float> powers;
    for (int k = -10; k <= 10; ++k) powers.push_back(std::ldexp(1.0f, k));
    const quant::scale_grid narrow = quant::scale_grid::of_values("2^-10..2^10", powers);
    const quant::scale_grid e8m0 = block_reference::grid_of("ue8m0");
    const std::pair<const quant::scale_grid*, float> cases[] = {
        {&narrow, 448.0f}, {&narrow, 6.0f}, {&e8m0, 1.5f}};
    for (const auto& [grid, m] : cases) {
        const int kmin = static_cast<int>(std::log2(grid->smallest())),
                  kmax = static_cast<int>(std::log2(grid->largest()));
        std::vector<uint32_t> amaxes;
        for (const float edge : {m * grid->largest(), m * grid->smallest()})
            for (int d = -40; d <= 40; ++d)
                if (std::isfinite(edge))
                    amaxes.push_back(sdk::float_bits(edge) + static_cast<uint32_t>(d * 13));
        // 1% beyond the top: s falls by 1%, some 10^5 floats (subnormal ones for E8M0's 2^127).
        for (const float a : {m * grid->largest() * 1.01f, m * grid->smallest() / 1000.0f})
            if (std::isfinite(a)) amaxes.push_back(sdk::float_bits(a));
        expect_rule_matches(
            sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::round_up, kmin, kmax, m),
            quant::block_recipe{quant::scale_rule::round_up, grid, m}, amaxes, 0.0f,
            "round_up M=" + std::to_string(m) + " on " + grid->name());
    }
}

TEST(BlockGroups, TwoLevelMatchesTheHost) {
    const std::vector<uint32_t> amaxes = amax_sweep({6.0f, 448.0f * 6.0f});
    const quant::block_recipe host{quant::scale_rule::two_level, &block_reference::grid_of("e4m3"), 6.0};
    const float inf = std::numeric_limits<float>::infinity();
    for (const float tensor_amax :
         {1.0f, 0.1f, 6.0f, 2688.0f, 3e38f, 1e-40f, 1e-30f, 0.0f, inf, std::nanf("")})
        expect_rule_matches(kNvfp4, host, amaxes, tensor_amax, "two_level A=" + std::to_string(tensor_amax));
}

// format_grid rounds onto E4M3's values as the host's grid does: down, up and
// nearest (a tie to the larger) at every grid value, its neighbours and
// midpoints, and a sweep between.
TEST(BlockGroups, FormatGridRoundsAsTheHostsGrid) {
    const quant::scale_grid& host = block_reference::grid_of("e4m3");
    const auto& grid = kNvfp4.grid;
    EXPECT_EQ(grid.smallest, host.smallest());
    EXPECT_EQ(grid.largest, host.largest());
    EXPECT_EQ(grid.nearest_limit, 464.0f);  // 448 + (448 - 416) / 2
    std::vector<float> xs;
    for (float v : block_reference::bundled("e4m3")->decode_all_codes()) {
        if (!(v >= grid.smallest && v <= grid.largest)) continue;
        for (int d = -3; d <= 3; ++d)
            xs.push_back(sdk::bits_float(sdk::float_bits(v) + static_cast<uint32_t>(d)));
        const float next = grid.up(sdk::bits_float(sdk::float_bits(v) + 1u));
        xs.push_back((v + next) / 2);  // a midpoint: exact for E4M3's values
    }
    for (uint32_t b = sdk::float_bits(grid.smallest); b <= sdk::float_bits(grid.largest); b += 997u)
        xs.push_back(sdk::bits_float(b));
    size_t bad = 0;
    for (float x : xs) {
        if (!(x >= grid.smallest && x <= grid.largest)) continue;
        if (grid.down(x) != host.down(x) || grid.up(x) != host.up(x) || grid.nearest(x) != host.nearest(x))
            if (bad++ < 5)
                ADD_FAILURE() << std::hexfloat << x << ": host " << host.down(x) << " " << host.up(x) << " "
                              << host.nearest(x) << ", device " << grid.down(x) << " " << grid.up(x) << " "
                              << grid.nearest(x);
    }
    EXPECT_EQ(bad, 0u) << "of " << xs.size();
}

// The call as the kernel does it (cuda_kernels.cuh, block_scaled_kernel), on the CPU: the
// tensor's amax (amax_kernel), then per block (in reverse order) the largest of its groups'
// amaxes (the kernel's shuffles) and quantize_block_group per group.
template <class K, class G>
result like_the_kernel(const K& k, const sdk::block_scale_recipe<G>& r, size_t block_size,
                       const std::vector<float>& x, const sdk::conversion_mode& m) {
    const size_t n = x.size(), groups = (n + 3) / 4, lanes = block_size / 4,
                 blocks = (n + block_size - 1) / block_size;
    const auto quad_at = [&](size_t g, unsigned& present) {
        sdk::quad q{{0.0f, 0.0f, 0.0f, 0.0f}};
        present = static_cast<unsigned>(n - 4 * g < 4 ? n - 4 * g : 4);
        std::memcpy(q.v, x.data() + 4 * g, present * sizeof(float));
        return q;
    };
    uint32_t tensor_amax = 0;
    for (size_t g = 0; g < groups; ++g) {
        unsigned present = 0;
        const sdk::quad q = quad_at(g, present);
        tensor_amax = std::max(tensor_amax, sdk::quad_amax_bits(q));
    }
    const sdk::tensor_scale t = sdk::tensor_scale_of(r, tensor_amax);
    result out;
    out.out.assign(n, 0.0f);
    out.scales.assign(blocks, 0.0f);
    sdk::block_tally tally;
    sdk::element_counts c;
    sdk::detail::dispatch_modes(m.rounding, m.overflow, [&](auto rounding, auto overflow) {
        constexpr altgrad_rounding R = decltype(rounding)::value;
        constexpr altgrad_overflow O = decltype(overflow)::value;
        for (size_t b = blocks; b-- > 0;) {
            const size_t g0 = b * lanes, g1 = std::min(groups, g0 + lanes);
            uint32_t amax = 0;
            for (size_t g = g0; g < g1; ++g) {
                unsigned present = 0;
                const sdk::quad q = quad_at(g, present);
                amax = std::max(amax, sdk::quad_amax_bits(q));
            }
            sdk::block_scale s;
            for (size_t g = g1; g-- > g0;) {
                unsigned present = 0;
                const sdk::quad q = quad_at(g, present);
                const sdk::quad y =
                    sdk::quantize_block_group<K, G, R, O>(k, r, t, q, present, amax, m.seed, m.offset,
                                                          sdk::random_bits_mask(m.random_bits), g, s, c);
                std::memcpy(out.out.data() + 4 * g, y.v, present * sizeof(float));
            }
            out.scales[b] = s.scale;
            tally.counts[sdk::block_tally::kSaturated] += s.saturated;
            tally.counts[sdk::block_tally::kUnderflowed] += s.underflowed;
            tally.counts[sdk::block_tally::kNeutral] += s.neutral;
            tally.amax_bits = std::max(tally.amax_bits, amax);
            if (!s.neutral) {
                tally.largest_scale_bits = std::max(tally.largest_scale_bits, sdk::float_bits(s.scale));
                tally.smallest_scale_bits = std::min(tally.smallest_scale_bits, sdk::float_bits(s.scale));
            }
        }
    });
    out.overflow = c.overflow;
    out.underflow = c.underflow;
    out.stats = block_reference::stats_of(tally, blocks);
    return out;
}

// Every published recipe, every mode, calls whose edges fall at each lane of a Philox block and
// inside a block, with the top 5 random bits or all: the kernel's code gives the host's bits.
TEST(BlockGroups, BlockScaledCallsMatchTheHost) {
    const auto floor = sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::mx_floor, -127, 127, 448.0);
    const auto round_up =
        sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::round_up, -127, 127, 448.0);
    const std::pair<uint64_t, size_t> calls[] = {{0, 6000}, {1, 4093}, {6, 37}, {4099, 5001}, {3, 1}, {0, 0}};
    for (const bool wide : {true, false}) {
        const std::vector<float> all = block_reference::sample_inputs(6000, 7, wide);
        for (const recipe_spec& spec : block_reference::published())
            for (const auto& [offset, count] : calls)
                for (const sdk::conversion_mode& m : block_reference::modes_at(offset)) {
                    const std::vector<float> x(all.begin(), all.begin() + static_cast<long>(count));
                    const result want = block_reference::on_host(spec, x, m);
                    const result got =
                        spec.name == "nvfp4"         ? like_the_kernel(kE2m1.kernel(), kNvfp4, 16, x, m)
                        : spec.name == "mxfp8_floor" ? like_the_kernel(kE4m3.kernel(), floor, 32, x, m)
                                                     : like_the_kernel(kE4m3.kernel(), round_up, 32, x, m);
                    EXPECT_TRUE(block_reference::same_result(x, want, got))
                        << spec.name << " " << block_reference::describe(m) << " count " << count
                        << (wide ? " wide" : " narrow");
                }
    }
}

// What the device cannot do is refused, saying why.
TEST(BlockGroups, RecipesTheDeviceCannotHoldAreRefused) {
    EXPECT_THROW(sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::two_level, -127, 127, 6.0),
                 sdk::plugin_error);
    EXPECT_THROW(sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::mx_floor, -128, 127, 6.0),
                 sdk::plugin_error);
    EXPECT_THROW(sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::mx_floor, -127, 127, 0.1),
                 sdk::plugin_error);  // 0.1 is no float
}

}  // namespace
