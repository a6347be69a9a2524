// Failure detection and the failure report (host/src/stability/): the detector
// on hand-built sequences of step records (run::train_line) (every expected verdict reasoned from
// failure.hpp's rules, not read off the code), and the report's markdown on
// hand-built failure_contexts.
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/run_config.hpp"
#include "config/writer.hpp"
#include "stability/failure.hpp"
#include "stability/failure_report.hpp"
#include "util/error.hpp"

namespace altgrad::test {
namespace {

using namespace host::stability;
using host::config::failure_config;
using host::config::run_config;

using host::run::tensor_line;
using host::run::train_line;

// A tensor at its last use with these rates, of 1000 elements (every rate here
// a whole number of them); bit_stall_rate NaN: not measured.
tensor_line tensor(const std::string& name, const std::string& role, const std::string& format,
                   double overflow_rate, double underflow_rate, double bit_stall_rate) {
    tensor_line t{0, name, role, format, {}};
    t.values = {{"overflow", std::round(overflow_rate * 1000)},
                {"underflow", std::round(underflow_rate * 1000)},
                {"count", 1000}};
    if (!std::isnan(bit_stall_rate)) t.values.set("bit_stall_rate", bit_stall_rate);
    return t;
}

// The mantissa bits of the formats these reports name.
const std::map<std::string, int> kMantissaBits = {{"e7m0", 0}, {"e5m2", 2}, {"e4m3", 3}, {"e3m4", 4}};

// A step's record as the trainer writes it: loss and gradient norm, nothing else measured.
train_line finite_step(int64_t step, double loss = 4.0) {
    return {step, {{"loss", loss}, {"grad_norm", 1.0}}};
}

train_line nonfinite_step(int64_t step) { return {step, {{"loss", NAN}, {"grad_norm", NAN}}}; }

train_line overflow_step(int64_t step, double rate) {
    train_line e = finite_step(step);
    e.values.set("overflow_rate", rate);
    return e;
}

train_line sparsity_step(int64_t step, double rate) {
    train_line e = finite_step(step);
    e.values.set("grad_sparsity", rate);
    return e;
}

// A bit-stall measurement (every diagnostic interval) whose step's loss is `loss`.
train_line stall_step(int64_t step, double rate, double loss) {
    train_line e = finite_step(step, loss);
    e.values.set("bit_stall", rate);
    return e;
}

// ---- failure_mode_name -----------------------------------------------------------

TEST(FailureModeName, EveryMode) {
    EXPECT_STREQ(failure_mode_name(failure_mode::none), "none");
    EXPECT_STREQ(failure_mode_name(failure_mode::nan_loss), "nan_loss");
    EXPECT_STREQ(failure_mode_name(failure_mode::bit_stall), "bit_stall");
    EXPECT_STREQ(failure_mode_name(failure_mode::overflow), "overflow");
    EXPECT_STREQ(failure_mode_name(failure_mode::early_stop), "early_stop");
    EXPECT_STREQ(failure_mode_name(failure_mode::gradient_vanishing), "gradient_vanishing");
    EXPECT_STREQ(failure_mode_name(failure_mode::unknown), "unknown");
}

// ---- nan_loss --------------------------------------------------------------------

TEST(FailureDetector, WithoutInterventionsTheFirstNonFiniteStepIsNanLoss) {
    failure_detector d(failure_config{}, /*interventions_enabled=*/false, /*weights_in_format=*/true, 500);
    for (int64_t s = 1; s <= 3; ++s) EXPECT_FALSE(d.observe(finite_step(s))) << s;
    const std::optional<verdict> v = d.observe(nonfinite_step(4));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::nan_loss);
    EXPECT_EQ(v->evidence_step, 4);
    EXPECT_EQ(v->decided_step, 4);
    EXPECT_NE(v->evidence.find("from step 4"), std::string::npos) << v->evidence;
    EXPECT_EQ(d.consecutive_nonfinite(), 1u);
}

TEST(FailureDetector, AStepWithAFiniteLossButANonFiniteGradientCountsToo) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true, 500);
    train_line e = finite_step(7, 3.5);  // loss finite, gradient norm not
    e.values.set("grad_norm", INFINITY);
    const std::optional<verdict> v = d.observe(e);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::nan_loss);
    EXPECT_EQ(v->evidence_step, 7);
}

