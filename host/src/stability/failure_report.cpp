#include "stability/failure_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "config/recipe.hpp"
#include "config/writer.hpp"
#include "util/abi_names.hpp"

namespace altgrad::host::stability {

namespace {

std::string num(double x, const char* fmt = "%.4g") {
    if (std::isnan(x)) return "-";
    char buf[48];
    std::snprintf(buf, sizeof buf, fmt, x);
    return buf;
}
// A measured value that may itself be the problem: NaN and Inf said, not hidden.
std::string shown(double x) {
    return std::isfinite(x) ? num(x) : std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}
std::string pct(double x) { return std::isnan(x) ? "-" : num(100.0 * x, "%.1f") + "%"; }

using run::tensor_line;
using rate_of = double (tensor_line::*)() const;  // overflow_rate, underflow_rate, bit_stall_rate

// The worst tensors by a rate, highest first, at most `n`, above `floor`;
// `role` ("weight", "output_gradient"): of that role only.
std::vector<const tensor_line*> worst(const std::vector<tensor_line>& ts, rate_of rate,
                                      std::optional<std::string> role, double floor, size_t n) {
    std::vector<const tensor_line*> out;
    for (const tensor_line& t : ts)
        if ((!role || t.role == *role) && !std::isnan((t.*rate)()) && (t.*rate)() > floor) out.push_back(&t);
    std::stable_sort(out.begin(), out.end(), [&](auto* a, auto* b) { return (a->*rate)() > (b->*rate)(); });
    if (out.size() > n) out.resize(n);
    return out;
}

std::string list_of(const std::vector<const tensor_line*>& ts, rate_of rate) {
    std::string s;
    for (const tensor_line* t : ts)
        s += (s.empty() ? "" : ", ") + t->tensor + " (" + t->format + ", " + pct((t->*rate)()) + ")";
    return s;
}

using run::metric_values;

// The ABI's role of a tensor line's role name ("weight", "activation", "output_gradient").
altgrad_tensor_role role_of(const tensor_line& t) {
    return tensor_role_names().value(t.role).value_or(ALTGRAD_TENSOR_WEIGHT);
}

bool enabled(const config::run_config& c, const std::string& intervention) {
    const auto& v = c.stability.interventions;
    return std::find(v.begin(), v.end(), intervention) != v.end();
}

// ---- Recommendations, one set per failure mode ------------------------------------

std::vector<std::string> after_nan_loss(const failure_context& x) {
    const config::run_config& c = x.config;
    const config::quantization_config& q = c.quantization;
    std::vector<std::string> out;
    const auto overflowing = worst(x.tensors, &tensor_line::overflow_rate, std::nullopt, 0.0, 3);
    if (!overflowing.empty() && q.overflow == ALTGRAD_OVERFLOW_NONFINITE)
        out.push_back(
            "Set `quantization.overflow = \"saturate\"`: with `nonfinite`, values past the format's "
            "max became Inf, and " +
            list_of(overflowing, &tensor_line::overflow_rate) + " overflowed at the collapse.");
    else if (!overflowing.empty())
        out.push_back(
            "Give the overflowing tensors more range (a format with more exponent bits for them, or "
            "`quantization.margin` > " +
            std::to_string(q.margin) + "): " + list_of(overflowing, &tensor_line::overflow_rate) +
            " overflowed at the collapse.");
    if (q.scaling == config::scaling_mode::none)
        out.push_back(
            "Use `quantization.scaling = \"delayed\"`: with no per-tensor scaling the tensors meet "
            "the format's range unscaled.");
    if (!x.nonfinite_gradients.empty()) {
        std::string names;
        for (size_t i = 0; i < x.nonfinite_gradients.size() && i < 4; ++i)
            names += (i ? ", " : "") + x.nonfinite_gradients[i];
        out.push_back("The first non-finite gradients were in " + names +
                      (x.nonfinite_gradients.size() > 4
                           ? " and " + std::to_string(x.nonfinite_gradients.size() - 4) + " more"
                           : "") +
                      ": keep those layers in `bf16` with a `[[quantization.rules]]` entry to test whether "
                      "they alone break the run.");
    }
    double lowest = INFINITY, before = NAN;
    for (const run::train_line& r : x.trend)
        if (const double loss = r.values.get("loss"); std::isfinite(loss))
            lowest = std::min(lowest, loss), before = loss;
    if (std::isfinite(before) && before > 1.5 * lowest)
        out.push_back("The loss rose from " + num(lowest) + " to " + num(before) +
                      " before it stopped being finite: lower `training.learning_rate` (now " +
                      num(c.training.learning_rate) + ") or `training.grad_clip` (now " +
                      num(c.training.grad_clip) + "), or enable `partition_clip`.");
    if (!enabled(c, "mantissa_shift"))
        out.push_back(
            "Enable `mantissa_shift` (`stability.interventions = [\"mantissa_shift\"]`): after " +
            std::string(
                "its nan_patience non-finite steps it moves the failing tensors along its fallback chain "
                "instead of stopping the run."));
    return out;
}

std::vector<std::string> after_bit_stall(const failure_context& x) {
    const config::run_config& c = x.config;
    const config::quantization_config& q = c.quantization;
    std::vector<std::string> out;
    const auto stalled = worst(x.tensors, &tensor_line::bit_stall_rate, "weight", c.failure.bit_stall, 4);
    int m = -1;
    for (const tensor_line* t : stalled) {
        const auto bits = x.mantissa_bits.find(t->format);
        m = bits == x.mantissa_bits.end() ? -1 : bits->second;
    }
    if (!q.shadow_weights) {
        std::string gap;
        if (m >= 0 && std::isfinite(x.median_abs_weight) && x.median_abs_weight > 0) {
            // A weight |w| in [2^e, 2^(e+1)) has neighbours 2^(e-M) apart; RNE keeps an update below half of
            // that.
            const double e = std::floor(std::log2(x.median_abs_weight));
            const double half_gap = 0.5 * std::ldexp(1.0, static_cast<int>(e) - m);
            gap = " At the median weight |w| = " + num(x.median_abs_weight) + " the format's half gap is " +
                  num(half_gap) + ", against a learning rate of " + num(x.learning_rate) +
                  " (an Adam update is about the learning rate).";
        }
        out.push_back(
            "Set `quantization.shadow_weights = true`: the weights are stored in their format, so an "
            "update smaller than half the gap to the next value is rounded away." +
            gap);
        if (q.forward_rounding == ALTGRAD_ROUND_NEAREST_EVEN)
            out.push_back(
                "Or store with `quantization.forward_rounding = \"stochastic\"`: stochastic rounding "
                "keeps small updates in expectation.");
    }
    if (!stalled.empty())
        out.push_back("Most stalled: " + list_of(stalled, &tensor_line::bit_stall_rate) +
                      (m >= 0 ? "; their format has " + std::to_string(m) +
                                    " mantissa bit(s): one with more "
                                    "(e.g. e3m4 or e5m2) moves on a finer grid."
                              : "."));
    if (!enabled(c, "mantissa_shift"))
        out.push_back(
            "Enable `mantissa_shift`: above its stall_threshold it switches the stalled weights along "
            "its fallback chain (e7m0 > e5m2, e1m6 > e3m4, e0m7 > e3m4 by default).");
    return out;
}

// The operand a tensor line is, as the run's recipe resolved it: its layer
// and role, and "@PRODUCT" for a second use with settings of its own
// ("blocks.0.mlp.fc.weight@input_gradient"); null for a name of no layer.
const config::operand_spec* operand_of(const config::resolved_recipe& recipe, const tensor_line& t) {
    const size_t at = t.tensor.find('@');
    const std::string name = t.tensor.substr(0, at);
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos) return nullptr;
    const altgrad_tensor_role role = role_of(t);
    const config::operand_kind o = role == ALTGRAD_TENSOR_WEIGHT       ? config::operand_kind::w
                                   : role == ALTGRAD_TENSOR_ACTIVATION ? config::operand_kind::x
                                                                       : config::operand_kind::dy;
    for (const config::layer_recipe& l : recipe.layers)
        if (l.layer == name.substr(0, dot))
            return at == std::string::npos ? &l.first_use(o) : &l.second_use(o);
    return nullptr;
}

// Whether tensor t is scaled in blocks (or rows) by OCP MX's floor rule,
// which lets each block's largest elements clip by design.
bool clipped_by_mx_floor(const config::resolved_recipe& recipe, const tensor_line& t) {
    const config::operand_spec* o = operand_of(recipe, t);
    return o != nullptr && o->granularity != config::granularity_kind::tensor &&
           o->scale_rule == config::scale_rule_kind::mx_floor;
}

std::vector<std::string> after_overflow(const failure_context& x) {
    std::vector<std::string> out;
    const config::resolved_recipe recipe = config::resolve(x.config);
    const auto overflowing = worst(x.tensors, &tensor_line::overflow_rate, std::nullopt, 0.0, 3);
    const bool all_mx_floor =
        !overflowing.empty() && std::all_of(overflowing.begin(), overflowing.end(),
                                            [&](auto* t) { return clipped_by_mx_floor(recipe, *t); });
    if (all_mx_floor)
        out.push_back(
            "Overflowing: " + list_of(overflowing, &tensor_line::overflow_rate) +
            ". Their block scales follow OCP MX's floor rule (`scale_rule = \"mx_floor\"`), which lets "
            "each block's largest elements exceed the format's max and clip; "
            "`quantization.scale_rule = \"round_up\"` never clips.");
    else if (!overflowing.empty())
        out.push_back("Overflowing: " + list_of(overflowing, &tensor_line::overflow_rate) +
                      ". Raise `quantization.margin` (now " + std::to_string(x.config.quantization.margin) +
                      ") or use `quantization.scaling = \"current\"` so the scale follows the tensor.");
    if (!enabled(x.config, "partition_clip"))
        out.push_back(
            "Enable `partition_clip`: it clips the gradient norm relative to the gradient format's "
            "range once the overflow rate passes its threshold.");
    return out;
}

std::vector<std::string> after_gradient_vanishing(const failure_context& x) {
    const auto underflowing = worst(x.tensors, &tensor_line::underflow_rate, "output_gradient", 0.5, 3);
    if (underflowing.empty())
        return {
            "No gradient tensor underflowed much, so the zeros come from the model itself (dead "
            "units): compare with the bf16 baseline at the same step."};
    return {"Gradients flushed to zero in " + list_of(underflowing, &tensor_line::underflow_rate) +
            ": give them more range (`quantization.gradient_format = \"e5m2\"`)" +
            (x.config.quantization.scaling == config::scaling_mode::none
                 ? " and per-tensor scaling (`quantization.scaling = \"delayed\"`)"
                 : "") +
            "."};
}

std::vector<std::string> recommendations(const failure_context& x) {
    switch (x.collapse.mode) {
        case failure_mode::nan_loss: return after_nan_loss(x);
        case failure_mode::bit_stall: return after_bit_stall(x);
        case failure_mode::overflow: return after_overflow(x);
        case failure_mode::gradient_vanishing: return after_gradient_vanishing(x);
        default: return {};
    }
}

// ---- The report's sections, in the order they appear ------------------------------

void write_summary(std::ostream& o, const failure_context& x) {
    const verdict& v = x.collapse;
    o << "# Failure report: " << x.config.name << "\n\n"
      << "| | |\n|---|---|\n"
      << "| failure mode | **" << failure_mode_name(v.mode) << "** |\n"
      << "| collapse step (first evidence) | " << v.evidence_step << " |\n"
      << "| decided at step | " << v.decided_step << " of " << x.config.training.max_steps << " |\n"
      << "| evidence | " << v.evidence << " |\n"
      << "| checkpoint | `" << (x.checkpoint.empty() ? "none" : x.checkpoint) << "` |\n"
      << "| learning rate | " << num(x.learning_rate) << " |\n\n";
}

void write_gradients(std::ostream& o, const failure_context& x) {
    o << "## Gradients\n\n";
    if (!x.trend.empty()) {
        const run::train_line& last = x.trend.back();
        o << "Gradient sparsity (parameter-gradient elements with |g| <= " << num(x.config.failure.near_zero)
          << ") at step " << last.step << ": " << pct(last.values.get("grad_sparsity")) << "; gradient norm "
          << shown(last.values.get("grad_norm")) << ".\n";
    }
    if (!x.nonfinite_gradients.empty()) {
        o << "Parameters with non-finite gradients at the collapse:";
        for (const std::string& n : x.nonfinite_gradients) o << " `" << n << "`";
        o << "\n";
    }
}

// The weights that kept every quantized value, and every weight's bit-stall rate, highest first.
void write_zero_update_weights(std::ostream& o, const failure_context& x) {
    o << "\n## Weights with zero updates\n\n";
    std::vector<const tensor_line*> weights;
    for (const tensor_line& t : x.tensors)
        if (t.role == "weight") weights.push_back(&t);
    bool measured = false;
    std::vector<std::string> frozen;
    for (const tensor_line* t : weights) {
        if (!std::isnan(t->bit_stall_rate())) measured = true;
        if (t->bit_stall_rate() >= 1.0) frozen.push_back(t->tensor);
    }
    if (!measured) {
        o << "Bit stall had not been measured yet (it is measured every `quantization.diagnostic_interval` = "
          << x.config.quantization.diagnostic_interval << " steps).\n";
        return;
    }
    o << frozen.size() << " of " << weights.size()
      << " weight tensors kept every quantized value since the previous measurement";
    o << (frozen.empty() ? ".\n" : ":");
    for (const std::string& n : frozen) o << " `" << n << "`";
    if (!frozen.empty()) o << "\n";
    o << "\n| weight | format | bit-stall rate |\n|---|---|---|\n";
    std::vector<const tensor_line*> sorted = weights;
    std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) {
        const double x = std::isnan(a->bit_stall_rate()) ? -1 : a->bit_stall_rate();
        const double y = std::isnan(b->bit_stall_rate()) ? -1 : b->bit_stall_rate();
        return x > y;
    });
    for (const tensor_line* t : sorted)
        o << "| " << t->tensor << " | " << t->format << " | " << pct(t->bit_stall_rate()) << " |\n";
}

