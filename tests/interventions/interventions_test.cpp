// The bundled intervention plugins (partition_clip, mantissa_shift), loaded
// through the host's registry and intervention_handle, on hand-computed cases.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "plugins/intervention_handle.hpp"
#include "plugins/registry.hpp"
#include "util/error.hpp"

namespace altgrad {
namespace {

using host::action;
using host::intervention_handle;
using host::observation;
using host::tensor_observation;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

host::registry& bundled() {
    static host::registry reg(ALTGRAD_BUNDLED_PLUGIN_DIR);
    return reg;
}

std::shared_ptr<intervention_handle> make(const std::string& name, const host::given_params& params = {}) {
    return intervention_handle::create(bundled().load(name), params);
}

tensor_observation tensor(const std::string& name, altgrad_tensor_role role, const std::string& format,
                          double format_max, double overflow = 0.0, double stall = kNaN) {
    tensor_observation t;
    t.name = name;
    t.role = role;
    t.format = format;
    t.format_max = format_max;
    t.overflow_rate = overflow;
    t.underflow_rate = 0.0;
    t.bit_stall_rate = stall;
    return t;
}

observation step(uint64_t n, std::vector<tensor_observation> tensors, uint32_t nonfinite = 0) {
    observation o;
    o.step = n;
    o.loss = nonfinite > 0 ? kNaN : 2.5;
    o.grad_norm = nonfinite > 0 ? kInf : 1.0;
    o.learning_rate = 1e-3;
    o.consecutive_nonfinite_steps = nonfinite;
    o.tensors = std::move(tensors);
    return o;
}

// ---- partition_clip -------------------------------------------------------

TEST(PartitionClip, NoClippingBelowTheThreshold) {
    auto h = make("partition_clip");
    const auto a =
        h->observe(step(0, {tensor("fc.weight.grad", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.005)}));
    EXPECT_TRUE(a.empty());
}

TEST(PartitionClip, E3M4ThresholdAfterTwoPercentOverflow) {
    auto h = make("partition_clip");
    EXPECT_TRUE(h->observe(step(0, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.005)})).empty());
    const auto a = h->observe(step(1, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.02)}));
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].kind, ALTGRAD_ACTION_CLIP_GRAD_NORM);
    EXPECT_DOUBLE_EQ(a[0].value, 1.0 * 15.5 / 57344.0);
    EXPECT_NE(a[0].reason.find("2%"), std::string::npos) << a[0].reason;
    EXPECT_NE(a[0].reason.find("1%"), std::string::npos) << a[0].reason;
}

TEST(PartitionClip, BaseScalesAndClippingStaysOn) {
    auto h = make("partition_clip", {{"base", "2.5"}});
    ASSERT_EQ(h->observe(step(0, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.5)})).size(), 1u);
    // Overflow gone (clipping works): still on, threshold recomputed.
    const auto a = h->observe(step(1, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.0)}));
    ASSERT_EQ(a.size(), 1u);
    EXPECT_DOUBLE_EQ(a[0].value, 2.5 * 15.5 / 57344.0);
    EXPECT_NE(a[0].reason.find("since step 0"), std::string::npos) << a[0].reason;
}

TEST(PartitionClip, NarrowestGradientFormatSetsTheThresholdAndOnlyGradientsTrigger) {
    auto h = make("partition_clip");
    // Weight overflow does not switch gradient clipping on.
    EXPECT_TRUE(h->observe(step(0, {tensor("w", ALTGRAD_TENSOR_WEIGHT, "e3m4", 15.5, 0.9)})).empty());
    const auto a = h->observe(step(1, {tensor("g1", ALTGRAD_TENSOR_GRADIENT, "e5m2", 57344.0, 0.03),
                                       tensor("g2", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.0),
                                       tensor("w", ALTGRAD_TENSOR_WEIGHT, "e1m6", 1.984375, 0.0)}));
    ASSERT_EQ(a.size(), 1u);
    EXPECT_DOUBLE_EQ(a[0].value, 15.5 / 57344.0);
}

TEST(PartitionClip, NaNFieldsAndEmptyTensorListsAreHandled) {
    auto h = make("partition_clip");
    EXPECT_TRUE(h->observe(step(0, {}, 1)).empty());
    EXPECT_TRUE(h->observe(step(1, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, kNaN)}, 2)).empty());
    EXPECT_TRUE(h->observe(step(2, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", kNaN, 0.5)})).empty());
    // Now active (the rate was measured), but no range to scale by: no action.
    EXPECT_TRUE(h->observe(step(3, {})).empty());
    EXPECT_EQ(h->observe(step(4, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5)})).size(), 1u);
}

