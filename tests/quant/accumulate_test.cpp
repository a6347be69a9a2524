// The accumulation model (quant/accumulate.hpp, docs/accumulation.md) against an independent
// element-by-element implementation (accumulate_reference.hpp) and against values worked out by
// hand: every rounding, promotion every 0, 1, G, a multiple of G and not a multiple, K not a
// multiple of G, NaN and Inf inputs, the accumulator format's overflow, wide exponent ranges
// (the exact long-accumulator path), the operand layouts, the thread count; the float32
// accumulator's error bound; promotion's effect on a 14-bit accumulator.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "accumulate_reference.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "quant/accumulate.hpp"
#include "util/error.hpp"

namespace {

namespace host = altgrad::host;
namespace quant = altgrad::host::quant;
using altgrad::test::reference_format;
using quant::float32_step;

// The formats under test: the bundled fp16, bf16, fp32, e4m3 (no Inf: overflow is NaN) and the
// 14-bit E8M13 of the bundled float, each with its grid as the reference sees it.
struct format_case {
    std::string name;
    reference_format grid;
};
const std::vector<format_case>& formats() {
    static const std::vector<format_case> f = {{"fp16", {10, -14, 65504.0, true}},
                                               {"bf16", {7, -126, 0x1.fep127, true}},
                                               {"fp32", {23, -126, FLT_MAX, true}},
                                               {"e4m3", {3, -6, 448.0, false}},
                                               {"e8m13", {13, -126, 0x1.fff8p127, true}}};
    return f;
}

std::shared_ptr<const host::format_handle> load(const std::string& name) {
    static host::registry bundled(ALTGRAD_BUNDLED_PLUGIN_DIR);
    static std::map<std::string, std::shared_ptr<const host::format_handle>> made;
    auto& f = made[name];
    if (f) return f;
    if (name == "e8m13")
        f = host::format_handle::create(bundled.load("float"),
                                        {{"exponent_bits", "8"}, {"mantissa_bits", "13"}});
    else if (name == "e8m22")
        f = host::format_handle::create(bundled.load("float"),
                                        {{"exponent_bits", "8"}, {"mantissa_bits", "22"}});
    else f = host::format_handle::create(bundled.load(name));
    return f;
}

uint32_t bits(float x) {
    uint32_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

// Bit for bit, any NaN equal to any NaN; names the first difference.
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t x = 0; x < got.size(); ++x) {
        if (std::isnan(got[x]) && std::isnan(want[x])) continue;
        ASSERT_EQ(bits(got[x]), bits(want[x]))
            << what << ": element " << x << ": " << got[x] << " (" << std::hexfloat << got[x]
            << ") != " << want[x] << std::defaultfloat;
    }
}

std::vector<float> model(const std::string& format, altgrad_rounding rounding, size_t g, size_t promote,
                         const std::vector<float>& a, const std::vector<float>& b, size_t m, size_t k,
                         size_t n, unsigned threads = 1) {
    const quant::accumulator acc(load(format), {rounding, g, promote});
    std::vector<float> c(m * n, -1.0f);
    acc.gemm({a.data(), quant::operand_layout::as_is, b.data(), quant::operand_layout::as_is, m, k, n},
             c.data(), threads);
    return c;
}

std::vector<float> reference(const std::string& format, altgrad_rounding rounding, size_t g, size_t promote,
                             const std::vector<float>& a, const std::vector<float>& b, size_t m, size_t k,
                             size_t n) {
    for (const format_case& f : formats())
        if (f.name == format)
            return altgrad::test::reference_gemm(a, b, m, k, n, f.grid,
                                                 rounding == ALTGRAD_ROUND_NEAREST_EVEN, g, promote);
    ADD_FAILURE() << "no reference grid for " << format;
    return {};
}

// Normal values times 2^e, e uniform in [-spread, spread]: spread 0 is N(0,1); a wide spread
// makes chunks whose float64 sums cannot be exact (the long accumulator's path).
std::vector<float> draw(size_t count, int spread, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::uniform_int_distribution<int> exponent(-spread, spread);
    std::vector<float> x(count);
    for (float& v : x) v = std::ldexp(normal(rng), exponent(rng));
    return x;
}

const altgrad_rounding kRoundings[] = {ALTGRAD_ROUND_TOWARD_ZERO, ALTGRAD_ROUND_NEAREST_EVEN};