void write_trend(std::ostream& o, const failure_context& x) {
    o << "\n## Trend (the last steps)\n\n| step | loss | grad norm | grad sparsity | worst overflow | bit "
         "stall |\n"
         "|---|---|---|---|---|---|\n";
    for (const run::train_line& r : x.trend) {
        const metric_values& v = r.values;
        o << "| " << r.step << " | " << shown(v.get("loss")) << " | " << shown(v.get("grad_norm")) << " | "
          << pct(v.get("grad_sparsity")) << " | " << pct(v.get("overflow_rate")) << " | "
          << pct(v.get("bit_stall")) << " |\n";
    }
}

// A row per diagnostic value, a column per snapshot step.
void write_diagnostics(std::ostream& o, const failure_context& x) {
    if (x.diagnostics.empty()) return;
    std::set<int64_t> steps;
    std::map<std::string, std::map<int64_t, double>> by_name;
    for (const diagnostic_mean& d : x.diagnostics) steps.insert(d.step), by_name[d.name][d.step] = d.value;
    o << "\n## Diagnostics (mean over tensors)\n\n| value |";
    for (int64_t s : steps) o << " step " << s << " |";
    o << "\n|---|";
    for (size_t i = 0; i < steps.size(); ++i) o << "---|";
    o << "\n";
    for (const auto& [name, values] : by_name) {
        o << "| " << name << " |";
        for (int64_t s : steps) {
            const auto it = values.find(s);
            o << " " << (it == values.end() ? "-" : num(it->second)) << " |";
        }
        o << "\n";
    }
}

void write_interventions(std::ostream& o, const failure_context& x) {
    if (x.events.empty()) return;
    o << "\n## Interventions\n\n";
    for (const std::string& e : x.events) o << "- " << e << "\n";
}

void write_recommendations(std::ostream& o, const failure_context& x) {
    o << "\n## Recommendations\n\n";
    const std::vector<std::string> recs = recommendations(x);
    if (recs.empty()) o << "None follow from the evidence recorded here.\n";
    for (const std::string& r : recs) o << "- " << r << "\n";
}

}  // namespace

std::string failure_report_markdown(const failure_context& x) {
    std::ostringstream o;
    write_summary(o, x);
    write_gradients(o, x);
    write_zero_update_weights(o, x);
    write_trend(o, x);
    write_diagnostics(o, x);
    write_interventions(o, x);
    write_recommendations(o, x);
    o << "\n## Config (resolved)\n\n```toml\n" << config::to_toml(x.config) << "```\n";
    return o.str();
}

}  // namespace altgrad::host::stability
