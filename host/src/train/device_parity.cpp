// altgrad-host parity (train/device_parity.hpp): a config's layers through
// quantized_linear on the CPU and on another device, every operand compared
// bit for bit.
#include "train/device_parity.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <utility>

#include <torch/torch.h>

#include "config/run_config.hpp"
#include "plugins/registry.hpp"
#include "quant/seeds.hpp"
#include "train/format_library.hpp"
#include "train/model.hpp"
#include "train/quant_plan.hpp"
#include "train/training_run.hpp"
#include "util/error.hpp"

namespace altgrad::host::train {

int64_t parity_report::differing() const {
    int64_t n = 0;
    for (const auto& [kind, t] : by_operand) n += t.differing;
    return n;
}

namespace {

// One side of the comparison: a plan of its own (scaling state and
// statistics evolve per device), where it runs, and its CPU threads.
struct side {
    quant_plan plan;
    torch::Device device{torch::kCPU};
    int threads = 1;
    std::string name;  // "the CPU", "cuda:0"
};

// What one side made of one layer step: the operands in the tap's order and
// the three products.
struct layer_run {
    std::vector<std::pair<std::string, torch::Tensor>> operands;
    torch::Tensor y, dx, dw;
};

std::string hex(float v) {
    char text[64];
    std::snprintf(text, sizeof text, "%a", static_cast<double>(v));
    return text;
}

// a and b (float32, same shape, on the CPU) bit for bit into the report.
void compare(parity_report& r, const std::string& kind, const std::string& what, const torch::Tensor& a,
             const torch::Tensor& b, const std::string& b_name) {
    parity_tally& t = r.by_operand[kind];
    ++t.tensors;
    const torch::Tensor ca = a.contiguous(), cb = b.contiguous();
    t.elements += ca.numel();
    if (ca.sizes() != cb.sizes()) {
        ++t.differing;
        r.mismatches.push_back({what, ca.numel(), ca.numel(), "shapes differ"});
        return;
    }
    const torch::Tensor differs = ca.view(torch::kInt32).ne(cb.view(torch::kInt32)).flatten();
    const int64_t n = differs.sum().item<int64_t>();
    if (n == 0) return;
    t.differing += n;
    const int64_t at = differs.nonzero()[0][0].item<int64_t>();
    r.mismatches.push_back({what, ca.numel(), n,
                            "element " + std::to_string(at) + ": " + hex(ca.flatten()[at].item<float>()) +
                                " on the CPU, " + hex(cb.flatten()[at].item<float>()) + " on " + b_name});
}

// A site's state after a call: what its metrics line and its next scale follow from.
std::vector<std::pair<const char*, double>> state_of(const quant_site& s) {
    return {{"amax", s.amax},
            {"scale", s.scale},
            {"overflow_count", static_cast<double>(s.overflow_count)},
            {"underflow_count", static_cast<double>(s.underflow_count)},
            {"count", static_cast<double>(s.count)}};
}

void compare_state(parity_report& r, const quant_site& a, const quant_site& b, const std::string& b_name,
                   int64_t step) {
    parity_tally& t = r.by_operand["site state"];
    ++t.tensors;
    const auto fields_a = state_of(a), fields_b = state_of(b);
    for (size_t i = 0; i < fields_a.size(); ++i) {
        const auto& [field, va] = fields_a[i];
        const double vb = fields_b[i].second;
        ++t.elements;
        if (va == vb || (std::isnan(va) && std::isnan(vb))) continue;
        ++t.differing;
        r.mismatches.push_back({a.name() + " " + field + ", step " + std::to_string(step), 1, 1,
                                std::to_string(va) + " on the CPU, " + std::to_string(vb) + " on " + b_name});
    }
}

// The largest |a - b| / max |a|, into the report's figure for `product`.
void note_difference(parity_report& r, const std::string& product, const torch::Tensor& a,
                     const torch::Tensor& b) {
    const double scale = std::max(a.abs().max().item<double>(), 1e-30);
    double& worst = r.product_difference[product];
    worst = std::max(worst, (a - b).abs().max().item<double>() / scale);
}

// Layer `s` (its first site) of one side at one step, on the same inputs as the other side.
layer_run run_layer(side& d, size_t s, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                    const torch::Tensor& dy, int64_t step) {
    set_cpu_threads(d.threads);
    layer_run out;
    d.plan.step = static_cast<uint64_t>(step);
    d.plan.micro_batch = 0;
    d.plan.operand_tap = [&out](size_t, const char* operand, const torch::Tensor& values) {
        out.operands.emplace_back(operand, values.detach().to(torch::kCPU).clone());
    };
    const torch::Tensor xd = x.to(d.device).clone().requires_grad_(true);
    const torch::Tensor wd = w.to(d.device).clone().requires_grad_(true);
    const torch::Tensor bd = b.defined() ? b.to(d.device).clone() : torch::Tensor();
    const torch::Tensor y = quantized_linear(xd, wd, bd, d.plan, s);
    y.backward(dy.to(d.device));
    d.plan.operand_tap = nullptr;
    out.y = y.detach().to(torch::kCPU);
    out.dx = xd.grad().to(torch::kCPU);
    out.dw = wd.grad().to(torch::kCPU);
    return out;
}

// n(0, 1) values with one in a hundred made a hundred times larger (outliers:
// what saturates, and what per-tensor scaling flushes the rest towards),
// times `scale`; drawn on the CPU from `seed`.
torch::Tensor drawn(std::vector<int64_t> shape, uint64_t seed, double scale) {
    torch::manual_seed(seed);
    const torch::Tensor v = torch::randn(shape);
    const torch::Tensor outlier = torch::rand(shape).lt(0.01).to(torch::kFloat32);
    return v * (1 + 99 * outlier) * scale;
}

// The sites whose state a layer's call changes: its three, and its second uses' own.
std::vector<size_t> sites_of_layer(const quant_plan& plan, size_t s) {
    std::vector<size_t> sites{s, s + 1, s + 2};
    for (const second_use& u : plan.second_uses[s / 3])
        if (u.own) sites.push_back(*u.own);
    return sites;
}

void compare_layers(parity_report& r, side& a, side& b, GPT& model, const parity_request& q) {
    const auto params = model->named_parameters();
    for (size_t k = 0; k < a.plan.second_uses.size(); ++k) {
        const size_t s = 3 * k;
        const std::string& layer = a.plan.sites[s].layer;
        const torch::Tensor w = params[parameter_of(a.plan.sites[s])].detach();
        const torch::Tensor* has_bias = params.find(layer + ".bias");
        const torch::Tensor bias = has_bias ? has_bias->detach() : torch::Tensor();
        for (int64_t step = 0; step < q.steps; ++step) {
            const uint64_t key = quant::seed_of(a.plan.seed, static_cast<uint64_t>(step), k);
            const torch::Tensor x = drawn({1, q.tokens, w.size(1)}, key, 1.0);
            const torch::Tensor dy = drawn({1, q.tokens, w.size(0)}, key + 1, 1e-4);
            const layer_run ra = run_layer(a, s, x, w, bias, dy, step),
                            rb = run_layer(b, s, x, w, bias, dy, step);
            const std::string at = ", step " + std::to_string(step);
            if (ra.operands.size() != rb.operands.size())
                throw error(layer + ": " + std::to_string(ra.operands.size()) + " operands on the CPU, " +
                            std::to_string(rb.operands.size()) + " on " + b.name);
            for (size_t i = 0; i < ra.operands.size(); ++i)
                compare(r, ra.operands[i].first, layer + " " + ra.operands[i].first + at,
                        ra.operands[i].second, rb.operands[i].second, b.name);
            for (size_t site : sites_of_layer(a.plan, s))
                compare_state(r, a.plan.sites[site], b.plan.sites[site], b.name, step);
            note_difference(r, "y", ra.y, rb.y);
            note_difference(r, "dx", ra.dx, rb.dx);
            note_difference(r, "dW", ra.dw, rb.dw);
        }
    }
    r.layers = static_cast<int64_t>(a.plan.second_uses.size());
}

// [quantization.communication]: each parameter's gradient as the ranks send it.
void compare_communication(parity_report& r, side& a, side& b, const std::vector<size_t>& sites,
                           const std::vector<torch::Tensor>& params, const parity_request& q) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < sites.size(); ++i) {
        quant_site &sa = a.plan.sites[sites[i]], &sb = b.plan.sites[sites[i]];
        for (int64_t step = 0; step < q.steps; ++step) {
            const uint64_t key = quant::micro_batch_key(static_cast<uint64_t>(step), 0);
            const uint64_t seed = quant::seed_of(a.plan.seed, key, quant::communication_stream(i));
            const torch::Tensor g = drawn(params[i].sizes().vec(), seed, 1e-3);
            set_cpu_threads(a.threads);
            const torch::Tensor qa = fake_quantize(g.clone(), sa, a.plan, seed);
            set_cpu_threads(b.threads);
            const torch::Tensor qb = fake_quantize(g.to(b.device), sb, b.plan, seed).to(torch::kCPU);
            compare(r, "communication", sa.name() + ", step " + std::to_string(step), qa, qb, b.name);
            compare_state(r, sa, sb, b.name, step);
        }
    }
}