TEST(FailureDetector, WithInterventionsMaxNonFiniteStepsAreToleratedThenNanLoss) {
    failure_config c;
    c.max_nonfinite_steps = 3;
    failure_detector d(c, /*interventions_enabled=*/true, /*weights_in_format=*/true, 500);
    EXPECT_FALSE(d.observe(finite_step(1)));
    // Three in a row are tolerated (an intervention may act on them).
    for (int64_t s = 2; s <= 4; ++s) {
        EXPECT_FALSE(d.observe(nonfinite_step(s))) << s;
        EXPECT_EQ(d.consecutive_nonfinite(), static_cast<uint32_t>(s - 1));
    }
    // A finite step in between resets the count.
    EXPECT_FALSE(d.observe(finite_step(5)));
    EXPECT_EQ(d.consecutive_nonfinite(), 0u);
    for (int64_t s = 6; s <= 8; ++s) EXPECT_FALSE(d.observe(nonfinite_step(s))) << s;
    // The fourth in a row is one too many: decided here, evidence from the first of this run (6, not 2).
    const std::optional<verdict> v = d.observe(nonfinite_step(9));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::nan_loss);
    EXPECT_EQ(v->evidence_step, 6);
    EXPECT_EQ(v->decided_step, 9);
    EXPECT_EQ(d.consecutive_nonfinite(), 4u);
    EXPECT_NE(v->evidence.find("from step 6, 4 step(s) in a row"), std::string::npos) << v->evidence;
    EXPECT_NE(v->evidence.find("3 tolerated"), std::string::npos) << v->evidence;
}

TEST(FailureDetector, TheDefaultToleranceIsTenNonFiniteSteps) {
    failure_detector d(failure_config{}, true, /*weights_in_format=*/true, 500);
    for (int64_t s = 100; s < 110; ++s) EXPECT_FALSE(d.observe(nonfinite_step(s))) << s;
    const std::optional<verdict> v = d.observe(nonfinite_step(110));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::nan_loss);
    EXPECT_EQ(v->evidence_step, 100);
    EXPECT_EQ(v->decided_step, 110);
}

// ---- overflow and gradient_vanishing ----------------------------------------------

TEST(FailureDetector, OverflowAboveThresholdForPatienceStepsFromTheFirstOfTheStreak) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true, 500);  // overflow 0.1, patience 3
    EXPECT_FALSE(d.observe(overflow_step(1, 0.2)));
    EXPECT_FALSE(d.observe(overflow_step(2, 0.3)));
    EXPECT_FALSE(d.observe(overflow_step(3, 0.05)));  // a dip below: the streak restarts
    EXPECT_FALSE(d.observe(overflow_step(4, 0.2)));
    EXPECT_FALSE(d.observe(overflow_step(5, NAN)));   // not measured: neither grows nor breaks
    EXPECT_FALSE(d.observe(finite_step(6)));          // the same (overflow_rate defaults to NaN)
    EXPECT_FALSE(d.observe(overflow_step(7, 0.15)));  // 2 of 3
    const std::optional<verdict> v = d.observe(overflow_step(8, 0.11));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::overflow);
    EXPECT_EQ(v->evidence_step, 4);
    EXPECT_EQ(v->decided_step, 8);
    EXPECT_NE(v->evidence.find("above 10.0%"), std::string::npos) << v->evidence;
    EXPECT_NE(v->evidence.find("3 consecutive measurements from step 4 (20.0% then, 11.0% now)"),
              std::string::npos)
        << v->evidence;
}

// What a checkpoint keeps of the detector: a detector restored from the text
// two steps into an overflow streak decides at the third step, with the
// streak's first step and value, as the original does; a fresh one does not.
TEST(FailureDetector, ARestoredDetectorContinuesItsStreaks) {
    failure_detector original(failure_config{}, false, /*weights_in_format=*/true,
                              500);  // overflow 0.1, patience 3
    EXPECT_FALSE(original.observe(overflow_step(1, 0.2)));
    EXPECT_FALSE(original.observe(overflow_step(2, 0.3)));
    // A measurement: the window (4.0 + 4.0 + 3.25) / 3 = 3.75 becomes the previous window loss.
    EXPECT_FALSE(original.observe(stall_step(2, 0.1, 3.25)));
    failure_detector restored(failure_config{}, false, /*weights_in_format=*/true, 500);
    restored.restore(original.state());
    EXPECT_EQ(restored.state().overflow.length, 2);
    EXPECT_EQ(restored.state().overflow.first_step, 1);
    EXPECT_EQ(restored.state().previous_window_loss, 3.75);
    const std::optional<verdict> v = restored.observe(overflow_step(3, 0.4));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::overflow);
    EXPECT_EQ(v->evidence_step, 1);
    EXPECT_NE(v->evidence.find("from step 1 (20.0% then, 40.0% now)"), std::string::npos) << v->evidence;
    failure_detector fresh(failure_config{}, false, /*weights_in_format=*/true, 500);
    EXPECT_FALSE(fresh.observe(overflow_step(3, 0.4)));
}

TEST(FailureDetector, ARateAtTheThresholdIsNotAbove) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true, 500);
    EXPECT_FALSE(d.observe(overflow_step(1, 0.5)));
    EXPECT_FALSE(d.observe(overflow_step(2, 0.5)));
    EXPECT_FALSE(d.observe(overflow_step(3, 0.1)));  // equal to failure.overflow: breaks the streak
    EXPECT_FALSE(d.observe(overflow_step(4, 0.5)));
    EXPECT_FALSE(d.observe(overflow_step(5, 0.5)));
    const std::optional<verdict> v = d.observe(overflow_step(6, 0.5));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->evidence_step, 4);
}

