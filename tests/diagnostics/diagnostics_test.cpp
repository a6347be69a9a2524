// The bundled diagnostic plugins (range, stiffness, grid_alignment,
// bit_stall, ulp, grad_stiffness, kurtosis, attention_entropy) loaded through
// the host's registry and diagnostic_handle, measuring tensors whose formats
// come from format_handle, against values computed by hand.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include <altgrad/sdk/diagnostic_plugin.hpp>

#include "plugins/diagnostic_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "util/error.hpp"

using namespace altgrad::host;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

registry& plugins() {
    static registry r(ALTGRAD_BUNDLED_PLUGIN_DIR);
    return r;
}

std::shared_ptr<format_handle> format(const std::string& name) {
    return format_handle::create(plugins().load(name));
}
std::shared_ptr<diagnostic_handle> diagnostic(const std::string& name, const given_params& params = {}) {
    return diagnostic_handle::create(plugins().load(name), params);
}

altgrad_tensor_view view(const std::vector<float>& data, const format_handle& f, float scale = 1.0f,
                         altgrad_tensor_role role = ALTGRAD_TENSOR_WEIGHT) {
    altgrad_tensor_view v{};
    v.struct_size = sizeof v;
    v.name = "t";
    v.role = role;
    v.data = data.empty() ? nullptr : data.data();
    v.count = data.size();
    v.ndim = 1;
    v.shape[0] = static_cast<int64_t>(data.size());
    v.memory = ALTGRAD_MEMORY_HOST;
    v.format = f.ref();
    v.scale = scale;
    return v;
}

// A WEIGHT view with its previous values (same count as data).
altgrad_tensor_view moved(const std::vector<float>& data, const std::vector<float>& previous,
                          const format_handle& f, float scale = 1.0f) {
    altgrad_tensor_view v = view(data, f, scale);
    v.previous = previous.empty() ? nullptr : previous.data();
    return v;
}

// A view named `name` of the given role.
altgrad_tensor_view named(const std::vector<float>& data, const format_handle& f, const char* name,
                          altgrad_tensor_role role, float scale = 1.0f) {
    altgrad_tensor_view v = view(data, f, scale, role);
    v.name = name;
    return v;
}

// An ATTENTION_PROBS view of shape [b, h, t, k].
altgrad_tensor_view probs(const std::vector<float>& data, const format_handle& f, int64_t b, int64_t h,
                          int64_t t, int64_t k) {
    altgrad_tensor_view v = named(data, f, "blocks.0.attn.probs", ALTGRAD_TENSOR_ATTENTION_PROBS);
    v.ndim = 4;
    v.shape[0] = b;
    v.shape[1] = h;
    v.shape[2] = t;
    v.shape[3] = k;
    return v;
}

// The message of the error measure throws ("" when it does not).
std::string measure_error(diagnostic_handle& d, const std::vector<altgrad_tensor_view>& views) {
    try {
        d.measure(0, views);
    } catch (const error& e) {
        return e.what();
    }
    return "";
}

// name -> value for tensor `index`.
std::map<std::string, double> values_of(const std::vector<diagnostic_value>& all, uint32_t index = 0) {
    std::map<std::string, double> m;
    for (const diagnostic_value& v : all)
        if (v.tensor_index == index) m[v.name] = v.value;
    return m;
}

}  // namespace

TEST(Diagnostics, LoadAsDiagnosticsWithTheirInterests) {
    const uint32_t w = 1u << ALTGRAD_TENSOR_WEIGHT;
    EXPECT_EQ(diagnostic("stiffness")->interests(), w);
    EXPECT_EQ(diagnostic("grid_alignment")->interests(), w);
    const auto range = diagnostic("range");
    EXPECT_TRUE(range->interested_in(ALTGRAD_TENSOR_WEIGHT));
    EXPECT_TRUE(range->interested_in(ALTGRAD_TENSOR_GRADIENT));
    EXPECT_TRUE(range->interested_in(ALTGRAD_TENSOR_ACTIVATION));
    EXPECT_TRUE(range->interested_in(ALTGRAD_TENSOR_OUTPUT_GRADIENT));
    EXPECT_FALSE(range->interested_in(ALTGRAD_TENSOR_ATTENTION_PROBS));
    EXPECT_THROW(diagnostic("e3m4"), error);  // a format, not a diagnostic
    EXPECT_THROW(format_handle::create(plugins().load("range")), error);
}

TEST(Stiffness, E3M4ByHand) {
    const auto f = format("e3m4");
    ASSERT_EQ(f->info().mantissa_bits, 4u);
    // 0.75: floor(log2 0.75) = -1, S = 2^(-1-4) = 2^-5.
    const std::vector<float> one = {0.75f};
    auto v = values_of(diagnostic("stiffness")->measure(0, {view(one, *f)}));
    EXPECT_EQ(v["stiffness_mean"], 0.03125);
    EXPECT_EQ(v["stiffness_median"], 0.03125);
    // 3.0 -> 2^(1-4); -0.1 -> 2^(-4-4); 0 skipped; Inf skipped and counted.
    const std::vector<float> many = {0.75f, 3.0f, -0.1f, 0.0f, kInf};
    v = values_of(diagnostic("stiffness")->measure(0, {view(many, *f)}));
    EXPECT_DOUBLE_EQ(v["stiffness_mean"], (0.125 + 0.03125 + 0.00390625) / 3);
    EXPECT_EQ(v["stiffness_median"], 0.03125);
    EXPECT_EQ(v["stiffness_min"], 0.00390625);
    EXPECT_EQ(v["stiffness_max"], 0.125);
    EXPECT_EQ(v["nonfinite_count"], 1.0);
}

TEST(Stiffness, ScaleIsInUnitsOfW) {
    const auto f = format("e3m4");
    const std::vector<float> w = {0.75f};
    // Power-of-two scale: 0.75*4 = 3 -> 2^-3, / 4 = 2^-5 (unchanged).
    EXPECT_EQ(values_of(diagnostic("stiffness")->measure(0, {view(w, *f, 4.0f)}))["stiffness_mean"], 0.03125);
    // Scale 3: 2.25 -> 2^(1-4) = 0.125, / 3.
    EXPECT_DOUBLE_EQ(values_of(diagnostic("stiffness")->measure(0, {view(w, *f, 3.0f)}))["stiffness_mean"],
                     0.125 / 3);
}

TEST(Stiffness, E0M7IsConstantOneOver128) {
    const auto f = format("e0m7");
    const std::vector<float> w = {0.5f, -0.25f, 0.01f, 0.9f};
    auto v = values_of(diagnostic("stiffness")->measure(0, {view(w, *f)}));
    EXPECT_EQ(v["stiffness_mean"], 1.0 / 128);
    EXPECT_EQ(v["stiffness_median"], 1.0 / 128);
    EXPECT_EQ(v["stiffness_min"], 1.0 / 128);
    EXPECT_EQ(v["stiffness_max"], 1.0 / 128);
    EXPECT_EQ(values_of(diagnostic("stiffness")->measure(0, {view(w, *f, 2.0f)}))["stiffness_mean"],
              1.0 / 256);
}

TEST(GridAlignment, E3M4ByHand) {
    const auto f = format("e3m4");
    // [0.25, 0.5) has step 1/64: 0.3 * 64 = 19.2 -> 19/64 = 0.296875.
    // 0.75 (24/32) and 1.0 are on the grid. NaN is skipped.
    const std::vector<float> w = {0.3f, 0.75f, 1.0f, kNaN};
    const double e = static_cast<double>(0.3f) - 0.296875;
    auto v = values_of(diagnostic("grid_alignment")->measure(0, {view(w, *f)}));
    EXPECT_DOUBLE_EQ(v["max_abs_error"], e);
    EXPECT_DOUBLE_EQ(v["mean_abs_error"], e / 3);
    EXPECT_DOUBLE_EQ(v["mse"], e * e / 3);
    EXPECT_EQ(v["nonfinite_count"], 1.0);
}