TEST(PartitionClip, RefusesZeroBase) {
    try {
        make("partition_clip", {{"base", "0"}});
        FAIL() << "accepted base = 0";
    } catch (const host::error& e) {
        EXPECT_NE(std::string(e.what()).find("'base'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("partition_clip"), std::string::npos) << e.what();
    }
}

// ---- mantissa_shift -------------------------------------------------------

TEST(MantissaShift, SwitchesE7M0ExactlyAtTheThirdNonFiniteStep) {
    auto h = make("mantissa_shift");
    const std::vector<tensor_observation> ts = {tensor("fc.weight", ALTGRAD_TENSOR_WEIGHT, "e7m0", 4.6e18),
                                                tensor("fc.bias", ALTGRAD_TENSOR_WEIGHT, "e5m2", 57344.0)};
    EXPECT_TRUE(h->observe(step(0, ts, 0)).empty());
    EXPECT_TRUE(h->observe(step(1, ts, 1)).empty());
    EXPECT_TRUE(h->observe(step(2, ts, 2)).empty());
    const auto a = h->observe(step(3, ts, 3));
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].kind, ALTGRAD_ACTION_SWITCH_FORMAT);
    EXPECT_EQ(a[0].tensor, "fc.weight");
    EXPECT_EQ(a[0].format, "e5m2");
    EXPECT_NE(a[0].reason.find("3 consecutive non-finite"), std::string::npos) << a[0].reason;
    // Not repeated while the host still reports the old format.
    EXPECT_TRUE(h->observe(step(4, ts, 4)).empty());
}

TEST(MantissaShift, ANonFiniteRunThatBreaksDoesNotTrigger) {
    auto h = make("mantissa_shift");
    const std::vector<tensor_observation> ts = {tensor("w", ALTGRAD_TENSOR_WEIGHT, "e7m0", 4.6e18)};
    EXPECT_TRUE(h->observe(step(0, ts, 1)).empty());
    EXPECT_TRUE(h->observe(step(1, ts, 2)).empty());
    EXPECT_TRUE(h->observe(step(2, ts, 0)).empty());
    EXPECT_TRUE(h->observe(step(3, ts, 1)).empty());
    EXPECT_TRUE(h->observe(step(4, ts, 2)).empty());
    EXPECT_EQ(h->observe(step(5, ts, 3)).size(), 1u);
}

TEST(MantissaShift, StalledE1M6WeightGoesToE3M4) {
    auto h = make("mantissa_shift");
    const auto a =
        h->observe(step(0, {tensor("ln.weight", ALTGRAD_TENSOR_WEIGHT, "e1m6", 1.984375, 0.0, 0.6),
                            tensor("ln.grad", ALTGRAD_TENSOR_GRADIENT, "e1m6", 1.984375, 0.0, 0.9),
                            tensor("other", ALTGRAD_TENSOR_WEIGHT, "e1m6", 1.984375, 0.0, 0.5),
                            tensor("unmeasured", ALTGRAD_TENSOR_WEIGHT, "e1m6", 1.984375, 0.0, kNaN)}));
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].tensor, "ln.weight");
    EXPECT_EQ(a[0].format, "e3m4");
    EXPECT_NE(a[0].reason.find("bit-stall"), std::string::npos) << a[0].reason;
}

TEST(MantissaShift, ChainIsFollowedOneHopAtATime) {
    auto h = make("mantissa_shift", {{"chain", "a>b, B>c"}, {"nan_patience", "1"}});
    auto a = h->observe(step(0, {tensor("t", ALTGRAD_TENSOR_ACTIVATION, "a", 1.0)}, 1));
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].format, "b");
    a = h->observe(step(1, {tensor("t", ALTGRAD_TENSOR_ACTIVATION, "b", 1.0)}, 2));
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].format, "c");
    EXPECT_TRUE(h->observe(step(2, {tensor("t", ALTGRAD_TENSOR_ACTIVATION, "c", 1.0)}, 3)).empty());
}