TEST(FailureDetector, PatienceOneDecidesAtTheFirstStepAbove) {
    failure_config c;
    c.patience = 1;
    failure_detector d(c, false, /*weights_in_format=*/true, 500);
    EXPECT_FALSE(d.observe(overflow_step(1, 0.05)));
    const std::optional<verdict> v = d.observe(overflow_step(2, 0.5));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::overflow);
    EXPECT_EQ(v->evidence_step, 2);
    EXPECT_EQ(v->decided_step, 2);
}

TEST(FailureDetector, GradientVanishingAboveThresholdForPatienceSteps) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true,
                       500);  // vanishing 0.7, patience 3
    EXPECT_FALSE(d.observe(sparsity_step(10, 0.9)));
    EXPECT_FALSE(d.observe(sparsity_step(11, 0.6)));  // below: resets
    EXPECT_FALSE(d.observe(sparsity_step(12, 0.8)));
    EXPECT_FALSE(d.observe(sparsity_step(13, NAN)));
    EXPECT_FALSE(d.observe(sparsity_step(14, 0.75)));
    const std::optional<verdict> v = d.observe(sparsity_step(15, 0.95));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::gradient_vanishing);
    EXPECT_EQ(v->evidence_step, 12);
    EXPECT_EQ(v->decided_step, 15);
}

TEST(FailureDetector, NonFiniteStepsDoNotBreakARateStreak) {
    // With interventions the tolerated non-finite steps still carry rates.
    failure_detector d(failure_config{}, true, /*weights_in_format=*/true, 500);
    EXPECT_FALSE(d.observe(overflow_step(1, 0.5)));
    train_line e = nonfinite_step(2);
    e.values.set("overflow_rate", 0.6);
    EXPECT_FALSE(d.observe(e));
    const std::optional<verdict> v = d.observe(overflow_step(3, 0.7));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::overflow);
    EXPECT_EQ(v->evidence_step, 1);
}

// ---- bit_stall --------------------------------------------------------------------

TEST(FailureDetector, BitStallWithMasterWeightsNeverCollapses) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/false, 100000);
    // Every weight frozen and the loss flat, but the updates accumulate in FP32 master weights.
    for (int64_t s = 50; s <= 1000; s += 50) EXPECT_FALSE(d.observe(stall_step(s, 1.0, 5.0))) << s;
}

TEST(FailureDetector, BitStallWhileTheLossImprovesNeverCollapses) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true, 100000);  // min_progress 0.01
    double loss = 10.0;
    for (int64_t s = 50; s <= 1000; s += 50) {
        EXPECT_FALSE(d.observe(stall_step(s, 0.9, loss))) << s;
        loss *= 0.98;  // 2% better per interval: more than min_progress
    }
}

TEST(FailureDetector, BitStallWithoutProgressForPatienceMeasurements) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true,
                       100000);  // bit_stall 0.5, min_progress 0.01, patience 3
    // The first measurement has no previous window: it counts as progress.
    EXPECT_FALSE(d.observe(stall_step(50, 0.9, 5.0)));
    // Steps between measurements (no bit stall) neither grow nor break the
    // streak; their losses are in the next window.
    EXPECT_FALSE(d.observe(finite_step(51, 4.99)));
    // The window's mean, 4.99, is not below 5.0 * 0.99 = 4.95: no progress, stall 1 of 3.
    EXPECT_FALSE(d.observe(stall_step(100, 0.9, 4.99)));
    EXPECT_FALSE(d.observe(finite_step(101, 4.98)));
    EXPECT_FALSE(d.observe(stall_step(150, 0.8, 4.98)));                      // 4.98 >= 4.99 * 0.99: 2 of 3
    const std::optional<verdict> v = d.observe(stall_step(200, 0.7, 4.985));  // worse: 3 of 3
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::bit_stall);
    EXPECT_EQ(v->evidence_step, 100);
    EXPECT_EQ(v->decided_step, 200);
    EXPECT_NE(v->evidence.find("from step 100 (90.0% then, 70.0% now)"), std::string::npos) << v->evidence;
}

// The loss a measurement compares is the mean of the finite training losses
// since the previous measurement, its own step's included.
TEST(FailureDetector, TheWindowIsTheMeanOfTheFiniteLossesSinceTheLastMeasurement) {
    failure_config c;
    c.patience = 1;
    c.max_nonfinite_steps = 5;
    failure_detector d(c, /*interventions_enabled=*/true, /*weights_in_format=*/true, 100000);
    EXPECT_FALSE(d.observe(stall_step(50, 0.9, 5.0)));  // window 5.0, the first: progress
    EXPECT_FALSE(d.observe(finite_step(51, 6.0)));
    EXPECT_FALSE(d.observe(nonfinite_step(52)));  // not finite: not in the window (tolerated)
    // (6.0 + 3.0) / 2 = 4.5 < 5.0 * 0.99 = 4.95: progress, no stall.
    EXPECT_FALSE(d.observe(stall_step(100, 0.9, 3.0)));
    // (4.46 + 4.5) / 2 = 4.48 >= 4.5 * 0.99 = 4.455: no progress, stall (patience 1). Had the
    // window kept step 100's 3.0 it would read 3.99: progress.
    EXPECT_FALSE(d.observe(finite_step(101, 4.46)));
    const std::optional<verdict> v = d.observe(stall_step(150, 0.9, 4.5));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::bit_stall);
    EXPECT_EQ(v->evidence_step, 150);
    EXPECT_EQ(d.state().window_loss_n, 0);  // reset at the measurement
}