TEST(Accumulate, MatchesTheElementByElementModel) {
    const size_t m = 3, n = 5;
    // (K, G, N): K a multiple of G and not; N = 0, 1, G, a multiple of G, not a multiple.
    const size_t shapes[][3] = {{64, 32, 0},   {70, 32, 0}, {70, 32, 1}, {70, 32, 32}, {130, 32, 64},
                                {130, 32, 48}, {37, 5, 7},  {40, 1, 0},  {9, 16, 0},   {33, 32, 1000}};
    for (const format_case& f : formats())
        for (const altgrad_rounding r : kRoundings)
            for (const int spread : {0, 12, 100})
                for (const auto& s : shapes) {
                    const size_t k = s[0];
                    const auto a = draw(m * k, spread, static_cast<uint32_t>(k + spread));
                    const auto b = draw(k * n, spread, static_cast<uint32_t>(k * 7 + spread));
                    const std::string what =
                        f.name + " " + (r == ALTGRAD_ROUND_NEAREST_EVEN ? "nearest" : "toward-zero") + " K " +
                        std::to_string(k) + " G " + std::to_string(s[1]) + " N " + std::to_string(s[2]) +
                        " spread " + std::to_string(spread);
                    expect_same(model(f.name, r, s[1], s[2], a, b, m, k, n),
                                reference(f.name, r, s[1], s[2], a, b, m, k, n), what);
                }
}

// Values of few significant bits (as quantized operands are) take the plain float64 sums where
// their bit spans prove them exact (accumulate.cpp): narrow exponent spreads always, wider ones
// near and past the proof's limit, where tiles fall back to the TwoSum path. Every output is the
// model's, whichever path made it.
TEST(Accumulate, LowPrecisionOperandsMatchTheModelOnEveryPath) {
    const size_t m = 5, n = 19;
    for (const int bits : {2, 4, 8})
        for (const int spread : {0, 4, 8, 11, 12, 13, 20})
            for (const size_t g : {size_t{4}, size_t{7}, size_t{32}}) {
                const size_t k = 96;
                auto a = draw(m * k, spread, static_cast<uint32_t>(bits * 100 + spread));
                auto b = draw(k * n, spread, static_cast<uint32_t>(bits * 1000 + spread));
                for (auto* v : {&a, &b})
                    for (float& x : *v) {
                        int e = 0;
                        const float f = std::frexp(x, &e);
                        x = std::ldexp(std::nearbyint(std::ldexp(f, bits)), e - bits);  // `bits` significant
                    }
                for (const format_case& f : formats())
                    for (const altgrad_rounding r : kRoundings)
                        for (const size_t promote : {size_t{0}, size_t{40}})
                            expect_same(model(f.name, r, g, promote, a, b, m, k, n),
                                        reference(f.name, r, g, promote, a, b, m, k, n),
                                        f.name + " " + std::to_string(bits) + " bits spread " +
                                            std::to_string(spread) + " G " + std::to_string(g));
            }
}

TEST(Accumulate, NanAndInfInputsFollowIeee) {
    // Row 0 of A holds a NaN, row 1 an Inf, row 2 -Inf and +Inf; column 1 of B is all zeros
    // (Inf x 0 = NaN), column 2 finite, column 0 mixes signs.
    const size_t m = 4, k = 40, n = 3;
    std::vector<float> a = draw(m * k, 0, 1), b = draw(k * n, 0, 2);
    a[0 * k + 3] = NAN;
    a[1 * k + 35] = INFINITY;
    a[2 * k + 1] = -INFINITY;
    a[2 * k + 39] = INFINITY;
    for (size_t kk = 0; kk < k; ++kk) b[kk * n + 1] = 0.0f;
    for (size_t kk = 0; kk < k; ++kk) b[kk * n + 2] = 1.0f;
    b[35 * n + 0] = -2.0f;
    for (const format_case& f : formats())
        for (const altgrad_rounding r : kRoundings)
            for (const size_t promote : {size_t{0}, size_t{1}, size_t{32}}) {
                const auto c = model(f.name, r, 32, promote, a, b, m, k, n);
                expect_same(c, reference(f.name, r, 32, promote, a, b, m, k, n), f.name);
                for (size_t j = 0; j < n; ++j)
                    EXPECT_TRUE(std::isnan(c[0 * n + j])) << f.name;  // NaN x anything
                EXPECT_TRUE(std::isnan(c[1 * n + 1])) << f.name;      // Inf x 0
                EXPECT_TRUE(std::isnan(c[2 * n + 2])) << f.name;      // -Inf + Inf
                const float inf = f.grid.has_inf ? -INFINITY : NAN;   // Inf x -2
                if (f.grid.has_inf) EXPECT_EQ(c[1 * n + 0], inf) << f.name;
                else EXPECT_TRUE(std::isnan(c[1 * n + 0])) << f.name;
                for (size_t j = 0; j < n; ++j) EXPECT_TRUE(std::isfinite(c[3 * n + j])) << f.name;
            }
}