TEST(GridAlignment, E0M7) {
    const auto f = format("e0m7");
    // 0.3 * 128 = 38.4 -> 38/128 = 0.296875 too.
    const std::vector<float> w = {0.3f};
    auto v = values_of(diagnostic("grid_alignment")->measure(0, {view(w, *f)}));
    EXPECT_DOUBLE_EQ(v["max_abs_error"], static_cast<double>(0.3f) - 0.296875);
}

TEST(Range, E3M4OverflowAndUnderflowByHand) {
    const auto f = format("e3m4");
    ASSERT_EQ(f->info().max_finite, 15.5);
    // 8 finite elements. Overflow (|x| > 15.5): 20, -16, 15.7 (TE counts the
    // raw magnitude, even though 15.7 rounds to 15.5). Underflow: 0.005 is
    // below half the smallest subnormal 2^-6 -> 0; 0.01 rounds up to 2^-6; 0
    // is not counted.
    const std::vector<float> x = {20.0f, -16.0f, 15.5f, 15.7f, 0.005f, 0.01f, 0.0f, 1.0f, kNaN};
    auto v = values_of(diagnostic("range")->measure(7, {view(x, *f, 1.0f, ALTGRAD_TENSOR_ACTIVATION)}));
    EXPECT_EQ(v["overflow_rate"], 3.0 / 8);
    EXPECT_EQ(v["underflow_rate"], 1.0 / 8);
    EXPECT_EQ(v["amax"], 20.0);
    EXPECT_DOUBLE_EQ(v["dynamic_range"], std::log2(20.0 / static_cast<double>(0.005f)));
    EXPECT_EQ(v["nonfinite_count"], 1.0);
}

TEST(Range, ScaleAndSeveralTensors) {
    const auto e3m4 = format("e3m4");
    const auto e5m2 = format("e5m2");
    const std::vector<float> a = {20.0f, 1.0f};
    const std::vector<float> b = {1.0e6f, 1.0f, 2.0f, 4.0f};
    const auto all = diagnostic("range")->measure(0, {view(a, *e3m4, 0.5f), view(b, *e5m2)});
    auto va = values_of(all, 0), vb = values_of(all, 1);
    EXPECT_EQ(va["overflow_rate"], 0.0);  // 20 * 0.5 = 10 fits
    EXPECT_EQ(va["amax"], 20.0);          // amax is of x, unscaled
    EXPECT_EQ(va["dynamic_range"], std::log2(20.0));
    EXPECT_EQ(vb["overflow_rate"], 0.25);  // 1e6 > 57344
    EXPECT_EQ(vb["dynamic_range"], std::log2(1.0e6));
}

TEST(Diagnostics, EmptyAndAllNaNTensorsGiveNaN) {
    const auto f = format("e3m4");
    const std::vector<float> empty;
    const std::vector<float> nans = {kNaN, kInf, -kInf};
    for (const char* name : {"range", "stiffness", "grid_alignment"}) {
        SCOPED_TRACE(name);
        const auto all = diagnostic(name)->measure(0, {view(empty, *f), view(nans, *f)});
        for (const diagnostic_value& v : all) {
            SCOPED_TRACE(v.name);
            if (v.name == "nonfinite_count") EXPECT_EQ(v.value, v.tensor_index == 0 ? 0.0 : 3.0);
            else EXPECT_TRUE(std::isnan(v.value));
        }
        EXPECT_FALSE(values_of(all, 1).empty());
    }
    // No tensors at all: no values, no crash.
    EXPECT_TRUE(diagnostic("range")->measure(0, std::vector<altgrad_tensor_view>{}).empty());
}

TEST(Diagnostics, AllZeroTensor) {
    const auto f = format("e3m4");
    const std::vector<float> zeros = {0.0f, -0.0f};
    auto r = values_of(diagnostic("range")->measure(0, {view(zeros, *f)}));
    EXPECT_EQ(r["amax"], 0.0);
    EXPECT_EQ(r["underflow_rate"], 0.0);
    EXPECT_TRUE(std::isnan(r["dynamic_range"]));
    EXPECT_TRUE(
        std::isnan(values_of(diagnostic("stiffness")->measure(0, {view(zeros, *f)}))["stiffness_mean"]));
    EXPECT_EQ(values_of(diagnostic("grid_alignment")->measure(0, {view(zeros, *f)}))["mse"], 0.0);
}

TEST(Diagnostics, ErrorsNameThePlugin) {
    const auto f = format("e3m4");
    const std::vector<float> x = {1.0f};
    altgrad_tensor_view v = view(x, *f);
    v.memory = ALTGRAD_MEMORY_CUDA;
    try {
        diagnostic("grid_alignment")->measure(0, {v});
        FAIL() << "no error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("plugin 'grid_alignment'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("unsupported"), std::string::npos) << e.what();
    }
    v = view(x, *f, 0.0f);  // the format refuses scale 0
    try {
        diagnostic("range")->measure(0, {v});
        FAIL() << "no error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("plugin 'range'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("format 'e3m4'"), std::string::npos) << e.what();
    }
}

TEST(ValueSink, ChecksCapacityNamesAndIndices) {
    altgrad_diagnostic_value items[2] = {};
    for (auto& v : items) v.struct_size = sizeof v;  // the host sets each element's size
    altgrad::sdk::value_sink sink(items, 2, 1);
    sink.add(0, "a.b_1", 1.0);
    EXPECT_THROW(sink.add(0, "Bad", 1.0), altgrad::sdk::plugin_error);
    EXPECT_THROW(sink.add(0, "", 1.0), altgrad::sdk::plugin_error);
    EXPECT_THROW(sink.add(0, std::string(64, 'a').c_str(), 1.0), altgrad::sdk::plugin_error);
    EXPECT_THROW(sink.add(1, "x", 1.0), altgrad::sdk::plugin_error);
    sink.add(ALTGRAD_ALL_TENSORS, "x", 2.0);
    try {
        sink.add(0, "y", 3.0);
        FAIL() << "no error";
    } catch (const altgrad::sdk::plugin_error& e) {
        EXPECT_EQ(e.status(), ALTGRAD_STATUS_INVALID_ARGUMENT);
    }
    EXPECT_EQ(sink.count(), 2u);
    EXPECT_STREQ(items[1].name, "x");
    EXPECT_EQ(items[1].tensor_index, ALTGRAD_ALL_TENSORS);
}

// ABI arrays are strided by their elements' struct_size (status.h): a host
// with grown value and view structs still reads and passes correctly.
TEST(ValueSink, WritesAtTheHostsStride) {
    struct grown_value {
        altgrad_diagnostic_value v;
        double extra;
    };
    grown_value items[2] = {};
    for (auto& g : items) {
        g.v.struct_size = sizeof(grown_value);
        g.extra = 42;
    }
    altgrad::sdk::value_sink sink(&items[0].v, 2, 1);
    sink.add(0, "a", 1.0);
    sink.add(0, "b", 2.0);
    EXPECT_STREQ(items[1].v.name, "b");
    EXPECT_EQ(items[1].v.value, 2.0);
    EXPECT_EQ(items[1].v.struct_size, sizeof(grown_value));
    EXPECT_EQ(items[1].extra, 0.0);  // unknown tail zeroed
}