TEST(FailureDetector, TheFirstMeasurementCountsAsProgress) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true, 100000);
    // A flat loss from the start: the first measurement cannot count (no previous window),
    // so the third stalled one is the fourth measurement, and the evidence starts at the second.
    EXPECT_FALSE(d.observe(stall_step(50, 1.0, 5.0)));
    EXPECT_FALSE(d.observe(stall_step(100, 1.0, 5.0)));
    EXPECT_FALSE(d.observe(stall_step(150, 1.0, 5.0)));
    const std::optional<verdict> v = d.observe(stall_step(200, 1.0, 5.0));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::bit_stall);
    EXPECT_EQ(v->evidence_step, 100);
    EXPECT_EQ(v->decided_step, 200);
}

TEST(FailureDetector, BitStallStreakBreaksOnProgressOrALowRate) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true, 100000);
    EXPECT_FALSE(d.observe(stall_step(50, 0.9, 5.0)));   // first: progress
    EXPECT_FALSE(d.observe(stall_step(100, 0.9, 5.0)));  // stall 1
    EXPECT_FALSE(d.observe(stall_step(150, 0.9, 5.0)));  // stall 2
    EXPECT_FALSE(d.observe(stall_step(200, 0.9, 4.0)));  // 4.0 < 4.95: progress, resets
    EXPECT_FALSE(d.observe(stall_step(250, 0.9, 4.0)));  // stall 1
    EXPECT_FALSE(d.observe(stall_step(300, 0.5, 4.0)));  // rate not above 0.5: resets
    EXPECT_FALSE(d.observe(stall_step(350, 0.9, 4.0)));  // stall 1
    EXPECT_FALSE(d.observe(stall_step(400, 0.4, 4.0)));  // rate not above 0.5 again: resets
    EXPECT_FALSE(d.observe(stall_step(450, 0.9, 4.0)));  // stall 1
    EXPECT_FALSE(d.observe(stall_step(500, 0.9, 4.0)));  // stall 2
    const std::optional<verdict> v = d.observe(stall_step(550, 0.9, 4.0));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->evidence_step, 450);
}

// ---- Priority --------------------------------------------------------------------

TEST(FailureDetector, NanLossWinsOverACoincidingOverflow) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true, 500);
    EXPECT_FALSE(d.observe(overflow_step(1, 0.5)));
    EXPECT_FALSE(d.observe(overflow_step(2, 0.5)));
    train_line e = nonfinite_step(3);
    e.values.set("overflow_rate", 0.5);  // overflow's third step too
    const std::optional<verdict> v = d.observe(e);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->mode, failure_mode::nan_loss);
    EXPECT_EQ(v->evidence_step, 3);
}

TEST(FailureDetector, BitStallThenOverflowThenVanishing) {
    failure_config c;
    c.patience = 1;
    {
        failure_detector d(c, false, /*weights_in_format=*/true, 500);
        EXPECT_FALSE(d.observe(stall_step(50, 0.9, 5.0)));  // first measurement: progress
        train_line e = stall_step(100, 0.9, 5.0);
        e.values.set("overflow_rate", 0.5);
        e.values.set("grad_sparsity", 0.9);
        const std::optional<verdict> v = d.observe(e);
        ASSERT_TRUE(v);
        EXPECT_EQ(v->mode, failure_mode::bit_stall);
    }
    {
        failure_detector d(c, false, /*weights_in_format=*/true, 500);
        train_line e = overflow_step(1, 0.5);
        e.values.set("grad_sparsity", 0.9);
        const std::optional<verdict> v = d.observe(e);
        ASSERT_TRUE(v);
        EXPECT_EQ(v->mode, failure_mode::overflow);
    }
    {
        failure_detector d(c, false, /*weights_in_format=*/true, 500);
        train_line e = nonfinite_step(1);
        e.values.set("overflow_rate", 0.5);
        e.values.set("grad_sparsity", 0.9);
        const std::optional<verdict> v = d.observe(e);
        ASSERT_TRUE(v);
        EXPECT_EQ(v->mode, failure_mode::nan_loss);
    }
}

// ---- stopped_early ---------------------------------------------------------------

