// What the conformance kit's checks share, private to the conformance room:
// the environment a check body gets and its results; the guarded plugin calls
// and the inputs of the format checks (format_calls.cpp) and of the
// intervention and diagnostic checks (instance_calls.cpp); and every check,
// by family, each family in a file of its own. The registry in kit.cpp lists
// the checks in run order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <altgrad/altgrad.h>

#include "conformance/format_reference.hpp"
#include "conformance/kit.hpp"
#include "plugins/diagnostic_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/intervention_handle.hpp"
#include "plugins/loader.hpp"
#include "plugins/transform_handle.hpp"
#include "sandbox/guarded_memory.hpp"
#include "sandbox/isolate.hpp"
#include "util/abi_names.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::conformance {
// The kit hands plugins guarded buffers and runs each check in a child (the sandbox room).
using sandbox::call_note;
using sandbox::crash_note;
using sandbox::guarded_array;
using sandbox::guarded_buffer;
using sandbox::run_isolated;

// ---------------------------------------------------------------- a check

// What a check body gets. Everything here lives in the check's own child
// process, so a plugin that corrupts memory corrupts only that check.
struct env {
    const plugin_target& target;
    const options& opts;
    std::string check;
    std::mt19937_64 rng;
    std::shared_ptr<const loaded_plugin> plugin;
    std::shared_ptr<format_handle> format;
    std::optional<format_table> table;
    bool drew_random = false;  // the result depends on the seed: say which
};

inline result pass(const std::string& reason) { return {"", outcome::passed, reason, "", "", 0}; }
inline result fail(const std::string& reason, const std::string& input, const std::string& hint) {
    return {"", outcome::failed, reason, input, hint, 0};
}
inline result skip(const std::string& reason) { return {"", outcome::skipped, reason, "", "", 0}; }

// A finding made inside a plugin call's wrapper (below), deep in a check;
// check_plugin makes it the check's result.
struct finding : std::exception {
    result found;
    explicit finding(result r) : found(std::move(r)) {}
    const char* what() const noexcept override { return found.reason.c_str(); }
};

// A row of the registry (kit.cpp).
struct check_def {
    const char* name;
    const char* description;
    bool needs_format;  // runs on a created format instance
    result (*run)(env&);
};

// -------------------------------------------------------- format calls and inputs (format_calls.cpp)

// Bit for bit, or both NaN.
bool same(float a, float b);
// "rounding ..., overflow ..., scale ..." (or "..., block scales, blocks of N"), for inputs in findings.
std::string mode_text(const quantize_options& o);

// The plugin calls of the format checks. Each hands the plugin guarded copies
// of its buffers (sandbox/guarded_memory.hpp): inputs read-only, every buffer between
// inaccessible pages, so touching outside a buffer kills the check's process
// with a report naming the call, the buffer and the element. A write just
// before element 0 does not fault; the pattern there shows it.
void expect_front_intact(const guarded_buffer& b, const std::string& call, const char* buffer);
// Without a call note: for threads calling at once.
std::vector<float> quantize_unnoted(const env& e, const std::vector<float>& in, const quantize_options& o,
                                    quantize_counts* counts = nullptr);
std::vector<float> quantize(const env& e, const std::vector<float>& in, const quantize_options& o,
                            quantize_counts* counts = nullptr);
// Codes of info().code_bytes each, native endian, as a byte vector.
std::vector<uint8_t> encode(const env& e, const std::vector<float>& in, const quantize_options& o);
// block_scales: ABI 1.2 block scaling (one scale per block_size codes).
std::vector<float> decode(const env& e, const std::vector<uint8_t>& codes, float scale = 1.0f,
                          const float* block_scales = nullptr, size_t block_size = 0);

quantize_options mode(altgrad_rounding r, altgrad_overflow o = ALTGRAD_OVERFLOW_SATURATE, float scale = 1.0f);

// The values where format code goes wrong: every grid value, every midpoint
// and its float neighbours, the ends of the range and beyond.
std::vector<float> grid_probes(const format_table& t);
// Log-uniform magnitudes from well below the smallest value to well above
// the largest, both signs, plus uniform values inside the range.
std::vector<float> random_probes(env& e, size_t n);
// The grid probes (when there is a code table), then random_count random ones.
std::vector<float> all_probes(env& e, size_t random_count = 20000);

// Compare quantize against the reference model on `inputs`.
result against_reference(env& e, const std::vector<float>& inputs, const quantize_options& o,
                         const char* hint);
// The skip of a check that needs the code table (formats of at most 16 bits).
result needs_table(const env& e);

// -------------------------------------------------------- instance calls and inputs (instance_calls.cpp)
// for the intervention and diagnostic checks

// Load the plugin through the host; a refusal is load.*'s finding, so skip.
bool load_for_check(env& e, result& why);
// Create an instance of the target's kind; throws what the handle throws.
void create_instance(const env& e, const host::given_params& params);
// Load the plugin, for a diagnostic a bundled format for its tensors'
// format_ref too (into e.format), and create an instance with the defaults;
// false, with the skip in `why`, when one of them fails.
bool prepare(env& e, result& why);