TEST(Diagnostics, GrownTensorViewsAreReadAtTheirStride) {
    struct grown_view {
        altgrad_tensor_view v;
        double extra;
    };
    const auto f = format("e3m4");
    const auto plugin = plugins().load("stiffness");
    const altgrad_diagnostic_vtable* vt = plugin->entry->diagnostic;
    altgrad_diagnostic* d = nullptr;
    altgrad_param_list params{sizeof(altgrad_param_list), nullptr, 0};
    altgrad_error e{};
    e.struct_size = sizeof e;
    ASSERT_EQ(vt->create(&params, &d, &e), ALTGRAD_STATUS_OK) << e.message;
    const std::vector<float> a = {0.75f}, b = {3.0f};
    grown_view views[2] = {{view(a, *f), 1.0}, {view(b, *f), 2.0}};
    for (auto& g : views) g.v.struct_size = sizeof(grown_view);
    std::vector<altgrad_diagnostic_value> items(10);
    for (auto& v : items) v.struct_size = sizeof v;
    altgrad_value_buffer buffer{sizeof buffer, items.data(), items.size(), 0};
    ASSERT_EQ(vt->measure(d, 0, &views[0].v, 2, &buffer, &e), ALTGRAD_STATUS_OK) << e.message;
    vt->destroy(d);
    ASSERT_EQ(buffer.count, 10u);
    EXPECT_EQ(items[0].tensor_index, 0u);
    EXPECT_EQ(items[0].value, 0.03125);  // 0.75 -> 2^-5
    EXPECT_EQ(items[5].tensor_index, 1u);
    EXPECT_EQ(items[5].value, 0.125);  // 3.0 -> 2^-3
}

// ---------------------------------------------------------------- block scales (ABI 1.2 views)

// A view of shape [rows, k] whose blocks of `block` elements along each row
// (a row's last one possibly short) have the given scales (tensor.h).
altgrad_tensor_view blocked(const std::vector<float>& data, const format_handle& f, int64_t rows, int64_t k,
                            size_t block, const std::vector<float>& scales) {
    altgrad_tensor_view v = view(data, f);
    v.ndim = 2;
    v.shape[0] = rows;
    v.shape[1] = k;
    v.block_scales = scales.data();
    v.block_size = block;
    v.block_count = scales.size();
    return v;
}

// The E3M4 tensor of the two range tests below: [2, 6], blocks of 4 along the
// rows, so each row has a block of 4 and a short block of 2.
const std::vector<float> kBlockX = {kNaN, -200.0f, 1000.0f, 3.0f, 0.001f, 0.002f,  // row 0
                                    2.0f, 16.0f,   0.005f,  0.0f, 20.0f,  0.01f};  // row 1
const std::vector<float> kBlockScales = {1.0f / 64, 64.0f,  // row 0: big block, tiny block
                                         1.0f, 0.5f};       // row 1

TEST(BlockScaledViews, RangeCountsEachElementAtItsBlocksScale) {
    const auto f = format("e3m4");  // max 15.5, smallest subnormal 2^-6: |y| < 2^-7 rounds to 0
    ASSERT_EQ(f->info().max_finite, 15.5);
    auto v = values_of(diagnostic("range")->measure(0, {blocked(kBlockX, *f, 2, 6, 4, kBlockScales)}));
    // 11 finite elements (the NaN skipped; the scales still go by position).
    // Overflow |x*s| > 15.5: 1000/64 = 15.625 and 16*1; not -200/64, 20*0.5.
    // Underflow: 0.005*1 and 0.01*0.5 = 0.005 round to 0; 0.001*64, 0.002*64
    // do not; 0 is not counted.
    EXPECT_EQ(v["overflow_rate"], 2.0 / 11);
    EXPECT_EQ(v["underflow_rate"], 2.0 / 11);
    EXPECT_EQ(v["amax"], 1000.0);  // of x, unscaled
    EXPECT_EQ(v["nonfinite_count"], 1.0);
}

TEST(BlockScaledViews, TheSameTensorAtOneScaleOfOneCountsDifferently) {
    const auto f = format("e3m4");
    // As the host showed block-scaled tensors before ABI 1.2 views: scale 1.
    // Overflow: 200, 1000, 16, 20. Underflow: 0.001, 0.002, 0.005 (0.01
    // rounds up to 2^-6).
    auto v = values_of(diagnostic("range")->measure(0, {view(kBlockX, *f, 1.0f)}));
    EXPECT_EQ(v["overflow_rate"], 4.0 / 11);
    EXPECT_EQ(v["underflow_rate"], 3.0 / 11);
}

TEST(BlockScaledViews, BitStallQuantizesRowsThatEndInAShortBlock) {
    const auto f = format("e3m4");
    // [2, 3] in blocks of 2: per row a block of 2 and a short block of 1. Every
    // weight moved 0 -> 0.01: at scale 1 it reaches 2^-6 (moved), at 1/64 it
    // still rounds to 0 (stalled). Row 0 at {1, 1/64}, row 1 at {1/64, 1}:
    // stalled are (0,2), (1,0), (1,1). Read as if blocks ran on across rows
    // (s[i / 2]) it would be elements 2..5 instead.
    const std::vector<float> w(6, 0.01f), prev(6, 0.0f);
    const std::vector<float> scales = {1.0f, 1.0f / 64, 1.0f / 64, 1.0f};
    altgrad_tensor_view v = blocked(w, *f, 2, 3, 2, scales);
    v.previous = prev.data();
    EXPECT_EQ(values_of(diagnostic("bit_stall")->measure(0, {v}))["bit_stall_rate"], 0.5);
}

TEST(BlockScaledViews, StiffnessAndGridAlignmentUseTheElementsScale) {
    const auto f = format("e3m4");  // M = 4
    // [1, 4] in blocks of 2 at {1, 3}: 0.75 sits on 2^(-1-4) = 2^-5 at scale 1,
    // and on 2^(1-4)/3 at scale 3 (0.75*3 = 2.25, floor(log2) = 1).
    const std::vector<float> w = {0.75f, 0.75f, 0.75f, 0.75f}, scales = {1.0f, 3.0f};
    auto s = values_of(diagnostic("stiffness")->measure(0, {blocked(w, *f, 1, 4, 2, scales)}));
    EXPECT_EQ(s["stiffness_min"], 0.03125);
    EXPECT_DOUBLE_EQ(s["stiffness_max"], 0.125 / 3);
    // Grid alignment: 0.75 is on E3M4's grid at scale 1 (error 0); 0.7 at
    // scale 3 is 2.1 -> 2.125 (spacing 1/8 in [2, 4)), error |0.7 - 2.125/3|
    // = 0.00833 (at scale 1 it would be 0.7 -> 0.6875, error 0.0125).
    const std::vector<float> off = {0.75f, 0.75f, 0.7f, 0.7f};
    auto g = values_of(diagnostic("grid_alignment")->measure(0, {blocked(off, *f, 1, 4, 2, scales)}));
    const double e3 = 0.7 - 2.125 / 3;
    EXPECT_NEAR(g["max_abs_error"], std::fabs(e3), 1e-7);
    EXPECT_NEAR(g["mean_abs_error"], std::fabs(e3) / 2, 1e-7);
}