// Products through an accumulator run on the CPU only: here both sides take
// the float32 product (the operands are what is compared), and the report says so.
void drop_accumulators(quant_plan& plan, parity_report& r) {
    bool dropped = false;
    for (product_accumulators& layer : plan.accumulators)
        for (product_accumulator& acc : layer) {
            dropped = dropped || acc.modelled();
            acc = product_accumulator{};
        }
    if (dropped)
        r.not_compared.push_back(
            "the products through accumulators (quantization.*.accumulator): modelled on the CPU only; "
            "both sides here take float32 products of the same operands");
}

// One side's plan for config `c`: the model's layers and communication sites,
// formats assigned, accumulators dropped; the model's initial weights into
// `params` (by name) when asked.
struct built_plan {
    quant_plan plan;
    std::vector<size_t> communication;
};
built_plan build_plan(const config::run_config& c, format_library& formats, const parity_request& q,
                      parity_report& r, int threads, GPT* model_out) {
    built_plan b;
    torch::manual_seed(static_cast<uint64_t>(c.training.seed));
    GPT model(gpt_config_of(c.model, q.vocab), b.plan);
    assign_formats(b.plan, c, formats);
    b.plan.seed = static_cast<uint64_t>(c.training.seed);
    b.plan.gemm_threads = static_cast<unsigned>(threads);
    std::vector<std::string> names;
    for (const auto& p : model->named_parameters()) names.push_back(p.key());
    b.communication = add_communication_sites(b.plan, c, formats, names);
    drop_accumulators(b.plan, r);
    if (model_out) *model_out = model;
    return b;
}