TEST(FailureDetector, StoppedEarlyBeforeTheEarlyStopFractionElseUnknown) {
    failure_detector d(failure_config{}, false, /*weights_in_format=*/true,
                       500);  // early_stop 0.1: before step 50
    const verdict early = d.stopped_early(49, "out of memory");
    EXPECT_EQ(early.mode, failure_mode::early_stop);
    EXPECT_EQ(early.evidence_step, 49);
    EXPECT_EQ(early.decided_step, 49);
    EXPECT_NE(early.evidence.find("stopped at step 49 of 500"), std::string::npos) << early.evidence;
    EXPECT_NE(early.evidence.find("out of memory"), std::string::npos) << early.evidence;
    EXPECT_NE(early.evidence.find("before 10.0%"), std::string::npos) << early.evidence;

    EXPECT_EQ(d.stopped_early(50, "x").mode, failure_mode::unknown);  // at the fraction: not before it
    const verdict late = d.stopped_early(400, "disk full");
    EXPECT_EQ(late.mode, failure_mode::unknown);
    EXPECT_EQ(late.evidence_step, 400);
    EXPECT_NE(late.evidence.find("disk full"), std::string::npos) << late.evidence;
    EXPECT_EQ(late.evidence.find("before"), std::string::npos) << late.evidence;

    failure_config c;
    c.early_stop = 0.5;
    EXPECT_EQ(failure_detector(c, false, true, 500).stopped_early(249, "x").mode, failure_mode::early_stop);
    EXPECT_EQ(failure_detector(c, false, true, 500).stopped_early(250, "x").mode, failure_mode::unknown);
    c.early_stop = 0.0;
    EXPECT_EQ(failure_detector(c, false, true, 500).stopped_early(0, "x").mode, failure_mode::unknown);
}

// ---- The failure report ------------------------------------------------------------

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// An E7M0 run with its weights stored in the format, stalled.
failure_context bit_stall_context() {
    failure_context x;
    x.mantissa_bits = kMantissaBits;
    x.config = host::config::parse_config(
        "[quantization]\nweight_format = \"e7m0\"\nshadow_weights = false\n", "runs/e7m0_stall.toml");
    x.collapse.mode = failure_mode::bit_stall;
    x.collapse.evidence_step = 150;
    x.collapse.decided_step = 250;
    x.collapse.evidence = "weight bit-stall rate (loss not improving) above 50.0%";
    x.checkpoint = "checkpoints/step_250.pt";
    x.learning_rate = 6e-4;
    x.median_abs_weight = 0.02;
    const tensor_line qkv = tensor("blocks.0.attn.qkv.weight", "weight", "e7m0", 0.0, 0.0, 0.6);
    const tensor_line fc = tensor("blocks.0.mlp.fc.weight", "weight", "e7m0", 0.0, 0.0, 1.0);
    const tensor_line head = tensor("lm_head.weight", "weight", "e7m0", 0.0, 0.0, 0.2);
    const tensor_line act = tensor("blocks.0.mlp.fc.activation", "activation", "e5m2", 0.0, 0.0, NAN);
    x.tensors = {qkv, fc, head, act};
    x.trend = {{240, {{"loss", 5.5}, {"grad_norm", 1.25}, {"grad_sparsity", 0.1}, {"overflow_rate", 0.0}}},
               {250,
                {{"loss", 5.49},
                 {"grad_norm", 1.1},
                 {"grad_sparsity", 0.12},
                 {"overflow_rate", 0.0},
                 {"bit_stall", 0.8}}}};
    x.diagnostics = {{200, "stiffness.stiffness_mean", 0.5},
                     {250, "stiffness.stiffness_mean", 0.75},
                     {250, "grid_alignment.alignment_mean", 0.9}};
    x.events = {"step 120: mantissa_shift moved blocks.0.mlp.fc.weight e7m0 > e5m2"};
    return x;
}