TEST(BlockScaledViews, UlpCountsOnEachBlocksGrid) {
    const auto f = format("e3m4");  // spacing 2^-4 in [1, 2), 2^-3 in [2, 4)
    // [1, 4] in blocks of 2 at {1, 3}. Moved 1.03 -> 1: at scale 1 both are
    // q = 1 (0.03 < half of 1/16): distance 0; at scale 3, 3.09 -> 3.125 and
    // 3 -> 3: one step. Spacing at q(w): 1/16 at scale 1, (1/8)/3 at scale 3.
    const std::vector<float> w(4, 1.0f), prev(4, 1.03f), scales = {1.0f, 3.0f};
    altgrad_tensor_view v = blocked(w, *f, 1, 4, 2, scales);
    v.previous = prev.data();
    auto u = values_of(diagnostic("ulp")->measure(0, {v}));
    EXPECT_EQ(u["ulp_moved_fraction"], 0.5);
    EXPECT_EQ(u["ulp_distance_mean"], 0.5);
    EXPECT_EQ(u["ulp_distance_max"], 1.0);
    EXPECT_DOUBLE_EQ(u["ulp_size_mean"], (0.0625 + 0.125 / 3) / 2);
}

TEST(BlockScaledViews, AViewOfTheOldSizeHasNone) {
    // A 1.1 host's view ends at `scale`: the fields past struct_size are not
    // read, so the block scales here (garbage to a 1.1 host) change nothing.
    const auto f = format("e3m4");
    altgrad_tensor_view v = blocked(kBlockX, *f, 2, 6, 4, kBlockScales);
    v.struct_size = offsetof(altgrad_tensor_view, block_scales);
    auto r = values_of(diagnostic("range")->measure(0, {v}));
    EXPECT_EQ(r["overflow_rate"], 4.0 / 11);  // as at scale 1
    EXPECT_EQ(r["underflow_rate"], 3.0 / 11);
}

TEST(BlockScaledViews, ScalesThatDoNotFitTheShapeAreErrorsNamingThePlugin) {
    const auto f = format("e3m4");
    auto d = diagnostic("range");
    const std::vector<float> three = {1.0f, 2.0f, 3.0f};
    altgrad_tensor_view v = blocked(kBlockX, *f, 2, 6, 4, three);  // needs 4
    std::string e = measure_error(*d, {v});
    EXPECT_NE(e.find("range"), std::string::npos) << e;
    EXPECT_NE(e.find("block_count is 3, its shape needs 4"), std::string::npos) << e;
    const std::vector<float> zero = {1.0f, 0.0f, 1.0f, 1.0f};
    e = measure_error(*d, {blocked(kBlockX, *f, 2, 6, 4, zero)});
    EXPECT_NE(e.find("block scale 1 is not finite and > 0"), std::string::npos) << e;
    v = blocked(kBlockX, *f, 2, 6, 0, kBlockScales);
    e = measure_error(*d, {v});
    EXPECT_NE(e.find("block_size is 0"), std::string::npos) << e;
}