// A plausible, varied step: a few tensors of each role, rates often high
// enough to make the bundled interventions act, now and then a non-finite
// loss.
observation random_observation(env& e, uint64_t step, uint32_t& nonfinite_run);
std::vector<observation> random_history(env& e, size_t n);
std::string answer_text(const std::vector<action>& acts);
std::string observation_text(const observation& o);

// Tensors with owned storage; views point into it.
struct tensor_set {
    std::vector<std::string> names;
    std::vector<std::vector<float>> data, previous;
    std::vector<altgrad_tensor_view> views;
};

// One tensor of each role the diagnostic is interested in (all roles when it
// declares none), `count` elements each, random magnitudes; `special`
// sprinkles NaN and +-Inf.
tensor_set make_tensors(env& e, const diagnostic_handle& d, size_t count, bool special = false);
std::string values_text(const std::vector<diagnostic_value>& vals);
// The same values, names and indices, bit for bit (NaN equal to NaN).
bool same_values(const std::vector<diagnostic_value>& a, const std::vector<diagnostic_value>& b);

// The intervention and diagnostic calls, guarded as the format calls are:
// the inputs (the tensors array, each tensor's elements) read-only, every
// buffer between inaccessible pages, and a call note, so a plugin touching
// outside a buffer kills the check's process with a report naming the call.
std::vector<action> observe(intervention_handle& h, const observation& o);
std::vector<diagnostic_value> measure(diagnostic_handle& d, uint64_t step,
                                      const std::vector<altgrad_tensor_view>& views);

// The same kind of check for both kinds: a history of inputs, the answer to
// each as text.
struct history_runner {
    virtual ~history_runner() = default;
    virtual size_t length() const = 0;
    virtual std::string input(size_t k) const = 0;
    // A fresh instance; answer(i, k) feeds input k of history `which` to instance i.
    virtual size_t fresh() = 0;
    virtual std::string answer(size_t instance, int which, size_t k) = 0;
    virtual void drop(size_t instance) = 0;
};

// A runner for the plugin's kind, with two random histories of n inputs.
std::unique_ptr<history_runner> make_runner(env& e, size_t n);

// ---------------------------------------------------------------- the checks, by family

// load.* (load_checks.cpp), which every kind runs first
result check_manifest(env& e);
result check_library(env& e);
result check_exports(env& e);
result check_abi_version(env& e);
result check_descriptor(env& e);
result check_repeat_load(env& e);

// codes.* (codes_checks.cpp)
result check_code_roundtrip(env& e);
result check_declared_range(env& e);

// quantize.* (quantize_checks.cpp)
result check_nearest(env& e);
result check_ties(env& e);
result check_toward_zero(env& e);
result check_idempotent(env& e);
result check_monotone(env& e);
result check_sign_symmetric(env& e);
result check_overflow_saturate(env& e);
result check_overflow_nonfinite(env& e);
result check_specials(env& e);
result check_subnormal_boundary(env& e);
result check_encode_decode(env& e);
result check_scaling(env& e);
result check_counts(env& e);

// quantize.block_scales (block_scales_checks.cpp)
result check_block_scales(env& e);

// stochastic.* (stochastic_checks.cpp)
result check_sr_neighbours(env& e);
result check_sr_unbiased(env& e);
result check_sr_reproducible(env& e);
result check_sr_chunking(env& e);
result check_sr_random_bits(env& e);

// concurrency.* (concurrency_checks.cpp)
result check_threads(env& e);

// intervention and diagnostic: params.*, instances.separate, answers.deterministic (instance_checks.cpp)
result check_params_defaults(env& e);
result check_params_refused(env& e);
result check_separate(env& e);
result check_deterministic(env& e);

// intervention only: observe.*, state.resume (intervention_checks.cpp)
result check_observe_nonfinite(env& e);
result check_observe_empty(env& e);
result check_state_resume(env& e);

// diagnostic only: measure.* (diagnostic_checks.cpp)
result check_measure_nonfinite(env& e);
result check_measure_empty(env& e);
result check_measure_block_scales(env& e);
result check_measure_names(env& e);

// transform only: transform.* (transform_checks.cpp, ABI 1.4)
result check_transform_products(env& e);
result check_transform_inverse(env& e);
result check_transform_chunking(env& e);
result check_transform_reproducible(env& e);
result check_transform_buffers(env& e);
result check_transform_bad_arguments(env& e);

// accumulator only: accumulator.* (accumulator_checks.cpp, accumulator_call_checks.cpp, ABI 1.5)
result check_accumulator_exact(env& e);
result check_accumulator_definition(env& e);
result check_accumulator_truncation(env& e);
result check_accumulator_output(env& e);
result check_accumulator_specials(env& e);
result check_accumulator_depth(env& e);
result check_accumulator_deterministic(env& e);
result check_accumulator_buffers(env& e);
result check_accumulator_bad_arguments(env& e);

// memory.* (memory_checks.cpp), which every kind runs last
result check_leak(env& e);

}  // namespace altgrad::host::conformance
