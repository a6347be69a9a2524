// The intervention and diagnostic checks' plugin calls, guarded as the format
// calls are, and their inputs: random observations and tensors, the answers
// as text, and the history runner the checks of both kinds share (checks.hpp
// says what each does).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "conformance/checks.hpp"
#include "plugins/accumulator_handle.hpp"
#include "plugins/manifest.hpp"

namespace altgrad::host::conformance {

namespace fs = std::filesystem;

namespace {

// The formats a random observation's tensors are in, and their max.
const char* const kFormats[] = {"e7m0", "e5m2", "e4m3", "e3m4", "e1m6", "e0m7"};
const double kFormatMax[] = {4.611686018427388e18, 57344.0, 448.0, 15.5, 1.96875, 0.9921875};

// A format instance for the tensors' format_ref: a bundled format from the
// target's own plugins folder.
bool load_reference_format(env& e, result& why) {
    const fs::path dir = e.target.manifest_path.parent_path().parent_path();
    std::string tried;
    for (const char* name : {"e5m2", "e3m4", "e4m3"}) {
        const fs::path m = dir / name / "manifest.toml";
        std::error_code ec;
        if (!fs::exists(m, ec)) {
            tried += std::string(tried.empty() ? "" : ", ") + name;
            continue;
        }
        try {
            e.format = format_handle::create(load_plugin(read_manifest(m)));
            return true;
        } catch (const std::exception& x) {
            tried += std::string(tried.empty() ? "" : ", ") + name + " (" + x.what() + ")";
        }
    }
    why = skip("needs a format for the tensors' format_ref and found none usable in " + dir.string() + ": " +
               tried);
    return false;
}

altgrad_tensor_view view_of(const env& e, const std::string& name, altgrad_tensor_role role,
                            const float* data, const float* previous, size_t count) {
    altgrad_tensor_view v{};
    v.struct_size = sizeof v;
    v.name = name.c_str();
    v.role = role;
    v.data = count ? data : nullptr;
    v.previous = previous;
    v.count = count;
    v.ndim = 1;
    v.shape[0] = static_cast<int64_t>(count);
    v.memory = ALTGRAD_MEMORY_HOST;
    v.format = e.format->ref();
    v.scale = 1.0f;
    return v;
}

bool same_double(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

bool load_for_check(env& e, result& why) {
    try {
        e.plugin = load_plugin(*e.target.info);
        return true;
    } catch (const std::exception& x) {
        why = skip(std::string("the plugin does not load (see load.abi_version, load.descriptor): ") +
                   x.what());
        return false;
    }
}

void create_instance(const env& e, const host::given_params& params) {
    if (e.plugin->info.kind == ALTGRAD_KIND_INTERVENTION)
        intervention_handle::create(e.plugin, params, "conformance");
    else if (e.plugin->info.kind == ALTGRAD_KIND_DIAGNOSTIC)
        diagnostic_handle::create(e.plugin, params, "conformance");
    else if (e.plugin->info.kind == ALTGRAD_KIND_TRANSFORM)
        transform_handle::create(e.plugin, params, "conformance");
    else if (e.plugin->info.kind == ALTGRAD_KIND_ACCUMULATOR)
        accumulator_handle::create(e.plugin, params, "conformance");
    else format_handle::create(e.plugin, params, "conformance");
}

bool prepare(env& e, result& why) {
    if (!load_for_check(e, why)) return false;
    if (e.plugin->info.kind == ALTGRAD_KIND_DIAGNOSTIC && !load_reference_format(e, why)) return false;
    try {
        create_instance(e, {});
    } catch (const std::exception& x) {
        why = skip(std::string("the plugin does not create with its defaults (see params.defaults): ") +
                   x.what());
        return false;
    }
    return true;
}

// -------- intervention inputs and answers

observation random_observation(env& e, uint64_t step, uint32_t& nonfinite_run) {
    e.drew_random = true;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    observation o;
    o.step = step;
    const bool bad = u(e.rng) < 0.15;
    nonfinite_run = bad ? nonfinite_run + 1 : 0;
    o.loss = bad ? (u(e.rng) < 0.5 ? NAN : INFINITY) : 1.0 + 4.0 * u(e.rng);
    o.grad_norm = bad ? INFINITY : std::exp2(20.0 * u(e.rng) - 10.0);
    o.learning_rate = 1e-3 * u(e.rng);
    o.consecutive_nonfinite_steps = nonfinite_run;
    const altgrad_tensor_role roles[] = {ALTGRAD_TENSOR_WEIGHT, ALTGRAD_TENSOR_GRADIENT,
                                         ALTGRAD_TENSOR_ACTIVATION, ALTGRAD_TENSOR_OUTPUT_GRADIENT};
    for (int layer = 0; layer < 2; ++layer)
        for (altgrad_tensor_role role : roles) {
            tensor_observation t;
            t.name = "blocks." + std::to_string(layer) + ".fc." + std::to_string(static_cast<int>(role));
            t.role = role;
            const size_t f = static_cast<size_t>(u(e.rng) * 6) % 6;
            t.format = kFormats[f];
            t.format_max = kFormatMax[f];
            t.overflow_rate = u(e.rng) < 0.1 ? NAN : 0.05 * u(e.rng) * u(e.rng);
            t.underflow_rate = u(e.rng) < 0.1 ? NAN : u(e.rng);
            t.bit_stall_rate = role != ALTGRAD_TENSOR_WEIGHT || u(e.rng) < 0.2 ? NAN : u(e.rng);
            o.tensors.push_back(std::move(t));
        }
    return o;
}

std::vector<observation> random_history(env& e, size_t n) {
    std::vector<observation> h;
    uint32_t run = 0;
    for (size_t k = 0; k < n; ++k) h.push_back(random_observation(e, k, run));
    return h;
}

std::string answer_text(const std::vector<action>& acts) {
    std::string s;
    for (const action& a : acts)
        s += std::string("[") + action_kind_name(a.kind) + " " + hex_float(a.value) + " '" + a.tensor +
             "' '" + a.format + "' " + a.reason + "]";
    return s.empty() ? "(no actions)" : s;
}

std::string observation_text(const observation& o) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "step %llu: loss %s, grad_norm %s, %u non-finite in a row, %zu tensors",
                  static_cast<unsigned long long>(o.step), hex_float(o.loss).c_str(),
                  hex_float(o.grad_norm).c_str(), o.consecutive_nonfinite_steps, o.tensors.size());
    return buf;
}

// -------- diagnostic inputs and answers

tensor_set make_tensors(env& e, const diagnostic_handle& d, size_t count, bool special) {
    e.drew_random = true;
    tensor_set s;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<altgrad_tensor_role> roles;
    for (int r = ALTGRAD_TENSOR_WEIGHT; r <= ALTGRAD_TENSOR_OUTPUT_GRADIENT; ++r)
        if (d.interests() == 0 || d.interested_in(static_cast<altgrad_tensor_role>(r)))
            roles.push_back(static_cast<altgrad_tensor_role>(r));
    for (size_t k = 0; k < roles.size(); ++k) {
        // A gradient is named like its weight, as the trainer does, so diagnostics that pair them can.
        s.names.push_back(roles[k] == ALTGRAD_TENSOR_GRADIENT && k > 0 && roles[0] == ALTGRAD_TENSOR_WEIGHT
                              ? s.names[0]
                              : "blocks.0.t" + std::to_string(k));
        std::vector<float> x(count), p(count);
        for (size_t i = 0; i < count; ++i) {
            const double mag = std::exp2(40.0 * u(e.rng) - 24.0);
            x[i] = static_cast<float>(u(e.rng) < 0.5 ? -mag : mag);
            p[i] = x[i] * static_cast<float>(1.0 + 0.01 * (u(e.rng) - 0.5));
            if (u(e.rng) < 0.05) x[i] = 0.0f;
            if (special) {
                const double c = u(e.rng);
                if (c < 0.1) x[i] = NAN;
                else if (c < 0.2) x[i] = c < 0.15 ? INFINITY : -INFINITY;
                else if (c < 0.25) p[i] = NAN;
            }
        }
        s.data.push_back(std::move(x));
        s.previous.push_back(std::move(p));
    }
    for (size_t k = 0; k < roles.size(); ++k)
        s.views.push_back(view_of(e, s.names[k], roles[k], s.data[k].data(),
                                  roles[k] == ALTGRAD_TENSOR_WEIGHT && count ? s.previous[k].data() : nullptr,
                                  count));
    // Attention probabilities are [batch, head, query, key], as the trainer hands them.
    for (size_t k = 0; k < roles.size(); ++k)
        if (roles[k] == ALTGRAD_TENSOR_ATTENTION_PROBS) {
            s.views[k].ndim = 4;
            const int64_t shape[4] = {1, 1, 1, static_cast<int64_t>(count)};
            for (int d = 0; d < 4; ++d) s.views[k].shape[d] = shape[d];
        }
    return s;
}

std::string values_text(const std::vector<diagnostic_value>& vals) {
    std::string s;
    for (const diagnostic_value& v : vals)
        s += "[" +
             (v.tensor_index == ALTGRAD_ALL_TENSORS ? std::string("all") : std::to_string(v.tensor_index)) +
             " " + v.name + " " + hex_float(v.value) + "]";
    return s.empty() ? "(no values)" : s;
}

bool same_values(const std::vector<diagnostic_value>& a, const std::vector<diagnostic_value>& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
        if (a[k].tensor_index != b[k].tensor_index || a[k].name != b[k].name ||
            !same_double(a[k].value, b[k].value))
            return false;
    return true;
}

// -------- the guarded calls

std::vector<action> observe(intervention_handle& h, const observation& o) {
    const std::string call = "observe of step " + std::to_string(o.step) + " (tensor count " +
                             std::to_string(o.tensors.size()) + ")";
    const call_note note(call);
    guarded_array<altgrad_tensor_observation> tensors(intervention_handle::abi_tensors(o), "tensors");
    tensors.seal();
    guarded_array<altgrad_action> actions(intervention_handle::action_capacity(o.tensors.size()), "actions");
    std::vector<action> answer =
        h.observe(intervention_handle::abi_observation(o, tensors.data()), actions.data(), actions.size());
    expect_front_intact(actions.buffer(), call, "actions");
    return answer;
}

std::vector<diagnostic_value> measure(diagnostic_handle& d, uint64_t step,
                                      const std::vector<altgrad_tensor_view>& views) {
    const std::string call =
        "measure of step " + std::to_string(step) + " (tensor count " + std::to_string(views.size()) + ")";
    const call_note note(call);
    std::vector<guarded_array<float>> elements;
    elements.reserve(3 * views.size());
    auto sealed_copy = [&](const float* from, size_t n, const std::string& name) -> const float* {
        if (from == nullptr) return nullptr;
        elements.emplace_back(std::vector<float>(from, from + n), name.c_str());
        elements.back().seal();
        return elements.back().data();
    };
    std::vector<altgrad_tensor_view> copies = views;
    for (size_t k = 0; k < copies.size(); ++k) {
        copies[k].data = sealed_copy(copies[k].data, copies[k].count, "data of tensor " + std::to_string(k));
        copies[k].previous =
            sealed_copy(copies[k].previous, copies[k].count, "previous of tensor " + std::to_string(k));
        copies[k].block_scales = sealed_copy(copies[k].block_scales, copies[k].block_count,
                                             "block_scales of tensor " + std::to_string(k));
    }
    guarded_array<altgrad_tensor_view> tensors(copies, "tensors");
    tensors.seal();
    guarded_array<altgrad_diagnostic_value> values(d.value_capacity(views.size()), "values");
    std::vector<diagnostic_value> answer =
        d.measure(step, views.empty() ? nullptr : tensors.data(), views.size(), values.data(), values.size());
    expect_front_intact(values.buffer(), call, "values");
    return answer;
}

namespace {

struct intervention_runner : history_runner {
    env& e;
    std::vector<observation> h[2];
    std::vector<std::shared_ptr<intervention_handle>> live;
    intervention_runner(env& e_, size_t n) : e(e_) {
        h[0] = random_history(e, n);
        h[1] = random_history(e, n);
    }
    size_t length() const override { return h[0].size(); }
    std::string input(size_t k) const override { return observation_text(h[0][k]); }
    size_t fresh() override {
        live.push_back(intervention_handle::create(e.plugin, {}, "conformance"));
        return live.size() - 1;
    }
    std::string answer(size_t i, int which, size_t k) override {
        return answer_text(observe(*live[i], h[which][k]));
    }
    void drop(size_t i) override { live[i].reset(); }
};

struct diagnostic_runner : history_runner {
    env& e;
    std::vector<tensor_set> h[2];
    std::vector<std::shared_ptr<diagnostic_handle>> live;
    diagnostic_runner(env& e_, size_t n) : e(e_) {
        const std::shared_ptr<diagnostic_handle> probe =
            diagnostic_handle::create(e.plugin, {}, "conformance");
        for (int w = 0; w < 2; ++w)
            for (size_t k = 0; k < n; ++k) h[w].push_back(make_tensors(e, *probe, 64 + k % 5, k % 4 == 3));
    }
    size_t length() const override { return h[0].size(); }
    std::string input(size_t k) const override {
        return "measure step " + std::to_string(k) + ": " + std::to_string(h[0][k].views.size()) +
               " tensors of " + std::to_string(h[0][k].views.empty() ? 0 : h[0][k].views[0].count) +
               " random elements";
    }
    size_t fresh() override {
        live.push_back(diagnostic_handle::create(e.plugin, {}, "conformance"));
        return live.size() - 1;
    }
    std::string answer(size_t i, int which, size_t k) override {
        return values_text(measure(*live[i], k, h[which][k].views));
    }
    void drop(size_t i) override { live[i].reset(); }
};

}  // namespace

std::unique_ptr<history_runner> make_runner(env& e, size_t n) {
    if (e.plugin->info.kind == ALTGRAD_KIND_INTERVENTION) return std::make_unique<intervention_runner>(e, n);
    return std::make_unique<diagnostic_runner>(e, n);
}

}  // namespace altgrad::host::conformance