// An accumulator made Inf or NaN by one chunk stays so through later chunks whose operands are
// few-bit values (the plain float64 path's, where the accumulator meets a finite sum): rows with
// a NaN, +Inf, -Inf in the first chunk, and fp16 nearest overflowing to Inf from finite operands.
TEST(Accumulate, NonFiniteAccumulatorsStaySoThroughLaterChunks) {
    const size_t m = 5, k = 12, n = 3;
    std::vector<float> a(m * k, 1.0f), b(k * n, 0.5f);
    a[0 * k + 1] = NAN;
    a[1 * k + 2] = INFINITY;
    a[2 * k + 3] = -INFINITY;
    for (size_t kk = 0; kk < 4; ++kk) a[3 * k + kk] = 60000.0f;  // 4 x 60000 x 0.5 > 65504
    for (const format_case& f : formats())
        for (const altgrad_rounding r : kRoundings) {
            const auto c = model(f.name, r, 4, 0, a, b, m, k, n);
            const std::string what = f.name + (r == ALTGRAD_ROUND_NEAREST_EVEN ? " nearest" : " toward-zero");
            expect_same(c, reference(f.name, r, 4, 0, a, b, m, k, n), what);
            for (size_t j = 0; j < n; ++j) {
                EXPECT_TRUE(std::isnan(c[0 * n + j])) << what;
                if (!f.grid.has_inf) continue;
                EXPECT_EQ(c[1 * n + j], INFINITY) << what;
                EXPECT_EQ(c[2 * n + j], -INFINITY) << what;
                if (f.name == "fp16" && r == ALTGRAD_ROUND_NEAREST_EVEN) EXPECT_EQ(c[3 * n + j], INFINITY);
                EXPECT_EQ(c[4 * n + j], 6.0f) << what;  // 12 x 0.5
            }
        }
}

TEST(Accumulate, OverflowOfTheAccumulatorFormat) {
    // fp16 (max 65504): four products of 60000 (exact in fp16: 1875 steps of 32).
    const std::vector<float> a(4, 60000.0f), b(4, 1.0f);
    // Without promotion the second chunk overflows: nearest gives Inf and stays there; toward-zero
    // saturates at 65504 and stays there.
    EXPECT_EQ(model("fp16", ALTGRAD_ROUND_NEAREST_EVEN, 1, 0, a, b, 1, 4, 1)[0], INFINITY);
    EXPECT_EQ(model("fp16", ALTGRAD_ROUND_TOWARD_ZERO, 1, 0, a, b, 1, 4, 1)[0], 65504.0f);
    // Promoted after every element, the float32 total holds 240000.
    EXPECT_EQ(model("fp16", ALTGRAD_ROUND_NEAREST_EVEN, 1, 1, a, b, 1, 4, 1)[0], 240000.0f);
    // One chunk of all four: the exact 240000 rounds once, beyond fp16's range.
    EXPECT_EQ(model("fp16", ALTGRAD_ROUND_NEAREST_EVEN, 4, 0, a, b, 1, 4, 1)[0], INFINITY);
    // e4m3 has no Inf: its overflow is NaN under nearest, 448 under toward-zero.
    const std::vector<float> a8(2, 400.0f), b8(2, 1.0f);
    EXPECT_TRUE(std::isnan(model("e4m3", ALTGRAD_ROUND_NEAREST_EVEN, 1, 0, a8, b8, 1, 2, 1)[0]));
    EXPECT_EQ(model("e4m3", ALTGRAD_ROUND_TOWARD_ZERO, 1, 0, a8, b8, 1, 2, 1)[0], 448.0f);
    // And beyond float32's range inside a chunk: 2^127 * 2 + 2^127 * 2 - 2^127 * 2 = 2^128 exactly.
    const std::vector<float> big = {0x1p127f, 0x1p127f, -0x1p127f}, two(3, 2.0f);
    EXPECT_EQ(model("fp32", ALTGRAD_ROUND_NEAREST_EVEN, 3, 0, big, two, 1, 3, 1)[0],
              0x1p128 > FLT_MAX ? INFINITY : 0);
    EXPECT_EQ(model("fp32", ALTGRAD_ROUND_NEAREST_EVEN, 2, 0, big, two, 1, 3, 1)[0],
              INFINITY);  // Inf - 2^128
}