TEST(MantissaShift, BadChainsAreRefusedNamingTheParameter) {
    for (const char* chain : {"", "e7m0", "e7m0>", ">e5m2", "e7m0>e5m2>e3m4", "e7m0>e7m0", "a>b,a>c",
                              "a>b,b>a", "e7m0>e5m2,,e1m6>e3m4", "e7-m0>e5m2"}) {
        try {
            make("mantissa_shift", {{"chain", chain}});
            ADD_FAILURE() << "accepted chain \"" << chain << "\"";
        } catch (const host::error& e) {
            EXPECT_NE(std::string(e.what()).find("'chain'"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("invalid argument"), std::string::npos) << e.what();
        }
    }
}

TEST(MantissaShift, InstancesKeepSeparateState) {
    auto first = make("mantissa_shift");
    auto second = make("mantissa_shift");
    const std::vector<tensor_observation> ts = {tensor("w", ALTGRAD_TENSOR_WEIGHT, "e7m0", 4.6e18)};
    ASSERT_EQ(first->observe(step(0, ts, 3)).size(), 1u);
    EXPECT_TRUE(first->observe(step(1, ts, 4)).empty());    // first already asked
    EXPECT_EQ(second->observe(step(0, ts, 3)).size(), 1u);  // second has not

    auto clip_a = make("partition_clip");
    auto clip_b = make("partition_clip");
    ASSERT_EQ(clip_a->observe(step(0, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.5)})).size(), 1u);
    EXPECT_TRUE(clip_b->observe(step(0, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.0)})).empty());
}

TEST(MantissaShift, SameObservationsGiveSameActions) {
    auto run = [] {
        auto h = make("mantissa_shift");
        std::vector<std::string> out;
        for (uint32_t n = 0; n < 6; ++n)
            for (const action& a :
                 h->observe(step(n,
                                 {tensor("w", ALTGRAD_TENSOR_WEIGHT, "e0m7", 0.9921875, 0.0, n * 0.2),
                                  tensor("x", ALTGRAD_TENSOR_ACTIVATION, "e7m0", 4.6e18)},
                                 n)))
                out.push_back(a.tensor + ">" + a.format + ":" + a.reason);
        return out;
    };
    const auto a = run();
    EXPECT_EQ(a, run());
    EXPECT_EQ(a.size(), 2u);
}

TEST(MantissaShift, NaNFieldsAndEmptyTensorListsAreHandled) {
    auto h = make("mantissa_shift");
    EXPECT_TRUE(h->observe(step(0, {}, 5)).empty());
    observation o = step(1, {tensor("w", ALTGRAD_TENSOR_WEIGHT, "e7m0", kNaN, kNaN, kNaN)}, 0);
    o.loss = kNaN;
    o.grad_norm = kNaN;
    o.learning_rate = kNaN;
    EXPECT_TRUE(h->observe(o).empty());
}

// ---- saved state (ABI 1.1) ------------------------------------------------

TEST(PartitionClip, SavedStateKeepsClippingOnInAFreshInstance) {
    auto original = make("partition_clip");
    ASSERT_EQ(original->observe(step(0, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.5)})).size(),
              1u);
    ASSERT_TRUE(original->saves_state());
    auto restored = make("partition_clip");
    restored->load_state(original->save_state());
    // No overflow now: only an instance that knows clipping is on clips.
    const observation calm = step(1, {tensor("g", ALTGRAD_TENSOR_GRADIENT, "e3m4", 15.5, 0.0)});
    const auto a = restored->observe(calm);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_DOUBLE_EQ(a[0].value, 15.5 / 57344.0);
    EXPECT_NE(a[0].reason.find("since step 0"), std::string::npos) << a[0].reason;
    EXPECT_EQ(a[0].reason, original->observe(calm)[0].reason);
    EXPECT_TRUE(make("partition_clip")->observe(calm).empty());
}

TEST(MantissaShift, SavedStateRemembersTheSwitchesAskedFor) {
    const std::vector<tensor_observation> ts = {tensor("fc.weight", ALTGRAD_TENSOR_WEIGHT, "e7m0", 4.6e18)};
    auto original = make("mantissa_shift");
    ASSERT_EQ(original->observe(step(3, ts, 3)).size(), 1u);
    auto restored = make("mantissa_shift");
    restored->load_state(original->save_state());
    // Still reported in e7m0 (the switch not applied yet): not asked again.
    EXPECT_TRUE(restored->observe(step(4, ts, 4)).empty());
    EXPECT_EQ(make("mantissa_shift")->observe(step(4, ts, 4)).size(), 1u);
}

