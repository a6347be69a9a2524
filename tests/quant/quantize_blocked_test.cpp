// quantize_blocked (host/src/quant/block_scales.hpp), the block-scaled
// quantize the trainer, the CLI and Python share, through the bundled
// fp4_e2m1, e4m3 and ue8m0 plugins. Expected values come from arithmetic in
// this file: each tile's amax, its decode scale X = 2^(floor(log2 a) - emax)
// by OCP MX's rule (E2M1 emax 2, E4M3 emax 8), and E2M1 rounding to nearest
// (ties to an even code) written out here; E4M3 by the plugin's per-tensor
// quantize at that scale.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugins/registry.hpp"
#include "quant/block_scales.hpp"
#include "util/error.hpp"

namespace altgrad::host::quant {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::shared_ptr<const format_handle> load(const std::string& name) {
    static registry bundled(ALTGRAD_BUNDLED_PLUGIN_DIR);
    static std::map<std::string, std::shared_ptr<const format_handle>> made;
    auto& f = made[name];
    if (!f) f = format_handle::create(bundled.load(name));
    return f;
}

// OCP E2M1, saturating: the nearest of its values, a tie to the even code (codes 0..7 are the
// values in this order, so an even index is an even mantissa bit).
float e2m1(float v) {
    static const float grid[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    if (std::isnan(v)) return v;
    const float a = std::fabs(v);
    int best = 7;
    for (int i = 0; i < 7; ++i) {
        const float lo = grid[i], hi = grid[i + 1];
        if (a <= hi) {
            const float mid = (lo + hi) / 2;
            best = a < mid ? i : a > mid ? i + 1 : (i % 2 == 0 ? i : i + 1);
            break;
        }
    }
    return std::copysign(grid[best], v);
}

// floor(log2 a), a > 0 finite, by frexp (a = m 2^e, m in [0.5, 1)).
int floor_log2(float a) {
    int e = 0;
    std::frexp(a, &e);
    return e - 1;
}

// x as [rows, k] through E2M1 with R x C tiles, MX's floor rule (emax 2), scales on powers of two,
// element scale s = 1/X times c.
std::vector<float> mx_e2m1_reference(const std::vector<float>& x, size_t rows, size_t k, size_t tr, size_t tc,
                                     float c = 1.0f) {
    std::vector<float> y(x.size());
    for (size_t r0 = 0; r0 < rows; r0 += tr)
        for (size_t c0 = 0; c0 < k; c0 += tc) {
            float a = 0;
            for (size_t r = r0; r < r0 + tr; ++r)
                for (size_t j = c0; j < std::min(k, c0 + tc); ++j) a = std::max(a, std::fabs(x[r * k + j]));
            const float s = (a > 0 ? std::ldexp(1.0f, 2 - floor_log2(a)) : 1.0f) * c;
            for (size_t r = r0; r < r0 + tr; ++r)
                for (size_t j = c0; j < std::min(k, c0 + tc); ++j) y[r * k + j] = e2m1(x[r * k + j] * s) / s;
        }
    return y;
}

// Values whose magnitudes differ from row to row and along rows, so that tiles and 1 x C blocks
// get different scales.
std::vector<float> sample(size_t rows, size_t k) {
    std::vector<float> x(rows * k);
    for (size_t i = 0; i < x.size(); ++i)
        x[i] = std::ldexp(std::sin(0.7f * static_cast<float>(i) + 0.3f),
                          static_cast<int>(i / k % 3) - static_cast<int>(i % k / 4));
    return x;
}

struct mx_setup {
    scale_grid grid = scale_grid_named("ue8m0", [] { return load("ue8m0"); });
    block_recipe recipe{scale_rule::mx_floor, &grid, 6.0};
};

void expect_same(const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        if (!(std::isnan(want[i]) && std::isnan(got[i]))) ASSERT_EQ(got[i], want[i]) << "element " << i;
}

TEST(QuantizeBlocked, TilesOfE2M1UnderMxFloorMatchTheHandComputedTiles) {
    const mx_setup mx;
    const size_t rows = 4, k = 8;
    const std::vector<float> x = sample(rows, k);
    std::vector<float> y(x.size());
    const blocked_quantize_result r =
        quantize_blocked(*load("fp4_e2m1"), x.data(), y.data(), rows, k, {2, 4}, mx.recipe, {});
    expect_same(y, mx_e2m1_reference(x, rows, k, 2, 4));
    EXPECT_EQ(r.stats.blocks, 4u);  // 2 x 2 tiles
    EXPECT_EQ(r.stats.neutral, 0u);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(r.stats.amax, amax);
    // The tiles are not the 1 x 4 blocks: some element comes out differently.
    EXPECT_NE(y, mx_e2m1_reference(x, rows, k, 1, 4));
    // Threads split the rows: the same values.
    std::vector<float> z(x.size());
    quantize_blocked(*load("fp4_e2m1"), x.data(), z.data(), rows, k, {2, 4}, mx.recipe, {}, 1.0f, 3);
    expect_same(z, y);
}

TEST(QuantizeBlocked, SixteenBySixteenTilesAndWholeRowTiles) {
    const mx_setup mx;
    const size_t rows = 32, k = 48;
    const std::vector<float> x = sample(rows, k);
    std::vector<float> y(x.size());
    quantize_blocked(*load("fp4_e2m1"), x.data(), y.data(), rows, k, {16, 16}, mx.recipe, {}, 1.0f, 2);
    expect_same(y, mx_e2m1_reference(x, rows, k, 16, 16));
    // Tiles of 2 rows by the whole row.
    quantize_blocked(*load("fp4_e2m1"), x.data(), y.data(), rows, k, {2, block_shape::kWholeRow}, mx.recipe,
                     {});
    expect_same(y, mx_e2m1_reference(x, rows, k, 2, k));
}

TEST(QuantizeBlocked, RowBlocksAreTheExistingPerBlockQuantize) {
    const mx_setup mx;
    const size_t rows = 5, k = 10;  // blocks of 4: two whole and a short one per row
    const std::vector<float> x = sample(rows, k);
    std::vector<float> y(x.size());
    const blocked_quantize_result r =
        quantize_blocked(*load("fp4_e2m1"), x.data(), y.data(), rows, k, {1, 4}, mx.recipe, {}, 1.0f, 2);
    expect_same(y, mx_e2m1_reference(x, rows, k, 1, 4));
    EXPECT_EQ(r.stats.blocks, 15u);
    // Row by row through quantize_with_block_scales and the plugin's block-scaled call.
    std::vector<float> want(x.size()), scales(3);
    for (size_t row = 0; row < rows; ++row)
        quantize_with_block_scales(x.data() + row * k, k, 4, mx.recipe, scales.data(),
                                   [&](size_t first, size_t count, const float* s) {
                                       quantize_options o;
                                       o.block_scales = s;
                                       o.block_size = 4;
                                       load("fp4_e2m1")
                                           ->quantize(x.data() + row * k + first,
                                                      want.data() + row * k + first, count, o);
                                   });
    expect_same(y, want);
    // A whole row per block: blocks of k.
    quantize_blocked(*load("fp4_e2m1"), x.data(), y.data(), rows, k, {}, mx.recipe, {});
    expect_same(y, mx_e2m1_reference(x, rows, k, 1, k));
}

TEST(QuantizeBlocked, PreScaleMultipliesEveryEncodeScale) {
    const mx_setup mx;
    const size_t rows = 4, k = 8;
    const std::vector<float> x = sample(rows, k);
    std::vector<float> y(x.size());
    for (const block_shape shape : {block_shape{1, 4}, block_shape{2, 4}}) {
        quantize_blocked(*load("fp4_e2m1"), x.data(), y.data(), rows, k, shape, mx.recipe, {}, 0.75f);
        expect_same(y, mx_e2m1_reference(x, rows, k, shape.rows, 4, 0.75f));
    }
    // A block of amax 7: X = 2^(2 - 2) = 1 puts 7 above E2M1's 6 (saturated); c = 3/4 puts it at 5.25,
    // nearer 6 than 4, so 6 / (3/4) = 8.
    const std::vector<float> v{7, 1, 0, 0};
    std::vector<float> w(4);
    const blocked_quantize_result plain =
        quantize_blocked(*load("fp4_e2m1"), v.data(), w.data(), 1, 4, {1, 4}, mx.recipe, {});
    EXPECT_EQ(w[0], 6.0f);
    EXPECT_EQ(plain.counts.overflow, 1u);
    const blocked_quantize_result scaled =
        quantize_blocked(*load("fp4_e2m1"), v.data(), w.data(), 1, 4, {1, 4}, mx.recipe, {}, 0.75f);
    EXPECT_EQ(w[0], 8.0f);
    EXPECT_EQ(scaled.counts.overflow, 0u);
}

TEST(QuantizeBlocked, NaNInATileMakesItsAmaxNaNAndLeavesItUnscaled) {
    const mx_setup mx;
    const size_t rows = 4, k = 8;
    std::vector<float> x = sample(rows, k);
    x[1 * k + 2] = kNaN;  // in the tile of rows 0-1, columns 0-3
    std::vector<float> y(x.size());
    const blocked_quantize_result r =
        quantize_blocked(*load("fp4_e2m1"), x.data(), y.data(), rows, k, {2, 4}, mx.recipe, {});
    EXPECT_EQ(r.stats.neutral, 1u);
    EXPECT_TRUE(std::isnan(r.stats.amax));
    EXPECT_TRUE(std::isnan(y[1 * k + 2]));
    std::vector<float> want = mx_e2m1_reference(x, rows, k, 2, 4);  // the NaN tile: amax NaN, scale...
    for (size_t row = 0; row < 2; ++row)
        for (size_t j = 0; j < 4; ++j) want[row * k + j] = e2m1(x[row * k + j]);  // ... 1
    expect_same(y, want);
}

TEST(QuantizeBlocked, E4M3TilesAreThePerTensorQuantizeAtEachTilesScale) {
    const scale_grid grid = scale_grid_named("pow2", [] { return load("e4m3"); });  // not loaded
    const block_recipe recipe{scale_rule::mx_floor, &grid, 448.0};
    const size_t rows = 4, k = 4;
    std::vector<float> x = sample(rows, k);
    for (float& v : x) v *= 1000;
    std::vector<float> y(x.size());
    quantize_options o;
    o.rounding = ALTGRAD_ROUND_STOCHASTIC;
    o.seed = 5;
    o.offset = 100;
    quantize_blocked(*load("e4m3"), x.data(), y.data(), rows, k, {2, 2}, recipe, o, 1.0f, 2);
    for (size_t r0 = 0; r0 < rows; r0 += 2)
        for (size_t c0 = 0; c0 < k; c0 += 2) {
            float a = 0;
            for (size_t r = r0; r < r0 + 2; ++r)
                for (size_t j = c0; j < c0 + 2; ++j) a = std::max(a, std::fabs(x[r * k + j]));
            for (size_t r = r0; r < r0 + 2; ++r)
                for (size_t j = c0; j < c0 + 2; ++j) {
                    quantize_options one = o;
                    one.scale = std::ldexp(1.0f, 8 - floor_log2(a));
                    one.offset = o.offset + r * k + j;  // stochastic rounding by element index
                    float want = 0;
                    load("e4m3")->quantize(&x[r * k + j], &want, 1, one);
                    EXPECT_EQ(y[r * k + j], want) << r << ", " << j;
                }
        }
}

// NVFP4's two levels on tiles: A, the largest tile amax, is 1536, so g = 448 * 6 / A = 1.75. The tile
// {1536 6 / 0 0} has X = 1536 / 6 * g = 448 (E4M3's largest), s = g / X = 2^-8: 6 / 256 is below
// E2M1's 0.25, so 0; the tile {6 3 / 0 -1} has X = 6 / 6 * g = 1.75 (an E4M3 value), s = 1.
TEST(QuantizeBlocked, TwoLevelTilesScaleUnderTheLargestTileAmax) {
    const scale_grid grid = scale_grid_named("e4m3", [] { return load("e4m3"); });
    const block_recipe recipe{scale_rule::two_level, &grid, 6.0};
    const std::vector<float> x{1536, 6, 6, 3, 0, 0, 0, -1};
    std::vector<float> y(x.size());
    const blocked_quantize_result r =
        quantize_blocked(*load("fp4_e2m1"), x.data(), y.data(), 2, 4, {2, 2}, recipe, {});
    expect_same(y, {1536, 0, 6, 3, 0, 0, 0, -1});
    EXPECT_EQ(r.stats.amax, 1536.0);
    EXPECT_EQ(r.stats.largest_scale, 448.0 / 1.75);  // decode scales 1/s: 256 and 1
    EXPECT_EQ(r.stats.smallest_scale, 1.0);
}

TEST(QuantizeBlocked, TilesThatDoNotDivideTheTensorAreAnError) {
    const mx_setup mx;
    std::vector<float> x(24, 1.0f), y(24);
    const auto message = [&](size_t rows, size_t k, block_shape shape) {
        try {
            quantize_blocked(*load("fp4_e2m1"), x.data(), y.data(), rows, k, shape, mx.recipe, {});
        } catch (const error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message(3, 8, {2, 4}), "tiles of 2x4 do not divide a tensor of [3, 8] (rows by row length)");
    EXPECT_EQ(message(4, 6, {2, 4}), "tiles of 2x4 do not divide a tensor of [4, 6] (rows by row length)");
    EXPECT_EQ(message(4, 6, {1, 0}), "blocks of 1x0: a block needs at least one row and one column");
    EXPECT_EQ(message(4, 6, {0, 4}), "blocks of 0x4: a block needs at least one row and one column");
    EXPECT_EQ(message(4, 6, {1, 4}), "no error");  // a short last block along rows is fine
}

TEST(QuantizeBlocked, ScaleFormatsByName) {
    bool loaded = false;
    const auto never = [&] {
        loaded = true;
        return load("ue8m0");
    };
    EXPECT_EQ(scale_grid_named("fp32", never).largest(), std::ldexp(1.0f, 126));
    EXPECT_TRUE(scale_grid_named("pow2", never).powers_of_two());
    EXPECT_FALSE(loaded);
    const scale_grid e8m0 = scale_grid_named("ue8m0", [] { return load("ue8m0"); });
    EXPECT_TRUE(e8m0.powers_of_two());
    EXPECT_EQ(e8m0.smallest(), std::ldexp(1.0f, -127));
    EXPECT_EQ(e8m0.largest(), std::ldexp(1.0f, 127));
    EXPECT_EQ(scale_grid_named("e4m3", [] { return load("e4m3"); }).largest(), 448.0f);
    try {
        scale_grid_named("fp32x", [] { return load("fp32"); });
        ADD_FAILURE() << "a 32-bit scale format was accepted";
    } catch (const error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "scale_format 'fp32x': a scale format plugin must have at most 16 bits (it has 32); use "
                  "\"fp32\" for float32 scales");
    }
}

}  // namespace
}  // namespace altgrad::host::quant