// Whether two plans have the same layers, sites and communication sites (in order).
bool same_layout(const built_plan& a, const built_plan& b) {
    if (a.plan.sites.size() != b.plan.sites.size() || a.communication != b.communication) return false;
    for (size_t i = 0; i < a.plan.sites.size(); ++i)
        if (a.plan.sites[i].name() != b.plan.sites[i].name()) return false;
    return true;
}

}  // namespace

parity_report check_device_parity(const parity_request& q) {
    if (q.device != "cuda" && q.device != "cpu")
        throw error("parity: --device '" + q.device + "': expected cuda or cpu");
    registry plugins(q.plugins);
    const config::run_config c = config::load_config(q.config, q.overrides);
    format_library formats(plugins, c.source.string() + ": quantization", c.quantization.params);
    const int threads = cpu_threads_of(c.training);
    parity_report r;
    r.steps = q.steps;
    side a, b;
    a.threads = threads;
    a.name = "the CPU";
    GPT model{nullptr};
    built_plan pa = build_plan(c, formats, q, r, threads, &model);
    a.plan = pa.plan;
    // The other side: the same plan, or the config with --against-set's overrides too.
    std::vector<std::string> b_overrides = q.overrides;
    b_overrides.insert(b_overrides.end(), q.against_overrides.begin(), q.against_overrides.end());
    const config::run_config cb =
        q.against_overrides.empty() ? c : config::load_config(q.config, b_overrides);
    format_library b_formats(plugins, cb.source.string() + ": quantization", cb.quantization.params);
    if (q.against_overrides.empty()) {
        b.plan = a.plan;
    } else {
        parity_report ignored;  // the notes are the first side's
        const built_plan pb = build_plan(cb, b_formats, q, ignored, threads, nullptr);
        if (!same_layout(pa, pb))
            throw error(
                "parity --against-set: the model and its sites must stay the same on both sides "
                "(an override of [model], or of which tensors are quantized, changes them)");
        b.plan = pb.plan;
    }
    if (q.device == "cuda") {
        config::run_config on_gpu = cb;
        on_gpu.source = cb.source.string() + " (parity --device cuda)";
        on_gpu.training.device = config::compute_device::cuda;
        b.device = training_device(on_gpu, b.plan, 0);
        b.threads = threads;
        b.name = b.device.str();
    } else {
        b.threads = 1;
        b.name = "the CPU with 1 thread";
        b.plan.gemm_threads = 1;
    }
    if (!q.against_overrides.empty()) b.name += " with --against-set";
    // The model's layers point at the plan build_plan made (gone): only its weights are used.
    std::vector<torch::Tensor> params;
    for (const auto& p : model->named_parameters()) params.push_back(p.value().detach());
    r.against = b.name;
    compare_layers(r, a, b, model, q);
    compare_communication(r, a, b, pa.communication, params, q);
    return r;
}

}  // namespace altgrad::host::train