TEST(Accumulate, ChunksAreExactBeforeTheyRound) {
    // 1 + 2^-60 - 1 in one chunk is 2^-60 exactly; in chunks of 1, fp32 loses the 2^-60.
    const std::vector<float> a = {1.0f, 0x1p-60f, -1.0f}, b(3, 1.0f);
    EXPECT_EQ(model("fp32", ALTGRAD_ROUND_NEAREST_EVEN, 3, 0, a, b, 1, 3, 1)[0], 0x1p-60f);
    EXPECT_EQ(model("fp32", ALTGRAD_ROUND_NEAREST_EVEN, 1, 0, a, b, 1, 3, 1)[0], 0.0f);
    // 2^100 + 3 * 2^-100 - 2^100 (beyond float64's 53 bits): 3 * 2^-100 in one chunk.
    const std::vector<float> w = {0x1p100f, 0x1p-100f, 0x1p-100f, 0x1p-100f, -0x1p100f}, ones(5, 1.0f);
    EXPECT_EQ(model("bf16", ALTGRAD_ROUND_TOWARD_ZERO, 5, 0, w, ones, 1, 5, 1)[0], 0x1.8p-99f);
    // Toward zero just below a power of two: 1 - 2^-70 truncates to bf16's 1 - 2^-8.
    const std::vector<float> v = {1.0f, -0x1p-70f};
    EXPECT_EQ(model("bf16", ALTGRAD_ROUND_TOWARD_ZERO, 2, 0, v, ones, 1, 2, 1)[0], 1.0f - 0x1p-8f);
    EXPECT_EQ(model("bf16", ALTGRAD_ROUND_NEAREST_EVEN, 2, 0, v, ones, 1, 2, 1)[0], 1.0f);
    // Nearest at a tie of the format decided by bits float32 cannot hold: 1 + 2^-8 + 2^-40 in bf16
    // (step 2^-7 at 1) is above the midpoint: 1 + 2^-7. Without the 2^-40, the tie goes to even: 1.
    const std::vector<float> t = {1.0f, 0x1p-8f, 0x1p-40f};
    EXPECT_EQ(model("bf16", ALTGRAD_ROUND_NEAREST_EVEN, 3, 0, t, ones, 1, 3, 1)[0], 1.0f + 0x1p-7f);
    EXPECT_EQ(model("bf16", ALTGRAD_ROUND_NEAREST_EVEN, 2, 0, t, ones, 1, 2, 1)[0], 1.0f);
    // Sums that a float64 pair (hi, lo) cannot hold: 1 + 2^-80 - 2^-200 - 2^-80 = 1 - 2^-200,
    // whose truncation is bf16's 1 - 2^-8 (a pair that lost the 2^-200 would say 1); and
    // 1 + 2^-24 + 2^-80 + 2^-200 - 2^-80, just above float32's tie at 1 + 2^-24: 1 + 2^-23.
    const std::vector<float> x1 = {1.0f, 0x1p-40f, -0x1p-100f, -0x1p-40f},
                             y1 = {1.0f, 0x1p-40f, 0x1p-100f, 0x1p-40f};
    EXPECT_EQ(model("bf16", ALTGRAD_ROUND_TOWARD_ZERO, 4, 0, x1, y1, 1, 4, 1)[0], 1.0f - 0x1p-8f);
    const std::vector<float> x2 = {1.0f, 0x1p-12f, 0x1p-40f, 0x1p-100f, -0x1p-40f},
                             y2 = {1.0f, 0x1p-12f, 0x1p-40f, 0x1p-100f, 0x1p-40f};
    EXPECT_EQ(model("fp32", ALTGRAD_ROUND_NEAREST_EVEN, 5, 0, x2, y2, 1, 5, 1)[0], 1.0f + 0x1p-23f);
    EXPECT_EQ(model("fp16", ALTGRAD_ROUND_TOWARD_ZERO, 5, 0, x2, y2, 1, 5, 1)[0], 1.0f);
}