TEST(FailureReport, BitStallWithWeightsInTheirFormat) {
    const failure_context x = bit_stall_context();
    const std::string md = failure_report_markdown(x);
    SCOPED_TRACE(md);
    EXPECT_EQ(md.rfind("# Failure report: e7m0_stall\n", 0), 0u);
    EXPECT_TRUE(has(md, "| failure mode | **bit_stall** |\n"));
    EXPECT_TRUE(has(md, "| collapse step (first evidence) | 150 |\n"));
    EXPECT_TRUE(has(md, "| decided at step | 250 of 500 |\n"));
    EXPECT_TRUE(has(md, "| evidence | weight bit-stall rate (loss not improving) above 50.0% |\n"));
    EXPECT_TRUE(has(md, "| checkpoint | `checkpoints/step_250.pt` |\n"));
    EXPECT_TRUE(has(md, "| learning rate | 0.0006 |\n"));

    // Gradients, from the last trend row.
    EXPECT_TRUE(has(md,
                    "Gradient sparsity (parameter-gradient elements with |g| <= 1e-08) at step 250: 12.0%; "
                    "gradient norm 1.1.\n"));

    // The weight that kept every value (rate 1.0) is named; the table is by rate, highest first.
    EXPECT_TRUE(has(md,
                    "1 of 3 weight tensors kept every quantized value since the previous measurement: "
                    "`blocks.0.mlp.fc.weight`\n"));
    const size_t fc = md.find("| blocks.0.mlp.fc.weight | e7m0 | 100.0% |\n");
    const size_t qkv = md.find("| blocks.0.attn.qkv.weight | e7m0 | 60.0% |\n");
    const size_t head = md.find("| lm_head.weight | e7m0 | 20.0% |\n");
    ASSERT_NE(fc, std::string::npos);
    ASSERT_NE(qkv, std::string::npos);
    ASSERT_NE(head, std::string::npos);
    EXPECT_LT(fc, qkv);
    EXPECT_LT(qkv, head);
    EXPECT_FALSE(has(md, "| blocks.0.mlp.fc.activation |"));  // weights only

    // The trend, oldest first, "-" where not measured.
    const size_t r240 = md.find("| 240 | 5.5 | 1.25 | 10.0% | 0.0% | - |\n");
    const size_t r250 = md.find("| 250 | 5.49 | 1.1 | 12.0% | 0.0% | 80.0% |\n");
    ASSERT_NE(r240, std::string::npos);
    ASSERT_NE(r250, std::string::npos);
    EXPECT_LT(r240, r250);

    // Diagnostics: one column per step, one row per value (by name), "-" where not measured.
    EXPECT_TRUE(has(md, "| value | step 200 | step 250 |\n|---|---|---|\n"));
    EXPECT_TRUE(has(md, "| grid_alignment.alignment_mean | - | 0.9 |\n"));
    EXPECT_TRUE(has(md, "| stiffness.stiffness_mean | 0.5 | 0.75 |\n"));

    EXPECT_TRUE(
        has(md, "## Interventions\n\n- step 120: mantissa_shift moved blocks.0.mlp.fc.weight e7m0 > e5m2\n"));

    // Recommendations. median |w| = 0.02: floor(log2 0.02) = -6 (2^-6 = 0.015625 <= 0.02 < 0.03125);
    // M = 0: neighbours 2^-6 apart, half gap 0.5 * 2^-6 = 0.0078125, "%.4g" -> 0.007812.
    EXPECT_TRUE(has(md, "- Set `quantization.shadow_weights = true`"));
    EXPECT_TRUE(
        has(md,
            "At the median weight |w| = 0.02 the format's half gap is 0.007812, against a learning rate "
            "of 0.0006"));
    EXPECT_TRUE(has(md, "- Or store with `quantization.forward_rounding = \"stochastic\"`"));
    // Most stalled: above failure.bit_stall (0.5) only, highest first.
    EXPECT_TRUE(has(md,
                    "- Most stalled: blocks.0.mlp.fc.weight (e7m0, 100.0%), blocks.0.attn.qkv.weight (e7m0, "
                    "60.0%); their format has 0 mantissa bit(s)"));
    EXPECT_TRUE(has(md, "- Enable `mantissa_shift`"));
    EXPECT_FALSE(has(md, "None follow"));

    // The resolved config, as to_toml writes it.
    EXPECT_TRUE(has(md, "## Config (resolved)\n\n```toml\n" + host::config::to_toml(x.config) + "```\n"));
    EXPECT_TRUE(has(md, "shadow_weights = false\n"));
}

TEST(FailureReport, BitStallHalfGapFollowsTheMantissaBits) {
    failure_context x = bit_stall_context();
    // E3M4 weights at median |w| = 0.3: floor(log2 0.3) = -2, half gap 0.5 * 2^(-2-4) = 2^-7 = 0.0078125.
    x.median_abs_weight = 0.3;
    for (tensor_line& t : x.tensors)
        if (t.role == "weight") t.format = "e3m4";  // 4 mantissa bits (kMantissaBits)
    const std::string md = failure_report_markdown(x);
    EXPECT_TRUE(has(md, "At the median weight |w| = 0.3 the format's half gap is 0.007812,")) << md;
    EXPECT_TRUE(has(md, "their format has 4 mantissa bit(s)")) << md;
    // 1.0: floor(log2 1) = 0, M = 4: 0.5 * 2^-4 = 0.03125.
    x.median_abs_weight = 1.0;
    EXPECT_TRUE(has(failure_report_markdown(x), "|w| = 1 the format's half gap is 0.03125,"));
}

TEST(FailureReport, BitStallWithMasterWeightsOrTheInterventionOnSaysLess) {
    failure_context x = bit_stall_context();
    x.config.quantization.shadow_weights = true;
    x.config.stability.interventions = {"mantissa_shift"};
    const std::string md = failure_report_markdown(x);
    EXPECT_FALSE(has(md, "shadow_weights = true`")) << md;
    EXPECT_FALSE(has(md, "half gap")) << md;
    EXPECT_FALSE(has(md, "Or store with")) << md;
    EXPECT_FALSE(has(md, "Enable `mantissa_shift`")) << md;
    EXPECT_TRUE(has(md, "- Most stalled: blocks.0.mlp.fc.weight")) << md;
}