TEST(Interventions, UnreadableSavedStateIsRefusedNamingThePluginAndWhat) {
    auto original = make("mantissa_shift");
    ASSERT_EQ(original->observe(step(3, {tensor("w", ALTGRAD_TENSOR_WEIGHT, "e7m0", 4.6e18)}, 3)).size(), 1u);
    const std::string good = original->save_state();
    std::string other_layout = good;
    other_layout[0] = '\x02';  // little-endian u32 layout version 2
    const std::vector<std::pair<std::string, std::string>> cases = {
        {good.substr(0, good.size() - 1), "runs past the end"},
        {good + "x", "1 byte(s) left unread"},
        {other_layout, "layout version 2, this plugin reads 1"},
        {"", "layout version runs past the end"},
    };
    for (const auto& [bytes, why] : cases) {
        try {
            make("mantissa_shift")->load_state(bytes);
            ADD_FAILURE() << "accepted a state of " << bytes.size() << " bytes";
        } catch (const host::error& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find("plugin 'mantissa_shift': load_state failed (invalid argument)"),
                      std::string::npos)
                << m;
            EXPECT_NE(m.find(why), std::string::npos) << m;
        }
    }
}

TEST(Interventions, FormatPluginIsNotAnIntervention) {
    EXPECT_THROW(intervention_handle::create(bundled().load("e3m4")), host::error);
}

