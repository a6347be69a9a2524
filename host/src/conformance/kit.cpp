// The conformance kit's front: the plugins to check (targets), the registry of
// checks in run order, and check_plugin, which runs each check of a plugin's
// kind in a child process. The checks themselves are in the *_checks.cpp
// files, one per family (checks.hpp).
#include "conformance/kit.hpp"

#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "conformance/checks.hpp"
#include "conformance/headline_checks.hpp"
#include "plugins/registry.hpp"
#include "util/error.hpp"

namespace altgrad::host::conformance {
namespace fs = std::filesystem;

// ---------------------------------------------------------------- targets

namespace {

plugin_target target_from_manifest(const std::string& label, const fs::path& manifest_path) {
    plugin_target t;
    t.label = label;
    t.manifest_path = manifest_path;
    try {
        t.info = read_manifest(manifest_path);
    } catch (const std::exception& e) {
        t.manifest_error = e.what();
    }
    return t;
}

}  // namespace

plugin_target target_by_name(const fs::path& plugins_dir, const std::string& name) {
    for (plugin_target& t : all_targets(plugins_dir))
        if ((t.info && t.info->name == name) || t.manifest_path.parent_path().filename() == name) return t;
    throw error("conformance: no plugin named '" + name + "' in " + plugins_dir.string());
}

plugin_target target_by_path(const fs::path& path) {
    std::error_code ec;
    const fs::path folder = fs::is_directory(path, ec) ? path : path.parent_path();
    const fs::path m = folder / "manifest.toml";
    if (!fs::exists(path, ec)) throw error("conformance: " + path.string() + " does not exist");
    if (!fs::exists(m, ec))
        throw error("conformance: " + path.string() +
                    ": no manifest.toml beside the library (a plugin is a folder "
                    "holding its manifest and its library)");
    return target_from_manifest(path.string(), m);
}

std::vector<plugin_target> all_targets(const fs::path& plugins_dir) {
    std::vector<plugin_target> out;
    for (const fs::path& m : find_manifests(plugins_dir))
        out.push_back(target_from_manifest(m.parent_path().filename().string(), m));
    return out;
}

// ---------------------------------------------------------------- registry

// The checks in run order, table by table: a row names a check, says what it
// checks and gives its body (declared in checks.hpp, defined in its family's
// file).
namespace {

const std::vector<check_def>& format_checks() {
    static const std::vector<check_def> checks = {
        {"load.manifest", "the manifest parses and is valid", false, check_manifest},
        {"load.library", "the library loads with RTLD_NOW | RTLD_LOCAL", false, check_library},
        {"load.exports", "the library exports only " ALTGRAD_ENTRY_SYMBOL, false, check_exports},
        {"load.abi_version", "the entry reports an ABI version this host accepts", false, check_abi_version},
        {"load.descriptor", "the descriptor and tables are valid and match the manifest", false,
         check_descriptor},
        {"load.repeat", "loads, unloads, creates and destroys repeatedly", false, check_repeat_load},
        {"codes.roundtrip", "every code decodes and encodes back to itself (NaN to the canonical NaN)", true,
         check_code_roundtrip},
        {"codes.declared_range", "the declared max, lowest, smallest values, Inf and NaN match the codes",
         true, check_declared_range},
        {"quantize.nearest", "nearest-even agrees with a model built from the codes", true, check_nearest},
        {"quantize.ties_to_even", "exact ties go to the even code", true, check_ties},
        {"quantize.toward_zero", "toward-zero agrees with the model", true, check_toward_zero},
        {"quantize.idempotent", "q(q(x)) = q(x)", true, check_idempotent},
        {"quantize.monotone", "x1 <= x2 implies q(x1) <= q(x2)", true, check_monotone},
        {"quantize.sign_symmetric", "q(-x) = -q(x) where both signs are in range", true,
         check_sign_symmetric},
        {"quantize.overflow_saturate", "at and beyond max under saturate", true, check_overflow_saturate},
        {"quantize.overflow_nonfinite", "at and beyond max under non-finite", true, check_overflow_nonfinite},
        {"quantize.specials", "NaN, +-Inf, +-0", true, check_specials},
        {"quantize.subnormal_boundary", "the smallest values and the gap to zero", true,
         check_subnormal_boundary},
        {"quantize.encode_decode", "quantize agrees with encode then decode", true, check_encode_decode},
        {"quantize.scaling", "scaling behaves as q(x*s)/s", true, check_scaling},
        {"quantize.counts", "overflow and underflow counts match the outputs", true, check_counts},
        {"quantize.block_scales",
         "ABI 1.2: a block-scaled call equals one call per block; bad scales refused", true,
         check_block_scales},
        {"stochastic.neighbours", "stochastic rounding returns one of the two neighbours", true,
         check_sr_neighbours},
        {"stochastic.unbiased", "the mean stochastic error is zero within 5 sigma", true, check_sr_unbiased},
        {"stochastic.reproducible", "same seed and offset, same bits", true, check_sr_reproducible},
        {"stochastic.chunking", "results do not depend on chunking", true, check_sr_chunking},
        {"stochastic.random_bits", "ABI 1.4: with b random bits x rounds away at floor(f * 2^b) / 2^b", true,
         check_sr_random_bits},
        {"concurrency.threads", "many threads at once give the serial result", true, check_threads},
    };
    return checks;
}

// The load checks, which every kind runs first.
std::vector<check_def> load_checks() {
    const std::vector<check_def>& f = format_checks();
    std::vector<check_def> out;
    for (const check_def& c : f)
        if (std::string(c.name).rfind("load.", 0) == 0) out.push_back(c);
    return out;
}

// Checks for intervention and diagnostic plugins load the plugin themselves
// (a diagnostic also loads a bundled format for its tensors' format_ref).
const std::vector<check_def>& shared_instance_checks() {
    static const std::vector<check_def> checks = {
        {"params.defaults",
         "intervention, diagnostic, transform, accumulator: create with the manifest's defaults succeeds",
         false, check_params_defaults},
        {"params.refused",
         "intervention, diagnostic, transform, accumulator: values just outside a declared min, max or "
         "choices "
         "are "
         "refused; create "
         "refuses "
         "only with a message",
         false, check_params_refused},
        {"instances.separate", "intervention, diagnostic: two instances answer only from their own history",
         false, check_separate},
        {"answers.deterministic",
         "intervention, diagnostic: the same inputs to fresh instances, the same answers", false,
         check_deterministic},
    };
    return checks;
}

const std::vector<check_def>& intervention_only_checks() {
    static const std::vector<check_def> checks = {
        {"observe.nonfinite", "intervention: NaN/Inf loss, grad_norm, rates and format_max are observed",
         false, check_observe_nonfinite},
        {"observe.empty", "intervention: a step with no tensors is observed", false, check_observe_empty},
        {"state.resume",
         "intervention: a fresh instance loaded with a saved state answers as the original (skipped when the "
         "plugin "
         "saves no state)",
         false, check_state_resume},
    };
    return checks;
}

const std::vector<check_def>& diagnostic_only_checks() {
    static const std::vector<check_def> checks = {
        {"measure.nonfinite", "diagnostic: tensors with NaN/Inf elements measure without error", false,
         check_measure_nonfinite},
        {"measure.empty", "diagnostic: count-0 tensors measure without error", false, check_measure_empty},
        {"measure.names", "diagnostic: names [a-z0-9_.]+, valid indices, at most max_values_per_tensor*(n+1)",
         false, check_measure_names},
        {"measure.block_scales",
         "diagnostic: a view whose blocks all have scale s answers as one scaled per tensor by s (skipped "
         "before ABI "
         "1.2)",
         false, check_measure_block_scales},
        {"measure.headlines",
         "diagnostic: the headlines are well formed and name values measure writes (skipped before ABI "
         "1.3)",
         false, check_measure_headlines},
    };
    return checks;
}

// Checks for transform plugins (ABI 1.4), after the load checks and the
// params.* checks (each loads the plugin and creates it with --param's values).
const std::vector<check_def>& transform_only_checks() {
    static const std::vector<check_def> checks = {
        {"transform.products",
         "transform: dot(Ta, Tb) = a . b within 2 (ceil(log2 d) + 2) u ||a|| ||b||, operands in separate "
         "calls",
         false, check_transform_products},
        {"transform.inverse",
         "transform: T^-1(T a) = a (T(T a) = a when self_inverse) within 2 (ceil(log2 d) + 2) u ||a||", false,
         check_transform_inverse},
        {"transform.chunking",
         "transform: rows split across calls, moved, or run from many threads give the same bits", false,
         check_transform_chunking},
        {"transform.reproducible",
         "transform: a fresh instance gives the same bits; so does another seed when uses_seed is 0", false,
         check_transform_reproducible},
        {"transform.buffers",
         "transform: nothing outside the buffers is touched; in place gives the same bits", false,
         check_transform_buffers},
        {"transform.bad_arguments",
         "transform: cols not a multiple of d, NULL buffers, a short struct, overlap, bad enums refused",
         false, check_transform_bad_arguments},
    };
    return checks;
}

// Checks for accumulator plugins (ABI 1.5), after the load checks and the
// params.* checks (each loads the plugin and creates it with --param's values).
const std::vector<check_def>& accumulator_only_checks() {
    static const std::vector<check_def> checks = {
        {"accumulator.exact",
         "accumulator: where no term loses a bit to the alignment, D is the exact C + a . b rounded as "
         "declared",
         false, check_accumulator_exact},
        {"accumulator.definition",
         "accumulator: random operands of wide exponent spreads, random C, k up to the depth: the "
         "definition's "
         "bits",
         false, check_accumulator_definition},
        {"accumulator.truncation",
         "accumulator: each aligned term truncated toward zero to exactly F bits, not summed exactly and "
         "rounded",
         false, check_accumulator_truncation},
        {"accumulator.output",
         "accumulator: sums between output values, past the largest and in the subnormals rounded as "
         "declared",
         false, check_accumulator_output},
        {"accumulator.specials",
         "accumulator: zeros of both signs, cancellation, NaN and Inf, overflow, wide spreads, subnormals, "
         "scales",
         false, check_accumulator_specials},
        {"accumulator.depth",
         "accumulator: k beyond the declared depth refused; a shorter k is the call zero-padded", false,
         check_accumulator_depth},
        {"accumulator.deterministic",
         "accumulator: sub-tiles, a fresh instance and many threads at once give the same bits", false,
         check_accumulator_deterministic},
        {"accumulator.buffers",
         "accumulator: nothing outside the buffers is touched; in place (d == c) gives the same bits", false,
         check_accumulator_buffers},
        {"accumulator.bad_arguments",
         "accumulator: NULL buffers, a short struct, overlaps, bad exponents, unknown or undeclared kinds "
         "refused",
         false, check_accumulator_bad_arguments},
    };
    return checks;
}

// The params.* checks among the shared ones, which transforms and accumulators run too.
std::vector<check_def> param_checks() {
    std::vector<check_def> out;
    for (const check_def& c : shared_instance_checks())
        if (std::string(c.name).rfind("params.", 0) == 0) out.push_back(c);
    return out;
}

// Checks every kind runs last (each loads the plugin itself).
const std::vector<check_def>& every_kind_last_checks() {
    static const std::vector<check_def> checks = {
        {"memory.leak",
         "repeated calls (formats: create, quantize, encode, decode, destroy; transforms: create, apply, "
         "destroy; accumulators: create, dot_add, destroy; others: observe or measure) leave the heap and "
         "resident size as they were",
         false, check_leak},
    };
    return checks;
}

// The checks run for a plugin of `kind`, in run order.
std::vector<check_def> checks_for(altgrad_plugin_kind kind) {
    std::vector<check_def> out;
    if (kind == ALTGRAD_KIND_FORMAT) {
        out = format_checks();
    } else if (kind == ALTGRAD_KIND_TRANSFORM || kind == ALTGRAD_KIND_ACCUMULATOR) {
        out = load_checks();
        const std::vector<check_def>& own =
            kind == ALTGRAD_KIND_TRANSFORM ? transform_only_checks() : accumulator_only_checks();
        for (const std::vector<check_def>& more : {param_checks(), own})
            out.insert(out.end(), more.begin(), more.end());
    } else {
        out = load_checks();
        const std::vector<check_def>& shared = shared_instance_checks();
        out.insert(out.end(), shared.begin(), shared.end());
        const std::vector<check_def>& own =
            kind == ALTGRAD_KIND_INTERVENTION ? intervention_only_checks() : diagnostic_only_checks();
        out.insert(out.end(), own.begin(), own.end());
    }
    const std::vector<check_def>& last = every_kind_last_checks();
    out.insert(out.end(), last.begin(), last.end());
    return out;
}

const char* kinds_of(const check_def& c) {
    const std::string n = c.name;
    if (n.rfind("load.", 0) == 0) return "format, intervention, diagnostic, transform, accumulator";
    for (const check_def& x : every_kind_last_checks())
        if (n == x.name) return "format, intervention, diagnostic, transform, accumulator";
    if (n.rfind("params.", 0) == 0) return "intervention, diagnostic, transform, accumulator";
    for (const check_def& x : transform_only_checks())
        if (n == x.name) return "transform";
    for (const check_def& x : accumulator_only_checks())
        if (n == x.name) return "accumulator";
    for (const check_def& x : shared_instance_checks())
        if (n == x.name) return "intervention, diagnostic";
    for (const check_def& x : intervention_only_checks())
        if (n == x.name) return "intervention";
    for (const check_def& x : diagnostic_only_checks())
        if (n == x.name) return "diagnostic";
    return "format";
}

uint64_t check_seed(uint64_t seed, const std::string& name) {
    uint64_t h = seed ^ 0x9E3779B97F4A7C15ull;
    for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
    return h;
}

}  // namespace

std::vector<check_info> all_checks() {
    std::vector<check_info> out;
    for (const check_def& c : format_checks()) out.push_back({c.name, c.description, kinds_of(c)});
    for (const auto* list :
         {&every_kind_last_checks(), &shared_instance_checks(), &intervention_only_checks(),
          &diagnostic_only_checks(), &transform_only_checks(), &accumulator_only_checks()})
        for (const check_def& c : *list) out.push_back({c.name, c.description, kinds_of(c)});
    return out;
}

std::vector<check_info> check_list(altgrad_plugin_kind kind) {
    std::vector<check_info> out;
    for (const check_def& c : checks_for(kind)) out.push_back({c.name, c.description, kinds_of(c)});
    return out;
}

plugin_report check_plugin(const plugin_target& target, const options& o) {
    plugin_report report;
    report.target = target;
    // An invalid manifest has no kind: it gets the format list, whose every
    // check but load.manifest skips.
    const altgrad_plugin_kind kind = target.info ? target.info->kind : ALTGRAD_KIND_FORMAT;
    for (const check_def& c : checks_for(kind)) {
        if (!o.only.empty() && !glob_match(o.only, c.name)) continue;
        result r;
        if (!target.info && std::string(c.name) != "load.manifest") {
            r = skip("the manifest is invalid (see load.manifest)");
        } else {
            r = run_isolated(c.name, o.timeout_seconds, [&]() -> result {
                env e{target,  o,       c.name,      std::mt19937_64(check_seed(o.seed, c.name)),
                      nullptr, nullptr, std::nullopt};
                if (c.needs_format) {
                    try {
                        e.plugin = load_plugin(*target.info);
                        e.format = format_handle::create(e.plugin, o.params);
                    } catch (const std::exception& x) {
                        return skip(std::string("the plugin does not load or create: ") + x.what());
                    }
                    if (e.format->info().total_bits <= 16) e.table.emplace(*e.format);
                }
                result r;
                try {
                    r = c.run(e);
                } catch (const finding& f) {
                    r = f.found;
                }
                if (e.drew_random && r.status != outcome::skipped)
                    r.reason += " (seed " + std::to_string(o.seed) + ")";
                return r;
            });
        }
        r.check = c.name;
        report.results.push_back(std::move(r));
    }
    return report;
}

}  // namespace altgrad::host::conformance