TEST(Accumulate, LayoutsAndThreadsGiveTheSameBits) {
    const size_t m = 13, k = 300, n = 21;
    const auto a = draw(m * k, 3, 5), b = draw(k * n, 3, 6);
    std::vector<float> at(k * m), bt(n * k);
    for (size_t i = 0; i < m; ++i)
        for (size_t kk = 0; kk < k; ++kk) at[kk * m + i] = a[i * k + kk];
    for (size_t kk = 0; kk < k; ++kk)
        for (size_t j = 0; j < n; ++j) bt[j * k + kk] = b[kk * n + j];
    const auto want = model("e8m13", ALTGRAD_ROUND_TOWARD_ZERO, 32, 128, a, b, m, k, n);
    expect_same(want, reference("e8m13", ALTGRAD_ROUND_TOWARD_ZERO, 32, 128, a, b, m, k, n), "reference");
    const quant::accumulator acc(load("e8m13"), {ALTGRAD_ROUND_TOWARD_ZERO, 32, 128});
    using L = quant::operand_layout;
    const std::vector<quant::gemm_operands> layouts = {
        {at.data(), L::transposed, b.data(), L::as_is, m, k, n},
        {a.data(), L::as_is, bt.data(), L::transposed, m, k, n},
        {at.data(), L::transposed, bt.data(), L::transposed, m, k, n}};
    for (const quant::gemm_operands& p : layouts)
        for (const unsigned threads : {1u, 2u, 3u, 0u}) {
            std::vector<float> c(m * n);
            acc.gemm(p, c.data(), threads);
            expect_same(c, want, "threads " + std::to_string(threads));
        }
}

std::vector<float> transposed(const std::vector<float>& x, size_t rows, size_t cols) {
    std::vector<float> t(x.size());
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
    return t;
}

// The kernel's paths and edges in one product, in every layout and on 1 and 3 threads, against
// the element-by-element model: 70 rows (two panels of 8 blocks of 4 rows, then a part of one,
// the last block short), 35 columns (two tiles of 16 and a short one), K = 100 in intervals of
// 40 (chunks of 32 and 8). Operands of 3 significant bits take the plain float64 sums; a row of
// wide exponent spread the TwoSum pairs and the long accumulator (row 7); a row scaled to float32's
// subnormals and a column scaled down make sums below float32's normal range (the full
// rounding); a zero row and column, an Inf (its outputs Inf or NaN from then on).
TEST(Accumulate, EveryPathInEveryLayout) {
    const size_t m = 70, k = 100, n = 35;
    auto a = draw(m * k, 2, 11), b = draw(k * n, 2, 12);
    for (auto* v : {&a, &b})
        for (float& x : *v) {
            int e = 0;
            const float f = std::frexp(x, &e);
            x = std::ldexp(std::nearbyint(std::ldexp(f, 3)), e - 3);
        }
    const auto wide = draw(k, 60, 13);
    for (size_t kk = 0; kk < k; ++kk) {
        a[7 * k + kk] = wide[kk];                           // spread 2^-60 .. 2^60
        a[40 * k + kk] = std::ldexp(a[40 * k + kk], -143);  // float32 subnormals
        a[66 * k + kk] = 0.0f;
        b[kk * n + 20] = std::ldexp(b[kk * n + 20], -120);  // with row 40: below 2^-126
        b[kk * n + 33] = 0.0f;
    }
    // Row 7's first chunk sums to b[0][j] - 2^-70 b[1][j] (beyond float64's 53 bits: the bit spans
    // must refuse the plain sums), and its second interval's first chunk to b[40][j] + 2^-120
    // b[42][j] (2^-60 b[41][j] cancels, after a pair has lost the 2^-120: the long accumulator's).
    std::fill(a.begin() + 7 * k, a.begin() + 7 * k + 80, 0.0f);  // the wide values from k = 80
    a[7 * k + 0] = 1.0f, a[7 * k + 1] = -0x1p-70f;
    a[7 * k + 40] = 1.0f, a[7 * k + 41] = 0x1p-60f, a[7 * k + 42] = 0x1p-120f, a[7 * k + 43] = -0x1p-60f;
    std::copy(b.begin() + 41 * n, b.begin() + 42 * n, b.begin() + 43 * n);
    a[50 * k + 45] = INFINITY;  // the second interval of row 50
    const std::vector<float> at = transposed(a, m, k), bt = transposed(b, k, n);
    using L = quant::operand_layout;
    for (const std::string format : {"e8m13", "fp16", "fp32"})
        for (const altgrad_rounding r : kRoundings) {
            const auto want = reference(format, r, 32, 40, a, b, m, k, n);
            EXPECT_TRUE(std::isinf(want[50 * n + 0]) || std::isnan(want[50 * n + 0]));
            const quant::accumulator acc(load(format), {r, 32, 40});
            for (const quant::gemm_operands& p : std::vector<quant::gemm_operands>{
                     {a.data(), L::as_is, b.data(), L::as_is, m, k, n},
                     {at.data(), L::transposed, b.data(), L::as_is, m, k, n},
                     {a.data(), L::as_is, bt.data(), L::transposed, m, k, n},
                     {at.data(), L::transposed, bt.data(), L::transposed, m, k, n}})
                for (const unsigned threads : {1u, 3u}) {
                    std::vector<float> c(m * n, -1.0f);
                    acc.gemm(p, c.data(), threads);
                    expect_same(c, want,
                                format + " " + std::to_string(r) + " layouts " +
                                    std::to_string(static_cast<int>(p.a_layout)) +
                                    std::to_string(static_cast<int>(p.b_layout)) + " threads " +
                                    std::to_string(threads));
                }
        }
}