// The SDK adapter's checks, through the raw C vtable.
TEST(Interventions, AdapterChecksTheCallersStructs) {
    auto plugin = bundled().load("mantissa_shift");
    const altgrad_intervention_vtable* v = plugin->entry->intervention;
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(plugin->entry->format, nullptr);
    EXPECT_EQ(plugin->entry->diagnostic, nullptr);
    EXPECT_EQ(plugin->descriptor().kind, ALTGRAD_KIND_INTERVENTION);
    auto h = intervention_handle::create(plugin);  // for a valid param list
    altgrad_error e{};
    e.struct_size = sizeof e;
    altgrad_intervention* inst = nullptr;
    altgrad_param items[3] = {};
    items[0] = {sizeof(altgrad_param), "chain", ALTGRAD_PARAM_STRING, 0, 0, 0.0, "e7m0>e5m2"};
    items[1] = {sizeof(altgrad_param), "nan_patience", ALTGRAD_PARAM_INT, 0, 3, 0.0, nullptr};
    items[2] = {sizeof(altgrad_param), "stall_threshold", ALTGRAD_PARAM_FLOAT, 0, 0, 0.5, nullptr};
    const altgrad_param_list list{sizeof list, items, 3};
    ASSERT_EQ(v->create(&list, &inst, &e), ALTGRAD_STATUS_OK) << e.message;

    altgrad_tensor_observation t{sizeof t, "w", ALTGRAD_TENSOR_WEIGHT, "e7m0", 1.0, 0.0, 0.0, kNaN};
    altgrad_observation o{sizeof o, 0, kNaN, kNaN, 1e-3, 3, &t, 1};
    altgrad_action one{};
    one.struct_size = sizeof one;
    altgrad_action_buffer none{sizeof none, &one, 0, 7};
    EXPECT_EQ(v->observe(inst, &o, &none, &e), ALTGRAD_STATUS_INVALID_ARGUMENT);  // full
    EXPECT_NE(std::string(e.message).find("full"), std::string::npos) << e.message;
    EXPECT_EQ(none.count, 0u);
    altgrad_action_buffer buf{sizeof buf, &one, 1, 0};
    EXPECT_EQ(v->observe(inst, nullptr, &buf, &e), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(v->observe(inst, &o, nullptr, &e), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(v->observe(nullptr, &o, &buf, &e), ALTGRAD_STATUS_INVALID_ARGUMENT);
    altgrad_observation no_tensors = o;
    no_tensors.tensors = nullptr;
    EXPECT_EQ(v->observe(inst, &no_tensors, &buf, &e), ALTGRAD_STATUS_INVALID_ARGUMENT);
    altgrad_observation small = o;
    small.struct_size = sizeof(size_t);
    EXPECT_EQ(v->observe(inst, &small, &buf, &e), ALTGRAD_STATUS_INVALID_ARGUMENT);
    altgrad_tensor_observation unnamed = t;
    unnamed.name = nullptr;
    altgrad_observation bad_tensor = o;
    bad_tensor.tensors = &unnamed;
    EXPECT_EQ(v->observe(inst, &bad_tensor, &buf, &e), ALTGRAD_STATUS_INVALID_ARGUMENT);
    one.struct_size = sizeof(size_t);  // an entry smaller than v1
    EXPECT_EQ(v->observe(inst, &o, &buf, &e), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(buf.count, 0u);
    one.struct_size = sizeof one;
    ASSERT_EQ(v->observe(inst, &o, &buf, &e), ALTGRAD_STATUS_OK) << e.message;  // refused calls left no state
    ASSERT_EQ(buf.count, 1u);
    EXPECT_EQ(one.kind, ALTGRAD_ACTION_SWITCH_FORMAT);
    EXPECT_STREQ(one.tensor, "w");
    EXPECT_STREQ(one.format, "e5m2");
    v->destroy(inst);
    v->destroy(nullptr);
}

// ---- precision_schedule -----------------------------------------------------

observation run_step(uint64_t n, uint64_t max_steps) {
    observation o = step(n, {tensor("blocks.0.mlp.fc.weight", ALTGRAD_TENSOR_WEIGHT, "fp4_e2m1", 6.0)});
    o.max_steps = max_steps;
    return o;
}

// The steps at which the plugin asks for anything, over a whole run.
std::vector<uint64_t> asking_steps(intervention_handle& h, uint64_t max_steps) {
    std::vector<uint64_t> out;
    for (uint64_t n = 0; n < max_steps; ++n)
        if (!h.observe(run_step(n, max_steps)).empty()) out.push_back(n);
    return out;
}

// at_fraction 0.8 of 500 steps: steps 400..499 in BF16, so the switch is
// asked for once, when step 399 is observed (actions act from the next step).
TEST(PrecisionSchedule, SwitchesEverythingOnceForTheLastFifth) {
    auto h = make("precision_schedule");
    EXPECT_EQ(asking_steps(*h, 500), (std::vector<uint64_t>{399}));
    const auto a = h->observe(run_step(399, 500));
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].kind, ALTGRAD_ACTION_SWITCH_FORMAT);
    EXPECT_EQ(a[0].tensor, "*");
    EXPECT_EQ(a[0].format, "bf16");
    EXPECT_NE(a[0].reason.find("from step 400"), std::string::npos) << a[0].reason;
}

// ceil: 0.82 of 10 steps is 8.2, so steps 9.. switch (asked at step 8).
TEST(PrecisionSchedule, FractionRoundsUpAndAtStepWins) {
    EXPECT_EQ(asking_steps(*make("precision_schedule", {{"at_fraction", "0.82"}}), 10),
              (std::vector<uint64_t>{8}));
    auto h = make("precision_schedule",
                  {{"at_step", "3"}, {"at_fraction", "0.5"}, {"to", "fp32"}, {"tensors", "*.input"}});
    EXPECT_EQ(asking_steps(*h, 10), (std::vector<uint64_t>{2}));
    const auto a = h->observe(run_step(2, 10));
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].tensor, "*.input");
    EXPECT_EQ(a[0].format, "fp32");
}

// No run length (a host before ABI 1.4, or the kit) or a fraction of 0: never.
TEST(PrecisionSchedule, WithoutARunLengthNothing) {
    EXPECT_TRUE(asking_steps(*make("precision_schedule"), 0).empty());
    auto h = make("precision_schedule");
    for (uint64_t n = 0; n < 600; ++n) EXPECT_TRUE(h->observe(run_step(n, 0)).empty());
    EXPECT_TRUE(asking_steps(*make("precision_schedule", {{"at_fraction", "0"}}), 100).empty());
}

TEST(PrecisionSchedule, BadParametersAreRefused) {
    for (const auto& [key, value, what] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"to", "BF16", "parameter 'to'"},
             {"tensors", "", "parameter 'tensors'"},
             {"at_step", "-1", "at_step"},
             {"at_fraction", "1.5", "at_fraction"}}) {
        try {
            make("precision_schedule", {{key, value}});
            ADD_FAILURE() << key << " = " << value << " accepted";
        } catch (const std::exception& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace altgrad