TEST(FailureReport, NanLossWithNonFiniteOverflowRecommendsSaturate) {
    failure_context x;
    x.mantissa_bits = kMantissaBits;
    x.config = host::config::parse_config(
        "[quantization]\noverflow = \"nonfinite\"\n[stability]\ninterventions = [\"mantissa_shift\"]\n",
        "e4m3_nan.toml");
    x.collapse.mode = failure_mode::nan_loss;
    x.collapse.evidence_step = 31;
    x.collapse.decided_step = 41;
    x.collapse.evidence = "loss or gradient not finite from step 31";
    x.learning_rate = 6e-4;
    x.tensors = {tensor("blocks.1.mlp.proj.grad", "output_gradient", "e4m3", 0.25, 0.0, NAN),
                 tensor("blocks.1.attn.qkv.weight", "weight", "e4m3", 0.0, 0.0, NAN),
                 tensor("blocks.1.mlp.fc.act", "activation", "e4m3", 0.5, 0.0, NAN)};
    x.nonfinite_gradients = {"a.weight", "b.weight", "c.weight", "d.weight", "e.weight"};
    x.trend = {{38, {{"loss", 3.0}, {"grad_norm", 0.5}}},
               {39, {{"loss", 4.0}, {"grad_norm", 2.0}}},
               {40, {{"loss", 5.0}, {"grad_norm", 8.0}}},
               {41, {{"loss", NAN}, {"grad_norm", INFINITY}}}};
    const std::string md = failure_report_markdown(x);
    SCOPED_TRACE(md);
    EXPECT_TRUE(has(md, "| failure mode | **nan_loss** |\n"));
    EXPECT_TRUE(has(md, "| collapse step (first evidence) | 31 |\n"));
    EXPECT_TRUE(has(md, "| checkpoint | `none` |\n"));
    // The worst overflow first.
    EXPECT_TRUE(
        has(md,
            "- Set `quantization.overflow = \"saturate\"`: with `nonfinite`, values past the format's max "
            "became Inf, and blocks.1.mlp.fc.act (e4m3, 50.0%), blocks.1.mlp.proj.grad (e4m3, 25.0%) "
            "overflowed at the collapse."));
    EXPECT_FALSE(has(md, "Give the overflowing tensors more range"));
    EXPECT_TRUE(has(md,
                    "Parameters with non-finite gradients at the collapse: `a.weight` `b.weight` `c.weight` "
                    "`d.weight` `e.weight`\n"));
    EXPECT_TRUE(has(
        md, "- The first non-finite gradients were in a.weight, b.weight, c.weight, d.weight and 1 more:"));
    // Lowest finite loss 3, last finite 5 > 1.5 * 3.
    EXPECT_TRUE(
        has(md,
            "- The loss rose from 3 to 5 before it stopped being finite: lower `training.learning_rate` "
            "(now 0.0006) or `training.grad_clip` (now 1)"));
    // A non-finite loss or norm is said, not hidden; rates not measured are "-".
    EXPECT_TRUE(has(md, "| 40 | 5 | 8 | - | - | - |\n"));
    EXPECT_TRUE(has(md, "| 41 | nan | inf | - | - | - |\n"));
    EXPECT_TRUE(has(md, "at step 41: -; gradient norm inf.\n"));
    EXPECT_TRUE(has(md,
                    "Bit stall had not been measured yet (it is measured every "
                    "`quantization.diagnostic_interval` = 50 steps).\n"));
    EXPECT_FALSE(has(md, "Enable `mantissa_shift`"));  // it is enabled
    EXPECT_FALSE(has(md, "None follow"));
}

TEST(FailureReport, NanLossWithSaturateRecommendsRangeAndNoOverflowNoSaturate) {
    failure_context x;
    x.mantissa_bits = kMantissaBits;
    x.config = host::config::parse_config("", "e4m3_nan.toml");  // overflow = "saturate"
    x.collapse.mode = failure_mode::nan_loss;
    x.tensors = {tensor("blocks.1.mlp.proj.grad", "output_gradient", "e4m3", 0.25, 0.0, NAN)};
    std::string md = failure_report_markdown(x);
    EXPECT_FALSE(has(md, "quantization.overflow = \"saturate\"`:")) << md;
    EXPECT_TRUE(
        has(md,
            "- Give the overflowing tensors more range (a format with more exponent bits for them, or "
            "`quantization.margin` > 0): blocks.1.mlp.proj.grad (e4m3, 25.0%) overflowed at the collapse."))
        << md;
    EXPECT_TRUE(has(md, "- Enable `mantissa_shift`")) << md;

    // With nonfinite but nothing overflowing there is no evidence for saturate.
    x.config.quantization.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    x.tensors[0].values.set("overflow", 0);
    md = failure_report_markdown(x);
    EXPECT_FALSE(has(md, "saturate")) << md;
    EXPECT_FALSE(has(md, "more range")) << md;
}