TEST(Accumulate, EmptyReductionIsZero) {
    const std::vector<float> none;
    std::vector<float> c(6, 7.0f);
    quant::accumulator(load("fp16"), {})
        .gemm({none.data(), quant::operand_layout::as_is, none.data(), quant::operand_layout::as_is, 2, 0, 3},
              c.data());
    for (const float x : c) EXPECT_EQ(bits(x), 0u);
}

TEST(Accumulate, RoundToFloat32) {
    using quant::round_to_float32;
    const float32_step tz = float32_step::toward_zero, odd = float32_step::odd,
                       ne = float32_step::nearest_even;
    // 1 + 2^-30 (h exact): toward zero 1, odd 1 + 2^-23, nearest 1.
    EXPECT_EQ(round_to_float32(1.0 + 0x1p-30, 0, tz), 1.0f);
    EXPECT_EQ(round_to_float32(1.0 + 0x1p-30, 0, odd), 1.0f + 0x1p-23f);
    EXPECT_EQ(round_to_float32(1.0 + 0x1p-30, 0, ne), 1.0f);
    // S = 1 - tiny (h = 1, side -1): below the float32 1.
    EXPECT_EQ(round_to_float32(1.0, -1, tz), 1.0f - 0x1p-24f);
    EXPECT_EQ(round_to_float32(1.0, -1, odd), 1.0f - 0x1p-24f);  // its last bit is already 1
    EXPECT_EQ(round_to_float32(1.0, -1, ne), 1.0f);
    EXPECT_EQ(round_to_float32(-1.0, 1, tz), -(1.0f - 0x1p-24f));  // S = -1 + tiny
    EXPECT_EQ(round_to_float32(-1.0, -1, tz), -1.0f);              // S = -1 - tiny
    // Ties at 1 + 2^-24 (h is the midpoint): to even, or by the side.
    EXPECT_EQ(round_to_float32(1.0 + 0x1p-24, 0, ne), 1.0f);
    EXPECT_EQ(round_to_float32(1.0 + 0x1p-24, 1, ne), 1.0f + 0x1p-23f);
    EXPECT_EQ(round_to_float32(1.0 + 0x1p-24, -1, ne), 1.0f);
    EXPECT_EQ(round_to_float32(1.0 + 3 * 0x1p-24, 0, ne), 1.0f + 0x1p-22f);  // odd below: up to even
    // Subnormals and below: 2^-150 (half the smallest step) and 3 * 2^-151.
    EXPECT_EQ(round_to_float32(0x1p-150, 0, tz), 0.0f);
    EXPECT_EQ(bits(round_to_float32(-0x1p-150, 0, tz)), 0x80000000u);
    EXPECT_EQ(round_to_float32(0x1p-150, 0, odd), 0x1p-149f);
    EXPECT_EQ(round_to_float32(0x1p-150, 0, ne), 0.0f);
    EXPECT_EQ(round_to_float32(0x1p-150, 1, ne), 0x1p-149f);
    EXPECT_EQ(round_to_float32(3 * 0x1p-151, 0, ne), 0x1p-149f);
    // Beyond the range: toward zero and odd give FLT_MAX, nearest Inf past FLT_MAX + 2^103.
    EXPECT_EQ(round_to_float32(0x1p200, 0, tz), FLT_MAX);
    EXPECT_EQ(round_to_float32(0x1p200, 0, odd), FLT_MAX);
    EXPECT_EQ(round_to_float32(-0x1p200, 0, ne), -INFINITY);
    EXPECT_EQ(round_to_float32(double(FLT_MAX) + 0x1p103, -1, ne), FLT_MAX);
    EXPECT_EQ(round_to_float32(double(FLT_MAX) + 0x1p103, 0, ne), INFINITY);  // FLT_MAX is odd
    EXPECT_EQ(bits(round_to_float32(0.0, 0, ne)), 0u);
}

