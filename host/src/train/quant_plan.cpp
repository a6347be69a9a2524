#include "train/quant_plan.hpp"

#include <ATen/Parallel.h>

#include <atomic>
#include <cmath>

#include "plugins/abi_names.hpp"
#include "util/error.hpp"
#include "util/glob.hpp"

namespace altgrad::host::train {

std::string quant_site::name() const {
    switch (role) {
        case ALTGRAD_TENSOR_WEIGHT: return layer + ".weight";
        case ALTGRAD_TENSOR_ACTIVATION: return layer + ".input";
        default: return layer + ".output_grad";
    }
}

const char* quant_site::role_name() const { return host::role_name(role); }

size_t quant_plan::add_linear(const std::string& layer) {
    const size_t first = sites.size();
    for (altgrad_tensor_role role : {ALTGRAD_TENSOR_WEIGHT, ALTGRAD_TENSOR_ACTIVATION, ALTGRAD_TENSOR_OUTPUT_GRADIENT}) {
        quant_site s;
        s.layer = layer;
        s.role = role;
        sites.push_back(std::move(s));
    }
    return first;
}

namespace {

// SplitMix64 finalizer: spreads (seed, step, stream) over the 64-bit seed
// space the format plugins' generators are keyed with.
uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace

namespace {

// The stochastic-rounding seed of one tensor's quantization: a hash of (run seed, step, stream).
uint64_t seed_of(const quant_plan& plan, uint64_t stream) { return mix(plan.seed ^ mix(plan.step ^ mix(stream))); }

// q(in*s)/s of a float32 tensor into out (same size and device) through the
// format plugin. CPU: chunked over LibTorch's threads; chunks carry their
// offset, so results do not depend on the thread count. CUDA: one call on the
// device's default stream, whose counts make it wait for the result.
quantize_counts quantize_tensor(const format_handle& format, const torch::Tensor& in, torch::Tensor& out,
                                quantize_options o) {
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = in.numel();
    if (in.device().is_cuda()) {
        o.memory = ALTGRAD_MEMORY_CUDA;
        o.device_index = in.device().index();
        return format.quantize(src, dst, static_cast<size_t>(n), o);
    }
    std::atomic<uint64_t> overflow{0}, underflow{0};
    at::parallel_for(0, n, 1 << 15, [&](int64_t begin, int64_t end) {
        quantize_options chunk = o;
        chunk.offset = static_cast<uint64_t>(begin);
        const quantize_counts c = format.quantize(src + begin, dst + begin, static_cast<size_t>(end - begin), chunk);
        overflow += c.overflow;
        underflow += c.underflow;
    });
    return {overflow, underflow};
}

quantize_options options_of(const quant_site& site, float scale) {
    quantize_options o;
    o.rounding = site.rounding;
    o.overflow = site.overflow;
    o.scale = scale;
    return o;
}

// A tensor the site's format plugin can take: float32, on the CPU, or on a
// GPU when the plugin has a CUDA implementation.
void check_quantizable(const torch::Tensor& x, const quant_site& site) {
    if (x.scalar_type() != torch::kFloat32) throw error("quantize " + site.name() + ": only float32 tensors are supported");
    if (x.device().is_cuda() && !site.format->accepts(ALTGRAD_MEMORY_CUDA))
        throw error("quantize " + site.name() + ": format plugin '" + site.format->name() +
                    "' has no CUDA implementation (build it with ALTGRAD_CUDA=ON, or train on cpu)");
    if (!x.device().is_cpu() && !x.device().is_cuda())
        throw error("quantize " + site.name() + ": tensors on " + x.device().str() + " are not supported");
}

}  // namespace

torch::Tensor fake_quantize(const torch::Tensor& t, quant_site& site, const quant_plan& plan, uint64_t stream) {
    if (plan.capture && site.role != ALTGRAD_TENSOR_WEIGHT) site.captured = t.detach();
    if (!site.format) return t;
    const torch::Tensor x = t.contiguous();
    check_quantizable(x, site);
    const int64_t n = x.numel();
    double amax = 0.0;
    if (n > 0) {  // one pass, no |x| temporary; NaN propagates as from abs().max()
        const auto [lo_t, hi_t] = torch::aminmax(x);
        const double lo = lo_t.item<double>(), hi = hi_t.item<double>();  // one read each (a GPU sync each)
        amax = std::isnan(lo) || std::isnan(hi) ? NAN : std::max(std::fabs(lo), std::fabs(hi));
    }
    const float scale = site.scaling.scale_for(amax);
    torch::Tensor out = torch::empty_like(x);
    quantize_options o = options_of(site, scale);
    o.seed = seed_of(plan, stream);
    const quantize_counts c = quantize_tensor(*site.format, x, out, o);
    site.scaling.record(amax);
    site.amax = amax;
    site.scale = scale;
    site.overflow_count = c.overflow;
    site.underflow_count = c.underflow;
    site.count = static_cast<uint64_t>(n);
    return out;
}

torch::Tensor quantize_nearest(const torch::Tensor& t, const quant_site& site) {
    const torch::Tensor x = t.contiguous();
    torch::Tensor out = torch::empty_like(x);
    if (!site.format) return out.copy_(x);
    check_quantizable(x, site);
    quantize_options o;  // nearest-even, saturating: no seed needed
    o.scale = site.scale;
    quantize_tensor(*site.format, x, out, o);
    return out;
}

void store_in_format(torch::Tensor& w, const quant_site& site, const quant_plan& plan, uint64_t stream) {
    if (!site.format) return;
    check_quantizable(w, site);
    if (!w.is_contiguous()) throw error("store " + site.name() + ": the parameter is not contiguous");
    quantize_options o = options_of(site, site.scale);
    o.seed = seed_of(plan, stream);
    quantize_tensor(*site.format, w, w, o);  // in place
}

namespace {

struct QuantizedLinearFunction : public torch::autograd::Function<QuantizedLinearFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                                 const torch::Tensor& b, quant_plan* plan, int64_t first_site) {
        const size_t s = static_cast<size_t>(first_site);
        const torch::Tensor qx = fake_quantize(x, plan->sites[s + 1], *plan, s + 1);
        const torch::Tensor qw = fake_quantize(w, plan->sites[s], *plan, s);
        ctx->save_for_backward({qx, qw});
        ctx->saved_data["plan"] = reinterpret_cast<int64_t>(plan);
        ctx->saved_data["site"] = first_site;
        ctx->saved_data["bias"] = b.numel() > 0;
        torch::Tensor y = torch::matmul(qx, qw.t());
        if (b.numel() > 0) y = y + b;
        return y;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const torch::Tensor& qx = saved[0];
        const torch::Tensor& qw = saved[1];
        auto* plan = reinterpret_cast<quant_plan*>(ctx->saved_data["plan"].toInt());
        const size_t s = static_cast<size_t>(ctx->saved_data["site"].toInt());
        const torch::Tensor qg = fake_quantize(grads[0], plan->sites[s + 2], *plan, s + 2);
        const int64_t out = qw.size(0), in = qw.size(1);
        const torch::Tensor g2 = qg.reshape({-1, out});
        torch::Tensor gx = torch::matmul(qg, qw);
        torch::Tensor gw = torch::matmul(g2.t(), qx.reshape({-1, in}));
        torch::Tensor gb = ctx->saved_data["bias"].toBool() ? g2.sum(0) : torch::Tensor();
        return {gx, gw, gb, torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

torch::Tensor quantized_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                               quant_plan& plan, size_t first_site) {
    // Autograd functions take defined tensors only: no bias is an empty one.
    const torch::Tensor bias = b.defined() ? b : torch::zeros({0}, w.options());
    return QuantizedLinearFunction::apply(x, w, bias, &plan, static_cast<int64_t>(first_site));
}


// ---------------------------------------------------------------- formats

std::shared_ptr<const format_handle> format_library::get(const std::string& name) {
    if (name == "fp32") return nullptr;
    return load(name);
}

std::shared_ptr<const format_handle> format_library::load(const std::string& name) {
    auto it = handles_.find(name);
    if (it != handles_.end()) return it->second;
    try {
        return handles_[name] = format_handle::create(plugins_.load(name));
    } catch (const error& e) {
        throw error(where_ + ": format '" + name + "': " + e.what());
    }
}

std::string format_name_of(const quant_site& s) { return s.format ? s.format->name() : "fp32"; }

namespace {

scaling_config scaling_of(const config::quantization_config& q) {
    scaling_config s;
    s.mode = q.scaling;
    s.history_len = static_cast<int>(q.amax_history_len);
    s.compute = q.amax_compute;
    s.margin = static_cast<int>(q.margin);
    return s;
}

}  // namespace

void assign_formats(quant_plan& plan, const config::run_config& c, format_library& formats) {
    const config::quantization_config& q = c.quantization;
    for (quant_site& s : plan.sites) {
        if (!q.enabled) continue;
        const config::layer_formats f = config::formats_for(q, s.layer);
        const bool backward = s.role == ALTGRAD_TENSOR_OUTPUT_GRADIENT;
        s.format = formats.get(s.role == ALTGRAD_TENSOR_WEIGHT       ? f.weight
                               : s.role == ALTGRAD_TENSOR_ACTIVATION ? f.activation
                                                                     : f.gradient);
        s.rounding = backward ? q.backward_rounding : q.forward_rounding;
        s.overflow = q.overflow;
        s.scaling = scaling_state(scaling_of(q), s.format ? s.format->info().max_finite : 1.0);
    }
}

std::vector<run::format_switch> switch_formats(quant_plan& plan, const std::string& pattern, const std::string& to,
                                               format_library& formats) {
    std::vector<run::format_switch> done;
    for (quant_site& s : plan.sites) {
        if (!glob_match(pattern, s.name()) || format_name_of(s) == to) continue;
        const std::string from = format_name_of(s);
        s.format = formats.get(to);
        s.scaling.reset(s.format ? s.format->info().max_finite : 1.0);
        run::format_switch sw;
        sw.tensor = s.name();
        sw.from = from;
        sw.to = to;
        done.push_back(std::move(sw));
    }
    return done;
}

std::vector<run::site_record> site_records(const quant_plan& plan) {
    std::vector<run::site_record> out;
    for (const quant_site& s : plan.sites) out.push_back({s.name(), format_name_of(s), s.bit_stall_rate, s.scaling.record_state()});
    return out;
}

void restore_sites(quant_plan& plan, const std::vector<run::site_record>& records, format_library& formats,
                   const std::string& where) {
    if (records.size() != plan.sites.size())
        throw error(where + ": key 'sites': " + std::to_string(records.size()) + " sites, but this model has " +
                    std::to_string(plan.sites.size()) + " (a checkpoint of another model?)");
    for (size_t k = 0; k < records.size(); ++k) {
        quant_site& s = plan.sites[k];
        const run::site_record& r = records[k];
        if (r.name != s.name())
            throw error(where + ": key 'sites[" + std::to_string(k) + "].name': \"" + r.name + "\", but this model's site " +
                        std::to_string(k) + " is \"" + s.name() + "\"");
        // Formats first (an intervention may have switched some), then their scaling.
        if (r.format != format_name_of(s)) {
            s.format = formats.get(r.format);
            s.scaling.reset(s.format ? s.format->info().max_finite : 1.0);
        }
        s.scaling.restore(r.scaling);
        s.bit_stall_rate = r.bit_stall_rate;
    }
}

}  // namespace altgrad::host::train