TEST(FailureReport, NothingToRecommendSaysNoneFollow) {
    failure_context x;
    x.mantissa_bits = kMantissaBits;
    x.config = host::config::parse_config("", "fine.toml");
    x.collapse = failure_detector(x.config.failure, false, true, 500).stopped_early(12, "out of memory");
    const std::string md = failure_report_markdown(x);
    EXPECT_TRUE(has(md, "| failure mode | **early_stop** |\n")) << md;
    EXPECT_TRUE(has(md, "## Recommendations\n\nNone follow from the evidence recorded here.\n")) << md;
    EXPECT_TRUE(has(md, "| learning rate | - |\n")) << md;
    EXPECT_FALSE(has(md, "## Diagnostics")) << md;
    EXPECT_FALSE(has(md, "## Interventions")) << md;

    // An overflow collapse with no tensor over and partition_clip on: nothing follows either.
    x.config.stability.interventions = {"partition_clip"};
    x.collapse.mode = failure_mode::overflow;
    x.tensors = {tensor("blocks.0.mlp.fc.weight", "weight", "e5m2", 0.0, 0.0, NAN)};
    EXPECT_TRUE(has(failure_report_markdown(x), "None follow from the evidence recorded here.\n"));
}

TEST(FailureReport, OverflowAndVanishingRecommendations) {
    failure_context x;
    x.mantissa_bits = kMantissaBits;
    x.config = host::config::parse_config("[quantization]\nmargin = 2\n", "ovf.toml");
    x.collapse.mode = failure_mode::overflow;
    x.tensors = {tensor("blocks.0.mlp.fc.act", "activation", "e4m3", 0.3, 0.0, NAN)};
    std::string md = failure_report_markdown(x);
    EXPECT_TRUE(
        has(md, "- Overflowing: blocks.0.mlp.fc.act (e4m3, 30.0%). Raise `quantization.margin` (now 2)"))
        << md;
    EXPECT_TRUE(has(md, "- Enable `partition_clip`")) << md;

    // Block-scaled by OCP MX's floor rule, the margin does not apply: the rule clips, round_up does not.
    // Only the activations are in blocks here, so a weight overflowing as well keeps the margin advice.
    x.config = host::config::parse_config(
        "[quantization]\n[quantization.activation]\ngranularity = \"block\"\nscale_rule = \"mx_floor\"\n",
        "mx.toml");
    md = failure_report_markdown(x);
    EXPECT_TRUE(
        has(md,
            "- Overflowing: blocks.0.mlp.fc.act (e4m3, 30.0%). Their block scales follow OCP MX's floor "
            "rule (`scale_rule = \"mx_floor\"`)"))
        << md;
    EXPECT_TRUE(has(md, "`quantization.scale_rule = \"round_up\"` never clips.")) << md;
    EXPECT_FALSE(has(md, "quantization.margin")) << md;
    x.tensors.push_back(tensor("blocks.0.mlp.fc.weight", "weight", "e4m3", 0.2, 0.0, NAN));
    md = failure_report_markdown(x);
    EXPECT_TRUE(has(md, "Raise `quantization.margin`")) << md;
    EXPECT_FALSE(has(md, "floor rule")) << md;

    // A tensor's second use is judged by its own settings, as the recipe resolved them: W's
    // input-gradient copy in floor-rule blocks clips by design, its forward copy per tensor does not.
    x.config = host::config::parse_config(
        "[quantization.input_gradient]\nw = { granularity = \"block\", scale_rule = \"mx_floor\" }\n",
        "mx_second_use.toml");
    x.tensors = {tensor("blocks.0.mlp.fc.weight@input_gradient", "weight", "e5m2", 0.2, 0.0, NAN)};
    md = failure_report_markdown(x);
    EXPECT_TRUE(has(md, "floor rule")) << md;
    x.tensors = {tensor("blocks.0.mlp.fc.weight", "weight", "e5m2", 0.2, 0.0, NAN)};
    md = failure_report_markdown(x);
    EXPECT_FALSE(has(md, "floor rule")) << md;
    EXPECT_TRUE(has(md, "Raise `quantization.margin`")) << md;

    x.collapse.mode = failure_mode::gradient_vanishing;
    x.config.quantization.scaling = host::config::scaling_mode::none;
    x.tensors = {
        tensor("blocks.0.mlp.fc.grad", "output_gradient", "e4m3", 0.0, 0.8, NAN),
        tensor("blocks.0.mlp.proj.grad", "output_gradient", "e4m3", 0.0, 0.4, NAN)};  // not above 50%
    md = failure_report_markdown(x);
    EXPECT_TRUE(has(md,
                    "- Gradients flushed to zero in blocks.0.mlp.fc.grad (e4m3, 80.0%): give them more range "
                    "(`quantization.gradient_format = \"e5m2\"`) and per-tensor scaling"))
        << md;
    EXPECT_FALSE(has(md, "blocks.0.mlp.proj.grad (")) << md;
    x.tensors.pop_back();
    x.tensors[0].values.set("underflow", 100);  // 10% of its 1000 elements
    EXPECT_TRUE(has(failure_report_markdown(x), "- No gradient tensor underflowed much"));
}

}  // namespace
}  // namespace altgrad::test