// The kernels round in vector lanes: the same float32 as round_to_float32, lane by lane, on zeros,
// float32 subnormals and below, ties of float32 and of the odd step, values at and past FLT_MAX, and
// random sums of both signs with a rest below, at or above zero.
TEST(Accumulate, RoundToFloat32InLanesIsTheScalarRounding) {
    std::vector<double> h, l;
    const double specials[] = {0.0,
                               -0.0,
                               0x1p-149,
                               0x1p-150,
                               0x1.8p-150,
                               0x1p-160,
                               0x1p-126,
                               0x1.fffffep-127,
                               1.0,
                               1.0 + 0x1p-24,
                               1.0 + 0x1p-23 + 0x1p-24,
                               0x1.fffffep127,
                               0x1.fffffefp127,
                               0x1.ffffffp127,
                               0x1p128,
                               0x1p200,
                               3.0,
                               0x1.000001p0};
    for (const double x : specials)
        for (const double sign : {1.0, -1.0})
            for (const double rest : {0.0, 0x1p-80, -0x1p-80}) {
                h.push_back(sign * x);
                l.push_back(x == 0.0 ? 0.0 : rest * std::fabs(x));  // |rest| far below half an ulp of h
            }
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int> exponent(-160, 130);
    std::uniform_real_distribution<double> unit(1.0, 2.0);
    for (int x = 0; x < 20000; ++x) {
        const double v = std::ldexp(unit(rng), exponent(rng)) * (rng() & 1 ? 1.0 : -1.0);
        // Some on float32's grid or its midpoints, so that the rest decides.
        const double on_grid = static_cast<double>(static_cast<float>(v));
        const double value = x % 3 == 0   ? on_grid
                             : x % 3 == 1 ? (on_grid + std::nextafter(on_grid, 0.0)) / 2
                                          : v;
        h.push_back(value);
        const int64_t r = static_cast<int64_t>(rng() % 3) - 1;
        l.push_back(static_cast<double>(r) * std::fabs(value) * 0x1p-60);
    }
    for (const float32_step step :
         {float32_step::toward_zero, float32_step::odd, float32_step::nearest_even}) {
        std::vector<float> lanes(h.size());
        quant::round_to_float32(h.data(), l.data(), h.size(), step, lanes.data());
        for (size_t x = 0; x < h.size(); ++x)
            ASSERT_EQ(bits(lanes[x]), bits(quant::round_to_float32(h[x], (l[x] > 0) - (l[x] < 0), step)))
                << "h " << h[x] << " l " << l[x] << " step " << static_cast<int>(step) << " index " << x;
    }
}

TEST(Accumulate, Float32AccumulatorErrorIsWithinTheRecursiveSummationBound) {
    // With fp32, each chunk's step is one rounding of acc + (an exact chunk sum): recursive
    // summation of the n = ceil(K / G) chunk sums D_1..D_n, each addition rounded (the first
    // too), so |C - S| <= gamma_n * sum |D_t| <= gamma_n * sum_k |a_k b_k| (Higham, Accuracy and
    // Stability, 4.2), gamma_n = n u / (1 - n u), u = 2^-24 (nearest) or 2^-23 (toward zero).
    // The float64 reference r adds |r - S| <= gamma_K(2^-53) * sum |a_k b_k|.
    const size_t m = 8, k = 4096, n = 8, g = 32;
    const auto a = draw(m * k, 4, 11), b = draw(k * n, 4, 12);
    for (const altgrad_rounding r : kRoundings) {
        const auto c = model("fp32", r, g, 0, a, b, m, k, n);
        const double u = r == ALTGRAD_ROUND_NEAREST_EVEN ? 0x1p-24 : 0x1p-23, chunks = k / g;
        const double gamma = chunks * u / (1 - chunks * u) + k * 0x1p-53 / (1 - k * 0x1p-53);
        double largest_ratio = 0;
        for (size_t i = 0; i < m; ++i)
            for (size_t j = 0; j < n; ++j) {
                double ref = 0, magnitude = 0;
                for (size_t kk = 0; kk < k; ++kk) {
                    const double p = static_cast<double>(a[i * k + kk]) * b[kk * n + j];
                    ref += p;
                    magnitude += std::fabs(p);
                }
                const double err = std::fabs(c[i * n + j] - ref);
                EXPECT_LE(err, gamma * magnitude) << i << "," << j;
                largest_ratio = std::max(largest_ratio, err / (gamma * magnitude));
            }
        // The bound is not vacuous here: toward zero's errors pile up in one direction
        // (here 3.5% of it at worst for toward-zero, 0.5% for nearest).
        if (r == ALTGRAD_ROUND_TOWARD_ZERO) EXPECT_GT(largest_ratio, 0.01);
    }
    // One chunk holding the whole K: fp32 nearest is the correctly rounded dot product. Small
    // integers make the float64 sum exact, so it is (float)(that sum).
    std::vector<float> x(3 * 100), y(100 * 2);
    for (size_t t = 0; t < x.size(); ++t) x[t] = static_cast<float>((t * 7919) % 201) - 100.0f;
    for (size_t t = 0; t < y.size(); ++t) y[t] = std::ldexp(static_cast<float>((t * 104729) % 16777213), -3);
    const auto c = model("fp32", ALTGRAD_ROUND_NEAREST_EVEN, 100, 0, x, y, 3, 100, 2);
    for (size_t i = 0; i < 3; ++i)
        for (size_t j = 0; j < 2; ++j) {
            double exact = 0;
            for (size_t kk = 0; kk < 100; ++kk) exact += static_cast<double>(x[i * 100 + kk]) * y[kk * 2 + j];
            EXPECT_EQ(c[i * 2 + j], static_cast<float>(exact));
        }
}

