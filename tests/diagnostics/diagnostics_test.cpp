// The bundled diagnostic plugins (range, stiffness, grid_alignment) loaded
// through the host's registry and diagnostic_handle, measuring tensors whose
// formats come from format_handle, against values computed by hand.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

std::shared_ptr<format_handle> format(const std::string& name) { return format_handle::create(plugins().load(name)); }
std::shared_ptr<diagnostic_handle> diagnostic(const std::string& name) {
    return diagnostic_handle::create(plugins().load(name));
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
    EXPECT_THROW(diagnostic("e3m4"), error);              // a format, not a diagnostic
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
    EXPECT_EQ(values_of(diagnostic("stiffness")->measure(0, {view(w, *f, 2.0f)}))["stiffness_mean"], 1.0 / 256);
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
    EXPECT_TRUE(std::isnan(values_of(diagnostic("stiffness")->measure(0, {view(zeros, *f)}))["stiffness_mean"]));
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
    EXPECT_EQ(items[5].value, 0.125);    // 3.0 -> 2^-3
}
