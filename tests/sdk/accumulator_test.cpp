// Accumulator plugins (ABI 1.5): every bundled instruction model loaded
// through the C ABI as a host loads it, its info against the published
// shapes (the issue, MMA-Sim's nv.py), and its results bit for bit against
// the independent reference of accumulator_reference.hpp on random operands
// of the instruction's formats (codes drawn over their whole range, so
// subnormals, zeros and wide exponent spreads come often) and on hand-made
// edge cases; the SDK's loops for each instruction set alike; values
// worked out by hand; and bad arguments refused with their status and a
// message naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <altgrad/sdk/fused_dot_add.hpp>

#include "accumulator_host.hpp"
#include "accumulator_reference.hpp"

namespace {

using acctest::Accumulator;
using acctest::bfloat;
using acctest::call;
using acctest::fbits;
using acctest::minifloat;
using acctest::output;
using agtest::Param;

// ---------------------------------------------------------------- operand formats, decoded from codes

struct operand_format {
    std::string name;
    int32_t min_exponent;
    std::function<float(std::mt19937_64&)> draw;  // a random finite value of the format
};

uint32_t code(std::mt19937_64& rng, uint32_t count) { return static_cast<uint32_t>(rng() % count); }

const operand_format kE4M3{"e4m3", -6, [](std::mt19937_64& r) {
                               uint32_t c;
                               do c = code(r, 256);
                               while ((c & 0x7F) == 0x7F);  // NaN
                               return minifloat(c, 4, 3, 7);
                           }};
const operand_format kE5M2{"e5m2", -14, [](std::mt19937_64& r) {
                               uint32_t c;
                               do c = code(r, 256);
                               while (((c >> 2) & 31) == 31);  // Inf, NaN
                               return minifloat(c, 5, 2, 15);
                           }};
const operand_format kBF16{"bf16", -126, [](std::mt19937_64& r) {
                               uint32_t c;
                               do c = code(r, 65536);
                               while (((c >> 7) & 255) == 255);
                               return bfloat(c << 16);
                           }};
const operand_format kFP16{"fp16", -14, [](std::mt19937_64& r) {
                               uint32_t c;
                               do c = code(r, 65536);
                               while (((c >> 10) & 31) == 31);
                               return minifloat(c, 5, 10, 15);
                           }};
const operand_format kE2M1{"e2m1", 0, [](std::mt19937_64& r) { return minifloat(code(r, 16), 2, 1, 1); }};
const operand_format kE3M2{"e3m2", -2, [](std::mt19937_64& r) { return minifloat(code(r, 64), 3, 2, 3); }};
const operand_format kE2M3{"e2m3", 0, [](std::mt19937_64& r) { return minifloat(code(r, 64), 2, 3, 1); }};

// A UE8M0 scale 2^(c - 127), c in 0..254; a UE4M3 one, any finite E4M3 code (its sign ignored).
float ue8m0(std::mt19937_64& r) { return std::ldexp(1.0f, static_cast<int>(code(r, 255)) - 127); }

// ---------------------------------------------------------------- the bundled plugins, as published

struct plugin_case {
    std::string name;
    std::vector<Param> params;
    acctest::instruction ins;                            // the published definition
    std::vector<const operand_format*> operand_formats;  // what a and b are drawn from
    altgrad_acc_scale_kind scales = ALTGRAD_ACC_SCALE_NONE;
};

acctest::instruction shape(int depth, int f, int halves, int group, output out) {
    acctest::instruction i;
    i.depth = depth;
    i.fraction_bits = f;
    i.halves = halves;
    i.group_size = group;
    i.out = out;
    return i;
}

// Each plugin with its defaults, the FP16-accumulator variants, and both
// scale kinds of mxf4nvf4.
std::vector<plugin_case> bundled_cases() {
    const std::vector<const operand_format*> fp8 = {&kE4M3, &kE5M2}, half = {&kBF16, &kFP16};
    const std::vector<const operand_format*> f8f6f4 = {&kE4M3, &kE5M2, &kE3M2, &kE2M3, &kE2M1};
    // A host passes every declared parameter, defaults filled in.
    const Param f32 = Param::text("accumulator", "float32"), f16 = Param::text("accumulator", "float16");
    return {
        {"sm90_wgmma_fp8", {f32}, shape(32, 13, 1, 0, output::e8m13), fp8},
        {"sm90_wgmma_fp8", {f16}, shape(32, 13, 1, 0, output::float16), fp8},
        {"sm90_wgmma_fp16", {f32}, shape(16, 25, 1, 0, output::float32), half},
        {"sm90_wgmma_fp16", {f16}, shape(16, 25, 1, 0, output::float16), {&kFP16}},
        {"sm89_mma_fp8", {f32}, shape(32, 13, 2, 0, output::e8m13), fp8},
        {"sm89_mma_fp8", {f16}, shape(32, 13, 2, 0, output::float16), fp8},
        {"sm80_mma_fp16", {f32}, shape(16, 24, 2, 0, output::float32), half},
        {"sm80_mma_fp16", {f16}, shape(16, 24, 2, 0, output::float16), {&kFP16}},
        {"sm100_tcgen05_fp8", {f32}, shape(32, 25, 1, 0, output::float32), f8f6f4},
        {"sm100_tcgen05_fp8", {f16}, shape(32, 25, 1, 0, output::float16), fp8},
        {"sm100_tcgen05_mxf8f6f4",
         {},
         shape(32, 25, 1, 0, output::float32),
         f8f6f4,
         ALTGRAD_ACC_SCALE_UE8M0_32},
        {"sm100_tcgen05_mxf4nvf4",
         {},
         shape(64, 35, 1, 16, output::float32),
         {&kE2M1},
         ALTGRAD_ACC_SCALE_UE8M0_32},
        {"sm100_tcgen05_mxf4nvf4",
         {},
         shape(64, 35, 1, 16, output::float32),
         {&kE2M1},
         ALTGRAD_ACC_SCALE_UE4M3_16},
    };
}

std::string case_name(const plugin_case& p) {
    std::string s = p.name;
    if (!p.params.empty()) s += " (" + agtest::params_text(p.params) + ")";
    if (p.scales == ALTGRAD_ACC_SCALE_UE4M3_16) s += " with UE4M3 scales";
    return s;
}

size_t scale_block(altgrad_acc_scale_kind kind) {
    return kind == ALTGRAD_ACC_SCALE_UE8M0_32 ? 32 : kind == ALTGRAD_ACC_SCALE_UE4M3_16 ? 16 : 0;
}

// The reference's operands of output (i, j).
acctest::operands reference_operands(const call& c, size_t i, size_t j) {
    acctest::operands x;
    x.a.assign(c.a.begin() + i * c.k, c.a.begin() + (i + 1) * c.k);
    x.b.assign(c.b.begin() + j * c.k, c.b.begin() + (j + 1) * c.k);
    x.a_min_exponent = c.a_min_exponent;
    x.b_min_exponent = c.b_min_exponent;
    x.block = static_cast<int>(scale_block(c.scale_kind));
    x.ue4m3 = c.scale_kind == ALTGRAD_ACC_SCALE_UE4M3_16;
    if (x.block != 0) {
        const size_t per_row = (c.k + x.block - 1) / x.block;
        x.scale_a.assign(c.a_scales.begin() + i * per_row, c.a_scales.begin() + (i + 1) * per_row);
        x.scale_b.assign(c.b_scales.begin() + j * per_row, c.b_scales.begin() + (j + 1) * per_row);
    }
    return x;
}

std::string floats_text(const std::vector<float>& v) {
    std::string s;
    char buf[40];
    for (float x : v) {
        std::snprintf(buf, sizeof buf, "%s%a", s.empty() ? "" : " ", x);
        s += buf;
    }
    return s;
}

// Every output of d against the reference, bit for bit; the first few
// differences described with their operands.
void expect_reference(const call& c, const std::vector<float>& d, const acctest::instruction& ins,
                      const std::string& what) {
    int shown = 0;
    size_t differing = 0;
    for (size_t i = 0; i < c.m; ++i)
        for (size_t j = 0; j < c.n; ++j) {
            const acctest::operands x = reference_operands(c, i, j);
            const float want = acctest::instruction_output(x, c.k, c.c[i * c.n + j], ins);
            const float got = d[i * c.n + j];
            if (fbits(got) == fbits(want)) continue;
            ++differing;
            if (shown++ < 3)
                ADD_FAILURE() << what << ": output (" << i << ", " << j << ") is " << std::hexfloat << got
                              << " (0x" << std::hex << fbits(got) << "), the reference gives "
                              << std::hexfloat << want << " (0x" << std::hex << fbits(want) << ")\n  c "
                              << c.c[i * c.n + j] << "\n  a " << floats_text(x.a) << "\n  b "
                              << floats_text(x.b) << "\n  scales " << floats_text(x.scale_a) << " | "
                              << floats_text(x.scale_b);
        }
    EXPECT_EQ(differing, 0u) << what << ": outputs differing from the reference, of " << c.m * c.n;
}

// A random C: a float32 of any exponent now and then, else a value near the
// products' scale; FP16 values for an FP16 accumulator.
float random_c(std::mt19937_64& r, output out) {
    if (out == output::float16) return kFP16.draw(r);
    const uint32_t pick = code(r, 8);
    if (pick == 0) return 0.0f;
    if (pick == 1) return bfloat(static_cast<uint32_t>(r()) & 0xFF7FFFFFu);  // any finite float32
    std::normal_distribution<float> normal(0.0f, 1.0f);
    return std::ldexp(normal(r), static_cast<int>(code(r, 40)) - 20);
}

float random_scale(std::mt19937_64& r, altgrad_acc_scale_kind kind) {
    if (kind == ALTGRAD_ACC_SCALE_UE8M0_32) return ue8m0(r);
    return kE4M3.draw(r);  // by magnitude: negative codes too
}

// m x n outputs of k products, a and b of the formats given.
call random_call(std::mt19937_64& r, const plugin_case& p, size_t m, size_t n, size_t k) {
    call c;
    c.m = m;
    c.n = n;
    c.k = k;
    const operand_format& fa = *p.operand_formats[code(r, static_cast<uint32_t>(p.operand_formats.size()))];
    const operand_format& fb = *p.operand_formats[code(r, static_cast<uint32_t>(p.operand_formats.size()))];
    c.a_min_exponent = fa.min_exponent;
    c.b_min_exponent = fb.min_exponent;
    for (size_t x = 0; x < m * k; ++x) c.a.push_back(fa.draw(r));
    for (size_t x = 0; x < n * k; ++x) c.b.push_back(fb.draw(r));
    for (size_t x = 0; x < m * n; ++x) c.c.push_back(random_c(r, p.ins.out));
    c.scale_kind = p.scales;
    if (p.scales != ALTGRAD_ACC_SCALE_NONE) {
        const size_t per_row = (k + scale_block(p.scales) - 1) / scale_block(p.scales);
        for (size_t x = 0; x < m * per_row; ++x) c.a_scales.push_back(random_scale(r, p.scales));
        for (size_t x = 0; x < n * per_row; ++x) c.b_scales.push_back(random_scale(r, p.scales));
    }
    return c;
}

// ---------------------------------------------------------------- tests

TEST(AccumulatorPlugins, EntryIsAnAccumulatorOfAbi15) {
    for (const plugin_case& p : bundled_cases()) {
        const altgrad_entry& e = acctest::accumulator_entry(p.name);
        EXPECT_EQ(e.abi_version.major, 1u) << p.name;
        EXPECT_EQ(e.abi_version.minor, 5u) << p.name;
        EXPECT_STREQ(e.descriptor->name, p.name.c_str());
        EXPECT_TRUE(e.format == nullptr && e.intervention == nullptr && e.diagnostic == nullptr &&
                    e.transform == nullptr && e.accumulator != nullptr)
            << p.name;
    }
}

TEST(AccumulatorPlugins, InfoIsThePublishedShape) {
    for (const plugin_case& p : bundled_cases()) {
        SCOPED_TRACE(case_name(p));
        const Accumulator acc(p.name, p.params);
        const altgrad_accumulator_info& i = acc.info();
        EXPECT_EQ(i.depth, static_cast<uint32_t>(p.ins.depth));
        EXPECT_EQ(i.fraction_bits, static_cast<uint32_t>(p.ins.fraction_bits));
        EXPECT_EQ(i.halves, static_cast<uint32_t>(p.ins.halves));
        EXPECT_EQ(i.group_size, static_cast<uint32_t>(p.ins.group_size));
        const altgrad_acc_output want = p.ins.out == output::float16 ? ALTGRAD_ACC_OUTPUT_FLOAT16
                                        : p.ins.out == output::e8m13 ? ALTGRAD_ACC_OUTPUT_E8M13
                                                                     : ALTGRAD_ACC_OUTPUT_FLOAT32;
        EXPECT_EQ(i.output, want);
        EXPECT_NE(i.scale_kinds & (1u << p.scales), 0u);
        EXPECT_EQ(i.memory_kinds, 1u << ALTGRAD_MEMORY_HOST);
    }
}

// 40 random calls per case: full depth, a shorter k and k = 0, odd tile shapes.
TEST(AccumulatorPlugins, RandomOperandsGiveTheReferenceBits) {
    std::mt19937_64 r(20261127);
    for (const plugin_case& p : bundled_cases()) {
        SCOPED_TRACE(case_name(p));
        const Accumulator acc(p.name, p.params);
        for (int round = 0; round < 40; ++round) {
            const size_t depth = static_cast<size_t>(p.ins.depth);
            const size_t k = round % 4 == 1 ? 1 + code(r, static_cast<uint32_t>(depth))
                             : round == 2   ? 0
                                            : depth;
            const call c = random_call(r, p, 1 + code(r, 9), 1 + code(r, 9), k);
            expect_reference(c, acc.dot_add(c), p.ins, case_name(p) + ", round " + std::to_string(round));
        }
    }
}

// The instruction sets whose loops this CPU runs: the baseline, and AVX2 and AVX-512 where it has them.
std::vector<altgrad::sdk::detail::vector_isa> this_cpus_isas() {
    namespace sdk = altgrad::sdk;
    std::vector<sdk::detail::vector_isa> isas = {sdk::detail::vector_isa::baseline};
    if (sdk::detail::cpu_vector_isa() != sdk::detail::vector_isa::baseline)
        isas.push_back(sdk::detail::vector_isa::avx2);
    if (sdk::detail::cpu_vector_isa() == sdk::detail::vector_isa::avx512)
        isas.push_back(sdk::detail::vector_isa::avx512);
    return isas;
}

// The SDK's fused_dot_add (what every bundled plugin runs) with the loops of
// each instruction set this CPU has: the reference's bits from each.
TEST(SdkFusedDotAdd, EveryInstructionSetGivesTheReferenceBits) {
    namespace sdk = altgrad::sdk;
    const std::vector<sdk::detail::vector_isa> isas = this_cpus_isas();
    std::mt19937_64 r(7);
    for (const plugin_case& p : bundled_cases()) {
        SCOPED_TRACE(case_name(p));
        sdk::instruction ins;
        ins.depth = static_cast<uint32_t>(p.ins.depth);
        ins.group_size = static_cast<uint32_t>(p.ins.group_size);
        ins.fraction_bits = static_cast<uint32_t>(p.ins.fraction_bits);
        ins.halves = static_cast<uint32_t>(p.ins.halves);
        ins.output = p.ins.out == output::float16 ? ALTGRAD_ACC_OUTPUT_FLOAT16
                     : p.ins.out == output::e8m13 ? ALTGRAD_ACC_OUTPUT_E8M13
                                                  : ALTGRAD_ACC_OUTPUT_FLOAT32;
        ins.scale_kinds = 1u << p.scales;
        for (int round = 0; round < 10; ++round) {
            const call c =
                random_call(r, p, 1 + code(r, 17), 1 + code(r, 17), static_cast<size_t>(p.ins.depth));
            for (sdk::detail::vector_isa isa : isas) {
                std::vector<float> d(c.m * c.n);
                sdk::fused_dot_add(ins, c.args(d.data()), isa);
                expect_reference(c, d, p.ins,
                                 case_name(p) + ", loops " + std::to_string(static_cast<int>(isa)));
            }
        }
    }
}

// The SDK's float path (fused_dot_add.hpp: FP8-sized significands, F = 13)
// where it must step aside: float32 operands of 8 significant bits at any
// exponent (products that overflow float32, or that count and are
// subnormal), results past E8M13's range and in its subnormals, a float32
// subnormal operand now and then; with each instruction set, against the
// reference.
TEST(SdkFusedDotAdd, TheFloatPathsEdgesGiveTheReferenceBits) {
    namespace sdk = altgrad::sdk;
    const operand_format wide{"float32 of 8 significant bits", -126, [](std::mt19937_64& r) {
                                  const float significand = 1.0f + static_cast<float>(code(r, 128)) / 128.0f;
                                  const int exponent = static_cast<int>(code(r, 280)) - 150;  // -150 .. 129
                                  const float v = std::ldexp(significand, std::min(exponent, 127));
                                  return code(r, 2) ? -v : v;
                              }};
    const std::vector<sdk::detail::vector_isa> isas = this_cpus_isas();
    std::mt19937_64 r(29);
    for (const int halves : {1, 2}) {
        const plugin_case p{"fp8-like", {}, shape(32, 13, halves, 0, output::e8m13), {&wide, &kE4M3}};
        sdk::instruction ins;
        ins.depth = 32;
        ins.fraction_bits = 13;
        ins.halves = static_cast<uint32_t>(halves);
        ins.output = ALTGRAD_ACC_OUTPUT_E8M13;
        for (int round = 0; round < 40; ++round) {
            const call c = random_call(r, p, 1 + code(r, 9), 1 + code(r, 17), 32);
            for (sdk::detail::vector_isa isa : isas) {
                std::vector<float> d(c.m * c.n);
                sdk::fused_dot_add(ins, c.args(d.data()), isa);
                expect_reference(c, d, p.ins,
                                 "halves " + std::to_string(halves) + ", round " + std::to_string(round) +
                                     ", loops " + std::to_string(static_cast<int>(isa)));
            }
        }
    }
}

// ---------------------------------------------------------------- edge cases

// One output of k products, all zero but those set, C 0; scales of 1 where the case takes them.
call one_output(const plugin_case& p, int32_t min_exponent, size_t k = 0) {
    call c;
    c.m = c.n = 1;
    c.k = k ? k : static_cast<size_t>(p.ins.depth);
    c.a.assign(c.k, 0.0f);
    c.b.assign(c.k, 0.0f);
    c.c = {0.0f};
    c.a_min_exponent = c.b_min_exponent = min_exponent;
    c.scale_kind = p.scales;
    if (p.scales != ALTGRAD_ACC_SCALE_NONE) {
        const size_t per_row = (c.k + scale_block(p.scales) - 1) / scale_block(p.scales);
        c.a_scales.assign(per_row, 1.0f);
        c.b_scales.assign(per_row, 1.0f);
    }
    return c;
}

struct edge {
    std::string what;
    call c;
};

std::vector<edge> edge_cases(const plugin_case& p) {
    const bool fp4 = p.ins.group_size > 0, half = p.ins.out == output::float16;
    const int32_t min = fp4 ? 0 : p.operand_formats[0]->min_exponent;
    const size_t k = static_cast<size_t>(p.ins.depth);
    const float inf = INFINITY, big = fp4 ? 6.0f : p.operand_formats[0] == &kBF16 ? 0x1p100f : 448.0f;
    std::vector<edge> out;
    auto add = [&](const std::string& what, auto edit, size_t calls_k = 0) {
        call c = one_output(p, min, calls_k);
        edit(c);
        out.push_back({what, c});
    };
    add("zeros of both signs, C -0", [&](call& c) {
        for (size_t l = 0; l < c.k; ++l) {
            c.a[l] = l % 2 ? -0.0f : 0.0f;
            c.b[l] = l % 3 ? 0.0f : -0.0f;
        }
        c.c[0] = -0.0f;
    });
    add("cancellation to zero", [&](call& c) {
        c.a[0] = 1.5f;
        c.b[0] = 2.0f;
        c.a[k - 1] = -1.5f;
        c.b[k - 1] = 2.0f;
    });
    add("cancellation leaving a small residue", [&](call& c) {
        c.a[0] = big;
        c.b[0] = 1.0f;
        c.a[1] = -big;
        c.b[1] = 1.0f;
        c.a[2] = 0.5f;
        c.b[2] = 0.5f;
        c.c[0] = half ? 0.0f : 0x1p-20f;
    });
    add("a wide exponent spread", [&](call& c) {
        for (size_t l = 0; l < c.k; ++l) {
            c.a[l] = l % 2 ? big : (fp4 ? 0.5f : std::ldexp(1.0f, min));
            c.b[l] = l % 3 ? big : (fp4 ? 0.5f : std::ldexp(1.0f, min - 2));
        }
    });
    if (!fp4) {
        add("subnormal operands", [&](call& c) {
            for (size_t l = 0; l < c.k; ++l) {
                c.a[l] = std::ldexp(static_cast<float>(1 + l % 3), min - 3);
                c.b[l] = l % 5 ? std::ldexp(static_cast<float>(1 + l % 7), min - 3) : 1.0f;
            }
        });
        add("a NaN operand", [&](call& c) { c.a[k - 1] = NAN; });
        add("Inf times 0", [&](call& c) { c.a[0] = inf; });
        add("+Inf and -Inf products", [&](call& c) {
            c.a[0] = c.a[k - 1] = inf;
            c.b[0] = 1.0f;
            c.b[k - 1] = -1.0f;
        });
        add("an Inf operand in the last product", [&](call& c) {
            c.a[k - 1] = -inf;
            c.b[k - 1] = 2.0f;
            c.a[0] = c.b[0] = 1.0f;
        });
    }
    add("C NaN", [&](call& c) { c.c[0] = NAN; });
    add("C -Inf", [&](call& c) { c.c[0] = -inf; });
    add("C at the largest output value, plus products (overflow)", [&](call& c) {
        c.c[0] = half ? 65504.0f : p.ins.out == output::e8m13 ? 0x1.fff8p127f : 0x1.fffffep127f;
        c.a[0] = c.b[0] = big;
        c.a[1] = c.b[1] = big;
    });
    add("a tiny C below every product", [&](call& c) {
        c.c[0] = half ? 0x1p-24f : 0x1p-149f;
        c.a[0] = 1.0f;
        c.b[0] = 0.5f;
    });
    add(
        "k = 1",
        [&](call& c) {
            c.a[0] = c.b[0] = -1.5f;
            c.c[0] = 1.0f;
        },
        1);
    if (p.scales != ALTGRAD_ACC_SCALE_NONE) {
        const bool ue8m0 = p.scales == ALTGRAD_ACC_SCALE_UE8M0_32;
        add("a NaN scale", [&](call& c) { c.b_scales.back() = NAN; });
        add("the largest scales (overflow)", [&](call& c) {
            c.a[0] = c.b[0] = big;
            c.a_scales[0] = c.b_scales[0] = ue8m0 ? 0x1p127f : 448.0f;
        });
        add("the smallest scales", [&](call& c) {
            c.a[0] = c.b[0] = big;
            c.a_scales[0] = c.b_scales[0] = ue8m0 ? 0x1p-127f : 0x1p-9f;
            c.c[0] = 0x1p-140f;
        });
        if (!ue8m0) {
            add("a zero and a negative UE4M3 scale", [&](call& c) {
                c.a[0] = c.b[0] = big;
                c.a[k - 1] = c.b[k - 1] = 1.5f;
                c.a_scales[0] = 0.0f;
                c.b_scales.back() = -3.0f;
            });
        }
    }
    return out;
}

TEST(AccumulatorPlugins, EdgeCasesGiveTheReferenceBits) {
    for (const plugin_case& p : bundled_cases()) {
        SCOPED_TRACE(case_name(p));
        const Accumulator acc(p.name, p.params);
        for (const edge& e : edge_cases(p))
            expect_reference(e.c, acc.dot_add(e.c), p.ins, case_name(p) + ": " + e.what);
    }
}

// ---------------------------------------------------------------- values worked out by hand

// d of one output: a and b (k of them), c, the operands' smallest normal exponent.
float one(const Accumulator& acc, std::vector<float> a, std::vector<float> b, float c, int32_t min_exponent,
          std::vector<float> a_scales = {}, std::vector<float> b_scales = {},
          altgrad_acc_scale_kind kind = ALTGRAD_ACC_SCALE_NONE) {
    call x;
    x.m = x.n = 1;
    x.k = a.size();
    x.a = std::move(a);
    x.b = std::move(b);
    x.c = {c};
    x.a_min_exponent = x.b_min_exponent = min_exponent;
    x.scale_kind = kind;
    x.a_scales = std::move(a_scales);
    x.b_scales = std::move(b_scales);
    return acc.dot_add(x)[0];
}

const std::vector<Param> kFloat32 = {Param::text("accumulator", "float32")};

// 1 x 1 + 2^-7 x 2^-7: Hopper's FP8 path keeps 13 bits below the largest
// exponent and loses 2^-14 (the 14-bit accumulation DeepGEMM #43 describes);
// Blackwell's keeps 25 and gives 1 + 2^-14. A negative term of -1.5 2^-14 is
// truncated toward zero, to nothing (the exact sum would round to 1 - 2^-13).
TEST(AccumulatorPlugins, HopperFp8KeepsThirteenBitsBlackwellTwentyFive) {
    const Accumulator hopper("sm90_wgmma_fp8", kFloat32), blackwell("sm100_tcgen05_fp8", kFloat32);
    EXPECT_EQ(one(hopper, {1.0f, 0x1p-7f}, {1.0f, 0x1p-7f}, 0.0f, -6), 1.0f);
    EXPECT_EQ(one(blackwell, {1.0f, 0x1p-7f}, {1.0f, 0x1p-7f}, 0.0f, -6), 1.0f + 0x1p-14f);
    EXPECT_EQ(one(hopper, {1.0f, -0x1.8p-7f}, {1.0f, 0x1p-7f}, 0.0f, -6), 1.0f);
    EXPECT_EQ(one(blackwell, {1.0f, -0x1.8p-7f}, {1.0f, 0x1p-7f}, 0.0f, -6), 1.0f - 0x1.8p-14f);
}

// Hopper's FP8 path rounds even a lone C to E8M13: 1 + 2^-20 becomes 1;
// its BF16 path (float32 output) keeps it.
TEST(AccumulatorPlugins, HopperFp8ResultIsE8M13) {
    const Accumulator fp8("sm90_wgmma_fp8", kFloat32), bf16("sm90_wgmma_fp16", kFloat32);
    EXPECT_EQ(one(fp8, {}, {}, 1.0f + 0x1p-20f, -6), 1.0f);
    EXPECT_EQ(one(fp8, {}, {}, -(1.0f + 0x1p-13f + 0x1p-20f), -6), -(1.0f + 0x1p-13f));
    EXPECT_EQ(one(bf16, {}, {}, 1.0f + 0x1p-20f, -126), 1.0f + 0x1p-20f);
}

// Ampere's m16n8k16 is two fused dot-adds of 8: eight products of 2^-26 in
// the first half sum exactly to 2^-23, which the second half then adds to 1
// (1 + 2^-23, within 24 bits); one 16-wide fused dot-add (Hopper's, 25 bits)
// truncates each 2^-26 against 1 and gives 1.
TEST(AccumulatorPlugins, AmpereRunsTwoHalvesInSequence) {
    const Accumulator ampere("sm80_mma_fp16", kFloat32), hopper("sm90_wgmma_fp16", kFloat32);
    std::vector<float> a(16, 0x1p-13f), b(16, 0x1p-13f);
    for (size_t l = 8; l < 16; ++l) a[l] = b[l] = 0.0f;
    a[15] = b[15] = 1.0f;
    EXPECT_EQ(one(ampere, a, b, 0.0f, -126), 1.0f + 0x1p-23f);
    EXPECT_EQ(one(hopper, a, b, 0.0f, -126), 1.0f);
}

// FP16 accumulators round to nearest even: 1 + 2^-11 is a tie (to 1), 1 +
// 3 2^-12 is above it (to 1 + 2^-10).
TEST(AccumulatorPlugins, Fp16AccumulatorsRoundToNearestEven) {
    const Accumulator acc("sm90_wgmma_fp8", {Param::text("accumulator", "float16")});
    EXPECT_EQ(one(acc, {0x1p-6f}, {0x1p-5f}, 1.0f, -6), 1.0f);
    EXPECT_EQ(one(acc, {0x1.8p-6f}, {0x1p-5f}, 1.0f, -6), 1.0f + 0x1p-10f);
    EXPECT_EQ(one(acc, {0x1p-6f}, {0x1p-5f}, 1.0f + 0x1p-10f, -6), 1.0f + 0x1p-9f);  // the tie, from odd: up
}

// Block scales: mxf8f6f4's UE8M0 pair adds its exponents (1 x 1 x 2^10 x 2^-3 = 2^7);
// mxf4nvf4 multiplies each group of 16 by its scales, UE4M3 by magnitude:
// 64 products of 1 with scales 1.5 and -2 give 4 x 16 x 3 = 192.
TEST(AccumulatorPlugins, BlockScalesApplyAsPublished) {
    const Accumulator mx8("sm100_tcgen05_mxf8f6f4"), mx4("sm100_tcgen05_mxf4nvf4");
    std::vector<float> a(32, 0.0f), b(32, 0.0f);
    a[0] = b[0] = 1.0f;
    EXPECT_EQ(one(mx8, a, b, 0.0f, -6, {0x1p10f}, {0x1p-3f}, ALTGRAD_ACC_SCALE_UE8M0_32), 0x1p7f);
    const std::vector<float> ones(64, 1.0f);
    EXPECT_EQ(one(mx4, ones, ones, 0.0f, 0, std::vector<float>(4, 1.5f), std::vector<float>(4, -2.0f),
                  ALTGRAD_ACC_SCALE_UE4M3_16),
              192.0f);
    EXPECT_EQ(one(mx4, ones, ones, 0.0f, 0, {1.0f, 1.0f}, {1.0f, 1.0f}, ALTGRAD_ACC_SCALE_UE8M0_32), 64.0f);
}

// ---------------------------------------------------------------- refusals

TEST(AccumulatorPlugins, BadArgumentsAreRefusedNamingTheField) {
    const Accumulator fp8("sm90_wgmma_fp8", kFloat32), mx4("sm100_tcgen05_mxf4nvf4");
    const plugin_case fp8_case = bundled_cases()[0];
    struct refusal {
        const Accumulator* acc;
        std::string what;
        std::function<void(altgrad_accumulator_args&)> edit;
        altgrad_status want;
        std::string message;
    };
    const std::vector<refusal> refusals = {
        {&fp8, "k 33", [](auto& a) { a.k = 33; }, ALTGRAD_STATUS_INVALID_ARGUMENT,
         "dot_add: k 33 is more than the depth 32"},
        {&fp8, "a_min_exponent 200", [](auto& a) { a.a_min_exponent = 200; }, ALTGRAD_STATUS_INVALID_ARGUMENT,
         "dot_add: a_min_exponent 200 is outside -149..127"},
        {&fp8, "a NULL", [](auto& a) { a.a = nullptr; }, ALTGRAD_STATUS_INVALID_ARGUMENT,
         "dot_add: a is NULL"},
        {&fp8, "d overlapping a", [](auto& a) { a.d = const_cast<float*>(a.a); },
         ALTGRAD_STATUS_INVALID_ARGUMENT, "dot_add: d overlaps a"},
        {&fp8, "a short struct", [](auto& a) { a.struct_size = offsetof(altgrad_accumulator_args, memory); },
         ALTGRAD_STATUS_INVALID_ARGUMENT, "dot_add: args is NULL or smaller than the v1.5 struct"},
        {&fp8, "CUDA memory", [](auto& a) { a.memory = ALTGRAD_MEMORY_CUDA; }, ALTGRAD_STATUS_UNSUPPORTED,
         "dot_add: memory kind 1 is not among the instruction's memory_kinds"},
        {&fp8, "UE8M0 scales", [](auto& a) { a.scale_kind = ALTGRAD_ACC_SCALE_UE8M0_32; },
         ALTGRAD_STATUS_UNSUPPORTED, "dot_add: scale kind 1 is not among the instruction's scale_kinds 1"},
        {&mx4, "E4M3 operands", [](auto& a) { a.b_min_exponent = -6; }, ALTGRAD_STATUS_UNSUPPORTED,
         "dot_add: this block-scaled FP4 instruction multiplies E2M1 operands only: b_min_exponent must be "
         "0, "
         "got -6"},
    };
    for (const refusal& r : refusals) {
        SCOPED_TRACE(r.what);
        call c = one_output(r.acc == &mx4 ? bundled_cases().back() : fp8_case, r.acc == &mx4 ? 0 : -6);
        std::vector<float> d(1);
        altgrad_accumulator_args a = c.args(d.data());
        r.edit(a);
        std::string message;
        EXPECT_EQ(r.acc->dot_add_raw(a, message), r.want);
        EXPECT_EQ(message, r.message);
    }
}

TEST(AccumulatorPlugins, AnUnknownAccumulatorTypeIsRefused) {
    try {
        const Accumulator acc("sm90_wgmma_fp8", {Param::text("accumulator", "bfloat16")});
        FAIL() << "accumulator = bfloat16 was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(
            std::string(e.what()).find("parameter 'accumulator' must be float32 or float16, got 'bfloat16'"),
            std::string::npos)
            << e.what();
    }
}

}  // namespace