double normwise_error(const std::vector<float>& c, const std::vector<float>& a, const std::vector<float>& b,
                      size_t m, size_t k, size_t n) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            double ref = 0;
            for (size_t kk = 0; kk < k; ++kk) ref += static_cast<double>(a[i * k + kk]) * b[kk * n + j];
            diff += (c[i * n + j] - ref) * (c[i * n + j] - ref);
            norm += ref * ref;
        }
    return std::sqrt(diff / norm);
}

TEST(Accumulate, PromotionEvery128CutsTheErrorOfA14BitTruncatingAccumulator) {
    // DeepSeek-V3's fix (section 3.3), in the model: E8M13 (14 significant bits), toward zero,
    // K = 4096, G = 32; promoted every 128 elements the norm-wise error falls at least tenfold.
    const size_t m = 24, k = 4096, n = 24;
    for (const int spread : {0, 2}) {
        std::vector<float> a = draw(m * k, spread, 21), b = draw(k * n, spread, 22);
        for (float& v : a) v = std::fabs(v);  // positive data too: every truncation the same way
        for (const bool positive : {false, true}) {
            if (!positive) b = draw(k * n, spread, 23);
            const double never = normwise_error(
                model("e8m13", ALTGRAD_ROUND_TOWARD_ZERO, 32, 0, a, b, m, k, n), a, b, m, k, n);
            const double every = normwise_error(
                model("e8m13", ALTGRAD_ROUND_TOWARD_ZERO, 32, 128, a, b, m, k, n), a, b, m, k, n);
            EXPECT_GE(never, 10 * every) << "never " << never << " every 128 " << every;
            for (float& v : b) v = std::fabs(v);
        }
    }
}

TEST(Accumulate, RefusesWhatItCannotModel) {
    const auto expect_refused = [](const std::string& format, const quant::accumulator_spec& spec,
                                   const std::string& words) {
        try {
            quant::accumulator(load(format), spec);
            ADD_FAILURE() << format << ": accepted";
        } catch (const host::error& e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    expect_refused("fp16", {ALTGRAD_ROUND_STOCHASTIC, 32, 0}, "rounding 'stochastic' is not modelled");
    expect_refused("fp16", {ALTGRAD_ROUND_TOWARD_ZERO, 0, 0}, "mma_depth 0");
    // 23 significant bits: neither float32's grid nor even float32 midpoints.
    expect_refused("e8m22", {ALTGRAD_ROUND_NEAREST_EVEN, 32, 0}, "at most 22 significant bits");
    EXPECT_EQ(quant::accumulator(load("e8m22"), {ALTGRAD_ROUND_TOWARD_ZERO, 32, 0}).step(),
              float32_step::toward_zero);
    EXPECT_EQ(quant::accumulator(load("fp32"), {ALTGRAD_ROUND_NEAREST_EVEN, 32, 0}).step(),
              float32_step::nearest_even);
    EXPECT_EQ(quant::accumulator(load("e8m13"), {ALTGRAD_ROUND_NEAREST_EVEN, 32, 0}).step(),
              float32_step::odd);
}

}  // namespace