TEST(BlockScaledViews, AnAbi11DiagnosticLoadsAndReadsTheViewsItKnows) {
    // Built as against the 1.1 headers: the host accepts it and its views are
    // read at the host's stride up to their 1.1 end; it sees scale 1 only.
    // (A folder of its own: the test plugin folder holds plugins that hang on load.)
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("altgrad_abi11_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy(fs::path(ALTGRAD_TEST_PLUGIN_DIR) / "abi11_diagnostic", dir / "abi11_diagnostic");
    registry old(dir);
    const auto d = diagnostic_handle::create(old.load("abi11_diagnostic"), {});
    fs::remove_all(dir);  // loaded: the library stays mapped
    const auto f = format("e3m4");
    const std::vector<float> y = {-3.0f, 2.0f};
    const auto all = d->measure(0, {blocked(kBlockX, *f, 2, 6, 4, kBlockScales), view(y, *f, 0.5f)});
    EXPECT_EQ(values_of(all, 0)["scaled_amax"], 1000.0);  // not 1000/64: it cannot see the blocks
    EXPECT_EQ(values_of(all, 1)["scaled_amax"], 1.5);     // the second view, read at the host's stride
    // Its table ends before ABI 1.3's headline fields: it declares none.
    EXPECT_FALSE(d->declares_headlines());
    EXPECT_TRUE(d->headlines().empty());
}

TEST(BlockScaledViews, ScaleAtFollowsTheRowLayout) {
    const auto f = format("e3m4");
    // [2, 5] in blocks of 2: three blocks per row (2, 2, 1).
    const std::vector<float> x(10, 1.0f), scales = {1, 2, 3, 4, 5, 6};
    const altgrad_tensor_view v = blocked(x, *f, 2, 5, 2, scales);
    const float expected[10] = {1, 1, 2, 2, 3, 4, 4, 5, 5, 6};
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(altgrad::sdk::scale_at(v, i), expected[i]) << i;
    EXPECT_EQ(altgrad::sdk::scale_at(view(x, *f, 0.25f), 7), 0.25f);  // per tensor
}

// ---------------------------------------------------------------- bit_stall

TEST(Diagnostics, NewPluginsDeclareTheirInterests) {
    const uint32_t w = 1u << ALTGRAD_TENSOR_WEIGHT, g = 1u << ALTGRAD_TENSOR_GRADIENT;
    EXPECT_EQ(diagnostic("bit_stall")->interests(), w);
    EXPECT_EQ(diagnostic("ulp")->interests(), w);
    EXPECT_EQ(diagnostic("grad_stiffness")->interests(), w | g);
    EXPECT_EQ(diagnostic("kurtosis")->interests(), 1u << ALTGRAD_TENSOR_ACTIVATION);
    EXPECT_EQ(diagnostic("attention_entropy")->interests(), 1u << ALTGRAD_TENSOR_ATTENTION_PROBS);
    EXPECT_EQ(diagnostic("attention_entropy")->max_values_per_tensor(), 66u);  // max_heads 64 + 2
}

TEST(BitStall, E3M4ByHand) {
    const auto f = format("e3m4");
    // E3M4 steps: 1/32 in [0.5, 1), 1/16 in [1, 2); max 15.5.
    //  0.75  / 0.75     : not moved; on the grid            -> stalled
    //  0.76  / 0.75     : moved; 0.76*32 = 24.32 -> 24/32    -> stalled (moved)
    //  0.80  / 0.75     : moved; 0.8*32 = 25.6 -> 26/32      -> not stalled
    //  1.03  / 1.0      : moved; 1.03*16 = 16.48 -> 16/16    -> stalled (moved)
    // -0.5   / -0.5     : not moved                          -> stalled
    //  NaN   / 1.0      : moved (NaN != 1); q(NaN) != q(1)   -> not stalled
    //  20    / 16       : moved; both saturate to 15.5       -> stalled (moved)
    //  0.3   / NaN      : moved; NaN == x is false           -> not stalled
    //  0.765625 / 0.75  : moved; 24.5/32 is a tie between 0.75 (mantissa 1000,
    //                     even) and 0.78125 (1001): even    -> stalled (moved)
    // 9 elements: stalled 6, moved 7, of them stalled 4.
    const std::vector<float> now = {0.75f, 0.76f, 0.80f, 1.03f, -0.5f, kNaN, 20.0f, 0.3f, 0.765625f};
    const std::vector<float> then = {0.75f, 0.75f, 0.75f, 1.0f, -0.5f, 1.0f, 16.0f, kNaN, 0.75f};
    auto v = values_of(diagnostic("bit_stall")->measure(0, {moved(now, then, *f)}));
    EXPECT_EQ(v["bit_stall_rate"], 6.0 / 9);
    EXPECT_EQ(v["moved_rate"], 7.0 / 9);
    EXPECT_EQ(v["stalled_moved_rate"], 4.0 / 7);
}

TEST(BitStall, ScaleDecidesAndZerosCompareEqual) {
    const auto f = format("e3m4");
    // Scale 1: 0.01 and 0.012 are 0.64 and 0.768 subnormal steps (2^-6): both
    // round to 1 step -> stalled. Scale 64: 0.64 and 0.768 in [0.5, 1), step
    // 1/32: 20.48 -> 20, 24.576 -> 25 -> not stalled.
    const std::vector<float> now = {0.012f}, then = {0.01f};
    EXPECT_EQ(values_of(diagnostic("bit_stall")->measure(0, {moved(now, then, *f)}))["bit_stall_rate"], 1.0);
    EXPECT_EQ(values_of(diagnostic("bit_stall")->measure(0, {moved(now, then, *f, 64.0f)}))["bit_stall_rate"],
              0.0);
    // -0 and +0 are equal floats: neither moved nor changed; no element moved,
    // so stalled_moved_rate is undefined.
    const std::vector<float> z_now = {-0.0f, 0.5f}, z_then = {0.0f, 0.5f};
    auto v = values_of(diagnostic("bit_stall")->measure(0, {moved(z_now, z_then, *f)}));
    EXPECT_EQ(v["bit_stall_rate"], 1.0);
    EXPECT_EQ(v["moved_rate"], 0.0);
    EXPECT_TRUE(std::isnan(v["stalled_moved_rate"]));
}

TEST(BitStall, NoPreviousOrEmptyIsNaN) {
    const auto f = format("e3m4");
    const std::vector<float> w = {0.75f, 1.0f}, empty;
    const auto all = diagnostic("bit_stall")->measure(0, {moved(w, {}, *f), moved(empty, empty, *f)});
    ASSERT_EQ(all.size(), 6u);  // three values for each tensor, all NaN
    for (const diagnostic_value& v : all) EXPECT_TRUE(std::isnan(v.value)) << v.name;
}

// ---------------------------------------------------------------- ulp

TEST(Ulp, E3M4DistancesCountedOnTheGrid) {
    const auto f = format("e3m4");
    // Ordinals on E3M4's grid (steps 2^-6 subnormal, 1/32 in [0.5, 1),
    // 1/16 in [1, 2)):
    //  0.78125 / 0.75      : neighbours                             -> 1
    //  1.0     / 0.75      : 24/32 .. 31/32 is 7 steps, then 1.0    -> 8
    //  1.125   / 1.0       : 1, 1.0625, 1.125                       -> 2
    //  2^-6    / -2^-6     : -2^-6, 0 (+0 and -0 one position), 2^-6 -> 2
    //  0.75    / 0.76      : 0.76 rounds to 0.75                    -> 0
    //  15.5    / 20        : 20 saturates to 15.5                   -> 0
    //  NaN     / 0.5       : skipped
    //  0.5     / Inf       : skipped
    // 6 pairs: distances {1, 8, 2, 2, 0, 0}: mean 13/6, max 8, 4 of 6 moved.
    const std::vector<float> now = {0.78125f, 1.0f, 1.125f, 0.015625f, 0.75f, 15.5f, kNaN, 0.5f};
    const std::vector<float> then = {0.75f, 0.75f, 1.0f, -0.015625f, 0.76f, 20.0f, 0.5f, kInf};
    auto v = values_of(diagnostic("ulp")->measure(0, {moved(now, then, *f)}));
    EXPECT_DOUBLE_EQ(v["ulp_distance_mean"], 13.0 / 6);
    EXPECT_EQ(v["ulp_distance_max"], 8.0);
    EXPECT_DOUBLE_EQ(v["ulp_moved_fraction"], 4.0 / 6);
    // Spacing at q(now), over the 7 finite elements of now (previous does not
    // matter): 0.78125 -> 1/32, 1.0 -> 1/16, 1.125 -> 1/16, 2^-6 (subnormal,
    // next 2*2^-6) -> 1/64, 0.75 -> 1/32, 15.5 (max: no larger value, so the
    // step below to 15.0) -> 1/2, 0.5 (next 0.53125) -> 1/32.
    // Sum = (2 + 4 + 4 + 1 + 2 + 32 + 2)/64 = 47/64; mean 47/448.
    EXPECT_DOUBLE_EQ(v["ulp_size_mean"], 47.0 / 448);
}

TEST(Ulp, SpacingAwayFromZeroAndScale) {
    const auto f = format("e3m4");
    // -0.75 -> -0.78125: 1/32. 0 -> the smallest positive value 2^-6: 1/64.
    // -15.5 (lowest: nothing beyond it) -> -15.0: 1/2. Mean (2+1+32)/64/3.
    const std::vector<float> w = {-0.75f, 0.0f, -15.5f};
    auto v = values_of(diagnostic("ulp")->measure(0, {moved(w, {}, *f)}));
    EXPECT_DOUBLE_EQ(v["ulp_size_mean"], 35.0 / 192);
    EXPECT_TRUE(std::isnan(v["ulp_distance_mean"]));  // no previous
    EXPECT_TRUE(std::isnan(v["ulp_distance_max"]));
    EXPECT_TRUE(std::isnan(v["ulp_moved_fraction"]));
    // In units of w: 0.75 at scale 3 is 2.25, step 1/8 in [2, 4): 1/24.
    const std::vector<float> one = {0.75f};
    EXPECT_DOUBLE_EQ(values_of(diagnostic("ulp")->measure(0, {moved(one, {}, *f, 3.0f)}))["ulp_size_mean"],
                     1.0 / 24);
}

TEST(Ulp, E0M7FixedPoint) {
    const auto f = format("e0m7");
    // Steps of 1/128: 0.5 = 64/128, 0.25 = 32/128: 32 apart. -1 (lowest) has
    // no neighbour below it: the step above, 1/128 like every other.
    const std::vector<float> now = {0.5f, -1.0f}, then = {0.25f, -1.0f};
    auto v = values_of(diagnostic("ulp")->measure(0, {moved(now, then, *f)}));
    EXPECT_EQ(v["ulp_distance_mean"], 16.0);
    EXPECT_EQ(v["ulp_distance_max"], 32.0);
    EXPECT_EQ(v["ulp_moved_fraction"], 0.5);
    EXPECT_EQ(v["ulp_size_mean"], 1.0 / 128);
}

TEST(Ulp, Bf16IsTabulatedFp32IsArithmetic) {
    // bf16 (16 bits: every code decoded and sorted): 1 + 2^-7 is 1's neighbour.
    const auto bf16 = format("bf16");
    const std::vector<float> b_now = {1.0078125f}, b_then = {1.0f};
    auto b = values_of(diagnostic("ulp")->measure(0, {moved(b_now, b_then, *bf16)}));
    EXPECT_EQ(b["ulp_distance_max"], 1.0);
    EXPECT_EQ(b["ulp_size_mean"], 0.0078125);
    // fp32 (2^32 codes: ordinals from the sign-magnitude layout):
    //  nextafter(1) / 1    : 1
    //  2 / 1               : one binade of 2^23 mantissas
    //  min_sub / -min_sub  : -min_sub, 0, min_sub -> 2
    //  -1 / 1              : 2 * 0x3f800000 (1.0's magnitude code)
    const auto fp32 = format("fp32");
    const float up = std::nextafter(1.0f, 2.0f), tiny = std::numeric_limits<float>::denorm_min();
    const std::vector<float> now = {up, 2.0f, tiny, -1.0f}, then = {1.0f, 1.0f, -tiny, 1.0f};
    auto v = values_of(diagnostic("ulp")->measure(0, {moved(now, then, *fp32)}));
    EXPECT_EQ(v["ulp_distance_max"], 2.0 * 0x3f800000);
    EXPECT_DOUBLE_EQ(v["ulp_distance_mean"], (1.0 + 8388608.0 + 2.0 + 2.0 * 0x3f800000) / 4);
    EXPECT_EQ(v["ulp_moved_fraction"], 1.0);
    // Spacing: 2^-23 at 1+2^-23, 2^-22 at 2, min_sub at min_sub, 2^-23 at -1.
    EXPECT_DOUBLE_EQ(v["ulp_size_mean"],
                     (std::ldexp(1.0, -23) + std::ldexp(1.0, -22) + tiny + std::ldexp(1.0, -23)) / 4);
    // FLT_MAX (max finite: the step below it, 2^104) and -FLT_MAX.
    const std::vector<float> big = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
    EXPECT_EQ(values_of(diagnostic("ulp")->measure(0, {moved(big, {}, *fp32)}))["ulp_size_mean"],
              std::ldexp(1.0, 104));
}

TEST(Ulp, EmptyAndAllNaN) {
    const auto f = format("e3m4");
    const std::vector<float> empty, nans = {kNaN, kInf}, prev = {1.0f, 1.0f};
    const auto all = diagnostic("ulp")->measure(0, {moved(empty, empty, *f), moved(nans, prev, *f)});
    ASSERT_EQ(all.size(), 8u);
    for (const diagnostic_value& v : all) EXPECT_TRUE(std::isnan(v.value)) << v.tensor_index << " " << v.name;
}

// ---------------------------------------------------------------- grad_stiffness

TEST(GradStiffness, PairsByNameAndCorrelatesByHand) {
    const auto f = format("e3m4");
    // Weight "fc" with S on E3M4 (M = 4): 0.75 -> 2^-5, 3.0 -> 2^-3, -0.1 ->
    // 2^(-4-4) = 2^-8; 0 skipped (w == 0), NaN weight skipped, Inf gradient
    // skipped. Three elements remain: |g| = {1/16, 1/8, 0}, S = {8, 32, 1} x 2^-8.
    // Pearson is affine-invariant: x = {1, 2, 0}, y = {8, 32, 1}.
    //   mean x = 1, dx = {0, 1, -1}; mean y = 41/3, dy = {-17, 55, -38}/3
    //   sxy = 55/3 + 38/3 = 31, sxx = 2, syy = (289 + 3025 + 1444)/9 = 4758/9
    //   r = 31 / sqrt(2 * 4758/9) = 93 / sqrt(9516) = 0.9534...
    // Below: 1/16 < 1/32 no; 1/8 < 1/8 no (strict); 0 < 1/256 yes -> 1/3.
    const std::vector<float> w = {0.75f, 3.0f, -0.1f, 0.0f, kNaN, 1.0f};
    const std::vector<float> g = {-0.0625f, 0.125f, 0.0f, 7.0f, 1.0f, kInf};
    const std::vector<float> other = {0.5f, 0.25f};
    // The gradient comes first, an unpaired gradient and an unpaired weight
    // give nothing.
    const auto all = diagnostic("grad_stiffness")
                         ->measure(0, {named(g, *f, "blocks.0.mlp.fc.weight", ALTGRAD_TENSOR_GRADIENT),
                                       named(other, *f, "blocks.0.attn.qkv.weight", ALTGRAD_TENSOR_GRADIENT),
                                       named(w, *f, "blocks.0.mlp.fc.weight", ALTGRAD_TENSOR_WEIGHT),
                                       named(other, *f, "blocks.1.mlp.fc.weight", ALTGRAD_TENSOR_WEIGHT)});
    ASSERT_EQ(all.size(), 2u);
    for (const diagnostic_value& v : all) EXPECT_EQ(v.tensor_index, 0u) << v.name;  // the gradient's index
    auto v = values_of(all, 0);
    EXPECT_NEAR(v["grad_stiffness_corr"], 93.0 / std::sqrt(9516.0), 1e-12);
    EXPECT_DOUBLE_EQ(v["grad_below_stiffness_frac"], 1.0 / 3);
}

TEST(GradStiffness, ConstantStiffnessAndEmpty) {
    // E0M7: S = 1/128 everywhere: zero variance, no correlation. 0.001 <
    // 1/128, 0.01 is not: 1/2.
    const auto e0m7 = format("e0m7");
    const std::vector<float> w = {0.5f, -0.25f}, g = {0.001f, 0.01f}, empty;
    auto v = values_of(diagnostic("grad_stiffness")
                           ->measure(0, {named(w, *e0m7, "a", ALTGRAD_TENSOR_WEIGHT),
                                         named(g, *e0m7, "a", ALTGRAD_TENSOR_GRADIENT),
                                         named(empty, *e0m7, "b", ALTGRAD_TENSOR_WEIGHT),
                                         named(empty, *e0m7, "b", ALTGRAD_TENSOR_GRADIENT)}),
                       1);
    EXPECT_TRUE(std::isnan(v["grad_stiffness_corr"]));
    EXPECT_EQ(v["grad_below_stiffness_frac"], 0.5);
    // The empty pair (tensor 3): both undefined.
    const auto all = diagnostic("grad_stiffness")
                         ->measure(0, {named(empty, *e0m7, "b", ALTGRAD_TENSOR_WEIGHT),
                                       named(empty, *e0m7, "b", ALTGRAD_TENSOR_GRADIENT)});
    ASSERT_EQ(all.size(), 2u);
    for (const diagnostic_value& x : all) EXPECT_TRUE(std::isnan(x.value)) << x.name;
}

TEST(GradStiffness, MismatchedPairsAreErrors) {
    const auto f = format("e3m4");
    const std::vector<float> two = {1.0f, 2.0f}, three = {1.0f, 2.0f, 3.0f};
    const auto d = diagnostic("grad_stiffness");
    const std::string counts = measure_error(
        *d, {named(two, *f, "a", ALTGRAD_TENSOR_WEIGHT), named(three, *f, "a", ALTGRAD_TENSOR_GRADIENT)});
    EXPECT_NE(counts.find("invalid argument"), std::string::npos) << counts;
    EXPECT_NE(counts.find("'a': the weight has 2 elements, its gradient 3"), std::string::npos) << counts;
    const std::string twice = measure_error(
        *d, {named(two, *f, "a", ALTGRAD_TENSOR_WEIGHT), named(two, *f, "a", ALTGRAD_TENSOR_WEIGHT)});
    EXPECT_NE(twice.find("both weights named 'a'"), std::string::npos) << twice;
}

// ---------------------------------------------------------------- kurtosis

TEST(Kurtosis, ByHand) {
    const auto f = format("e3m4");
    auto measure = [&](const std::vector<float>& x) {
        return values_of(diagnostic("kurtosis")->measure(0, {view(x, *f, 1.0f, ALTGRAD_TENSOR_ACTIVATION)}));
    };
    // {-1, 1, -1, 1}: mean 0, m2 = 1, m4 = 1 -> 1 (the smallest kurtosis
    // there is). NaN and Inf are skipped and counted.
    auto v = measure({-1.0f, 1.0f, kNaN, -1.0f, 1.0f, -kInf});
    EXPECT_EQ(v["kurtosis"], 1.0);
    EXPECT_EQ(v["mean"], 0.0);
    EXPECT_EQ(v["std"], 1.0);
    EXPECT_EQ(v["absmax"], 1.0);
    EXPECT_EQ(v["nonfinite_count"], 2.0);
    // {0, 0, 0, 4}: mass 3/4 and 1/4. mean 1, deviations {-1, -1, -1, 3}:
    // m2 = 12/4 = 3, m4 = (1 + 1 + 1 + 81)/4 = 21 -> 21/9 = 7/3 (Bernoulli
    // (1 - 3pq)/(pq) with p = 1/4: (7/16)/(3/16)).
    v = measure({0.0f, 0.0f, 0.0f, 4.0f});
    EXPECT_DOUBLE_EQ(v["kurtosis"], 7.0 / 3);
    EXPECT_EQ(v["mean"], 1.0);
    EXPECT_DOUBLE_EQ(v["std"], std::sqrt(3.0));
    EXPECT_EQ(v["absmax"], 4.0);
    // One outlier in 20: p = 1/20, pq = 19/400: (1 - 57/400)/(19/400) = 343/19
    // = 18.05, past the seeds' alarm at 10.
    std::vector<float> outlier(20, 0.0f);
    outlier[7] = -3.0f;
    v = measure(outlier);
    EXPECT_NEAR(v["kurtosis"], 343.0 / 19, 1e-12);  // the mean -3/20 is inexact in binary
    EXPECT_EQ(v["absmax"], 3.0);
    // One element or no variance: kurtosis undefined, the rest reported.
    v = measure({5.0f});
    EXPECT_TRUE(std::isnan(v["kurtosis"]));
    EXPECT_EQ(v["mean"], 5.0);
    EXPECT_EQ(v["std"], 0.0);
    v = measure({2.0f, 2.0f, 2.0f});
    EXPECT_TRUE(std::isnan(v["kurtosis"]));
    // Nothing finite: all NaN but the count.
    for (const auto& x : {std::vector<float>{}, std::vector<float>{kNaN, kInf}}) {
        v = measure(x);
        for (const char* k : {"kurtosis", "mean", "std", "absmax"}) EXPECT_TRUE(std::isnan(v[k])) << k;
        EXPECT_EQ(v["nonfinite_count"], static_cast<double>(x.size()));
    }
}

// ---------------------------------------------------------------- attention_entropy

TEST(AttentionEntropy, ByHand) {
    const auto f = format("e3m4");
    // [B 2, H 2, T 2, K 2], causal rows:
    //  b0 h0: [1, 0] -> 0;  [1/2, 1/2] -> ln 2
    //  b0 h1: [1, 0] -> 0;  [1, 0] -> 0 (one-hot)
    //  b1 h0: [1, 0] -> 0;  [1/4, 3/4] -> -(1/4 ln 1/4 + 3/4 ln 3/4)
    //  b1 h1: [1, 0] -> 0;  [NaN, 1/2] -> skipped
    // head 0: mean of 4 rows; head 1: mean of 3 rows = 0.
    const std::vector<float> p = {1, 0, 0.5f, 0.5f, 1, 0, 1, 0, 1, 0, 0.25f, 0.75f, 1, 0, kNaN, 0.5f};
    const double h01 = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
    const double head0 = (std::log(2.0) + h01) / 4;
    auto v = values_of(diagnostic("attention_entropy")->measure(0, {probs(p, *f, 2, 2, 2, 2)}));
    EXPECT_EQ(v.size(), 4u);
    EXPECT_DOUBLE_EQ(v["entropy_head_0"], head0);
    EXPECT_EQ(v["entropy_head_1"], 0.0);
    EXPECT_DOUBLE_EQ(v["entropy_mean"], head0 / 2);
    EXPECT_EQ(v["entropy_min"], 0.0);
    // Uniform over k keys: ln k; one head of causal uniform rows over 1..4
    // keys: (ln 1 + ln 2 + ln 3 + ln 4)/4 = ln(24)/4.
    const std::vector<float> u = {1,        0,        0,        0, 0.5f,  0.5f,  0,     0,
                                  1.0f / 3, 1.0f / 3, 1.0f / 3, 0, 0.25f, 0.25f, 0.25f, 0.25f};
    v = values_of(diagnostic("attention_entropy")->measure(0, {probs(u, *f, 1, 1, 4, 4)}));
    EXPECT_NEAR(v["entropy_head_0"], std::log(24.0) / 4, 1e-7);  // 1/3 is a float
    EXPECT_EQ(v["entropy_min"], v["entropy_head_0"]);
}

TEST(AttentionEntropy, EmptyAndAllNaNHeadsAreNaN) {
    const auto f = format("e3m4");
    const std::vector<float> empty;
    auto v = values_of(diagnostic("attention_entropy")->measure(0, {probs(empty, *f, 0, 2, 4, 4)}));
    EXPECT_EQ(v.size(), 4u);
    for (const auto& [k, x] : v) EXPECT_TRUE(std::isnan(x)) << k;
    // Head 1's only row is NaN: head 1 NaN, and so the aggregates.
    const std::vector<float> p = {0.5f, 0.5f, kNaN, kNaN};
    v = values_of(diagnostic("attention_entropy")->measure(0, {probs(p, *f, 1, 2, 1, 2)}));
    EXPECT_DOUBLE_EQ(v["entropy_head_0"], std::log(2.0));
    EXPECT_TRUE(std::isnan(v["entropy_head_1"]));
    EXPECT_TRUE(std::isnan(v["entropy_mean"]));
    EXPECT_TRUE(std::isnan(v["entropy_min"]));
}

TEST(AttentionEntropy, ShapesAndTooManyHeadsAreErrors) {
    const auto f = format("e3m4");
    const auto d = diagnostic("attention_entropy", {{"max_heads", "2"}});
    EXPECT_EQ(d->max_values_per_tensor(), 4u);
    const std::vector<float> p(3 * 2, 0.5f);
    const std::string heads = measure_error(*d, {probs(p, *f, 1, 3, 1, 2)});
    EXPECT_NE(heads.find("invalid argument"), std::string::npos) << heads;
    EXPECT_NE(heads.find("3 heads, more than max_heads = 2"), std::string::npos) << heads;
    altgrad_tensor_view three_d = probs(p, *f, 3, 1, 2, 0);
    three_d.ndim = 3;
    const std::string ndim = measure_error(*d, {three_d});
    EXPECT_NE(ndim.find("ndim is 3"), std::string::npos) << ndim;
    three_d.ndim = 1;  // a flat view is no [batch, head, query, key] tensor either
    const std::string flat = measure_error(*d, {three_d});
    EXPECT_NE(flat.find("ndim is 1"), std::string::npos) << flat;
    const std::string shape = measure_error(*d, {probs(p, *f, 1, 2, 2, 2)});
    EXPECT_NE(shape.find("does not hold its 6 elements"), std::string::npos) << shape;
    // Two heads is within max_heads = 2: 2 + 2 values.
    EXPECT_EQ(d->measure(0, {probs(p, *f, 1, 2, 1, 3)}).size(), 4u);
}

TEST(Diagnostics, NewPluginsMeasureNothingWithoutTensors) {
    for (const char* name : {"bit_stall", "ulp", "grad_stiffness", "kurtosis", "attention_entropy"}) {
        SCOPED_TRACE(name);
        EXPECT_TRUE(diagnostic(name)->measure(0, std::vector<altgrad_tensor_view>{}).empty());
    }
}

// The stiffness formula the stiffness and grad_stiffness plugins share.
TEST(Sdk, StiffnessOf) {
    altgrad_format_info info{};
    info.struct_size = sizeof info;
    info.family = ALTGRAD_FAMILY_FLOAT;
    info.mantissa_bits = 4;
    EXPECT_EQ(altgrad::sdk::stiffness_of(info, 0.75f, 1.0f), 0.03125);  // 2^(-1-4)
    EXPECT_EQ(altgrad::sdk::stiffness_of(info, -3.0f, 1.0f), 0.125);    // 2^(1-4)
    EXPECT_DOUBLE_EQ(altgrad::sdk::stiffness_of(info, 0.75f, 3.0f), 0.125 / 3);
    EXPECT_TRUE(std::isnan(altgrad::sdk::stiffness_of(info, 0.0f, 1.0f)));
    EXPECT_TRUE(std::isnan(altgrad::sdk::stiffness_of(info, kInf, 1.0f)));
    EXPECT_TRUE(std::isnan(altgrad::sdk::stiffness_of(info, 1e-30f, 1e-30f)));  // w*s flushes to 0
    info.family = ALTGRAD_FAMILY_FIXED_POINT;
    info.mantissa_bits = 7;
    EXPECT_EQ(altgrad::sdk::stiffness_of(info, 0.3f, 2.0f), 1.0 / 256);
    info.family = ALTGRAD_FAMILY_CODEBOOK;
    EXPECT_TRUE(std::isnan(altgrad::sdk::stiffness_of(info, 0.3f, 1.0f)));
}

// ---------------------------------------------------------------- headlines (ABI 1.3)

namespace headlines {

struct expected {
    const char* value;
    const char* series;
    altgrad_headline_summary summary;
    bool log_scale;
};

// What each bundled diagnostic declares for reports, as issue #29 asks.
const std::map<std::string, std::vector<expected>>& by_plugin() {
    static const std::map<std::string, std::vector<expected>> m = {
        {"stiffness", {{"stiffness_mean", "stiffness", ALTGRAD_HEADLINE_MEAN, true}}},
        {"range",
         {{"dynamic_range", "range.dynamic_range", ALTGRAD_HEADLINE_MAX, false},
          {"overflow_rate", "range.overflow_rate", ALTGRAD_HEADLINE_MAX, false},
          {"underflow_rate", "range.underflow_rate", ALTGRAD_HEADLINE_MAX, false}}},
        {"grid_alignment", {{"mse", "grid_alignment.mse", ALTGRAD_HEADLINE_MEAN, true}}},
        {"bit_stall", {{"stalled_moved_rate", "bit_stall.stalled_moved_rate", ALTGRAD_HEADLINE_MEAN, false}}},
        {"ulp",
         {{"ulp_distance_mean", "ulp.ulp_distance_mean", ALTGRAD_HEADLINE_MEAN, false},
          {"ulp_moved_fraction", "ulp.ulp_moved_fraction", ALTGRAD_HEADLINE_MEAN, false}}},
        {"grad_stiffness",
         {{"grad_below_stiffness_frac", "grad_stiffness.grad_below_stiffness_frac", ALTGRAD_HEADLINE_MEAN,
           false},
          {"grad_stiffness_corr", "grad_stiffness.grad_stiffness_corr", ALTGRAD_HEADLINE_MEAN, false}}},
        {"kurtosis", {{"kurtosis", "kurtosis.kurtosis", ALTGRAD_HEADLINE_MAX, true}}},
        {"attention_entropy",
         {{"entropy_min", "attention_entropy.entropy_min", ALTGRAD_HEADLINE_MIN, false},
          {"entropy_mean", "attention_entropy.entropy_mean", ALTGRAD_HEADLINE_MEAN, false}}},
    };
    return m;
}

}  // namespace headlines

// Published reports show stiffness's figure with exactly these strings.
TEST(Headlines, StiffnessDeclaresTheFigureReportsHaveAlwaysDrawn) {
    const auto d = diagnostic("stiffness");
    ASSERT_TRUE(d->declares_headlines());
    ASSERT_EQ(d->headlines().size(), 1u);
    const diagnostic_headline& h = d->headlines()[0];
    EXPECT_EQ(h.value, "stiffness_mean");
    EXPECT_EQ(h.series, "stiffness");
    EXPECT_EQ(h.title, "Stiffness (mean S = 2^(floor(log2|w|) - M))");
    EXPECT_EQ(h.label, "mean stiffness");
    EXPECT_EQ(h.unit, "");
    EXPECT_EQ(h.summary, ALTGRAD_HEADLINE_MEAN);
    EXPECT_TRUE(h.log_scale);
}

// Every bundled diagnostic declares the headlines above, in that order, each
// with a title "What (how)" and a label, and none takes a host series' name.
TEST(Headlines, EveryBundledDiagnosticDeclaresItsHeadlines) {
    const std::vector<std::string> host_series = {"loss",      "val_loss",     "lr",
                                                  "grad_norm", "tokens_per_s", "grad_sparsity",
                                                  "overflow",  "underflow",    "bit_stall"};
    for (const auto& [name, want] : headlines::by_plugin()) {
        SCOPED_TRACE(name);
        const auto d = diagnostic(name);
        EXPECT_TRUE(d->declares_headlines());
        ASSERT_EQ(d->headlines().size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            const diagnostic_headline& h = d->headlines()[i];
            EXPECT_EQ(h.value, want[i].value);
            EXPECT_EQ(h.series, want[i].series);
            EXPECT_EQ(h.summary, want[i].summary) << h.series;
            EXPECT_EQ(h.log_scale, want[i].log_scale) << h.series;
            EXPECT_NE(h.title.find(" ("), std::string::npos) << h.title;
            EXPECT_EQ(h.title.back(), ')') << h.title;
            EXPECT_FALSE(h.label.empty());
            EXPECT_EQ(std::count(host_series.begin(), host_series.end(), h.series), 0) << h.series;
        }
    }
}

// What each declares is a value it writes: measured on one tensor of each
// role it asks for (a weight with its gradient, an activation, attention
// probabilities), every headline's value comes back.
TEST(Headlines, EveryDeclaredValueIsOneTheDiagnosticWrites) {
    const auto f = format("e3m4");
    const std::vector<float> w = {0.5f, -0.75f, 1.25f, 0.0f}, p = {0.5f, -0.70f, 1.5f, 0.0f};
    const std::vector<float> g = {0.01f, -0.2f, 0.003f, 0.5f};
    const std::vector<float> rows = {0.25f, 0.25f, 0.25f, 0.25f, 1.0f, 0.0f, 0.0f, 0.0f};  // [1, 1, 2, 4]
    for (const auto& [name, want] : headlines::by_plugin()) {
        SCOPED_TRACE(name);
        const auto d = diagnostic(name);
        std::vector<altgrad_tensor_view> views;
        if (d->interested_in(ALTGRAD_TENSOR_WEIGHT)) {
            altgrad_tensor_view v = moved(w, p, *f);
            v.name = "blocks.0.mlp.fc.weight";
            views.push_back(v);
        }
        if (d->interested_in(ALTGRAD_TENSOR_GRADIENT))
            views.push_back(named(g, *f, "blocks.0.mlp.fc.weight", ALTGRAD_TENSOR_GRADIENT));
        if (d->interested_in(ALTGRAD_TENSOR_ACTIVATION))
            views.push_back(named(w, *f, "blocks.0.mlp.fc.input", ALTGRAD_TENSOR_ACTIVATION));
        if (d->interested_in(ALTGRAD_TENSOR_ATTENTION_PROBS)) views.push_back(probs(rows, *f, 1, 1, 2, 4));
        std::set<std::string> written;
        for (const diagnostic_value& v : d->measure(0, views)) written.insert(v.name);
        for (const headlines::expected& h : want) EXPECT_EQ(written.count(h.value), 1u) << h.value;
    }
}
