#include "train/measure.hpp"

#include "util/abi_names.hpp"

#include <cmath>

namespace altgrad::host::train {

double grad_sparsity(const std::vector<torch::Tensor>& params, double near_zero) {
    int64_t near = 0, total = 0;
    for (const torch::Tensor& p : params) {
        total += p.numel();
        const torch::Tensor& g = p.grad();
        near += g.defined() ? (g.abs() <= near_zero).sum().item<int64_t>() : p.numel();
    }
    return total ? static_cast<double>(near) / static_cast<double>(total) : NAN;
}

worst_rates worst_quantization_rates(const quant_plan& plan) {
    worst_rates w;
    for (const quant_site& s : plan.sites) {
        if (!s.format || s.count == 0) continue;
        w.overflow = std::max(w.overflow, s.overflow_rate());
        w.underflow = std::max(w.underflow, s.underflow_rate());
    }
    return w;
}

std::vector<std::string> nonfinite_gradients(const std::map<std::string, torch::Tensor>& params) {
    std::vector<std::string> out;
    for (const auto& [name, p] : params)
        if (p.grad().defined() && !torch::isfinite(p.grad()).all().item<bool>()) out.push_back(name);
    return out;
}

double bit_stall_meter::measure(quant_plan& plan, const weight_lookup& weight_of) const {
    int64_t stalled = 0, total = 0;
    for (size_t k = 0; k < plan.sites.size(); ++k) {
        quant_site& s = plan.sites[k];
        if (s.role != ALTGRAD_TENSOR_WEIGHT || s.second_use()) continue;  // the weight as it is stored
        const torch::Tensor then = previous(k);
        if (!then.defined()) {
            s.bit_stall_rate = NAN;
            continue;
        }
        torch::NoGradGuard no_grad;
        const torch::Tensor now = weight_of(s);
        const int64_t same = (quantize_nearest(now, s) == quantize_nearest(then, s)).sum().item<int64_t>();
        s.bit_stall_rate = now.numel() ? static_cast<double>(same) / static_cast<double>(now.numel()) : NAN;
        stalled += same;
        total += now.numel();
    }
    return total ? static_cast<double>(stalled) / static_cast<double>(total) : NAN;
}

void bit_stall_meter::advance(const quant_plan& plan, const weight_lookup& weight_of) {
    snapshots_.assign(plan.sites.size(), torch::Tensor());
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < plan.sites.size(); ++k)
        if (plan.sites[k].role == ALTGRAD_TENSOR_WEIGHT && !plan.sites[k].second_use())
            snapshots_[k] = weight_of(plan.sites[k]).detach().clone();
}

torch::Tensor bit_stall_meter::previous(size_t k) const {
    return k < snapshots_.size() ? snapshots_[k] : torch::Tensor();
}

namespace {

// The views of one call, with the tensors (block scales included) and names
// they borrow kept alive.
struct view_set {
    std::vector<altgrad_tensor_view> views;
    std::vector<torch::Tensor> keep;
    std::vector<std::string> names;  // stable storage: reserved up front

    // `blocks`: the block-scaled site whose recipe scales t (its view gets the
    // block scales q(t) uses), or null: t is scaled per tensor by `scale`.
    void add(const std::string& name, altgrad_tensor_role role, const torch::Tensor& t,
             const torch::Tensor& previous, const format_handle& format, float scale,
             const quant_site* blocks = nullptr) {
        // Diagnostic plugins read host memory: a GPU run's tensors are copied here.
        const torch::Tensor data = t.detach().to(torch::kCPU).contiguous();
        keep.push_back(data);
        names.push_back(name);
        altgrad_tensor_view v{};
        v.struct_size = sizeof v;
        v.role = role;
        v.data = data.data_ptr<float>();
        if (previous.defined()) {
            keep.push_back(previous.to(torch::kCPU).contiguous());
            v.previous = keep.back().data_ptr<float>();
        }
        v.count = static_cast<size_t>(data.numel());
        v.ndim = static_cast<uint32_t>(std::min<int64_t>(data.dim(), ALTGRAD_TENSOR_MAX_DIMS));
        for (uint32_t d = 0; d < v.ndim; ++d) v.shape[d] = data.size(d);
        v.memory = ALTGRAD_MEMORY_HOST;
        v.format = format.ref();
        v.scale = scale;
        if (blocks != nullptr && v.count > 0) {
            site_block_scales b = block_scales_for(data, *blocks);
            keep.push_back(b.scales);
            v.scale = 1.0f;
            v.block_scales = b.scales.data_ptr<float>();
            v.block_size = b.block_size;
            v.block_count = static_cast<size_t>(b.scales.numel());
        }
        views.push_back(v);
    }
    void finish() {
        for (size_t i = 0; i < views.size(); ++i) views[i].name = names[i].c_str();
    }
};

}  // namespace

std::vector<diagnostic_record> run_diagnostics(stability::diagnostic_set& diagnostics, quant_plan& plan,
                                               const weight_lookup& weight_of, const bit_stall_meter& stall,
                                               const format_handle& fp32, uint64_t step) {
    torch::NoGradGuard no_grad;
    std::vector<diagnostic_record> out;
    for (const auto& d : diagnostics.handles()) {
        view_set vs;
        for (size_t k = 0; k < plan.sites.size(); ++k) {
            const quant_site& s = plan.sites[k];
            const format_handle& f = s.format ? *s.format : fp32;
            // A block-scaled tensor has no one scale (1 in the view): its view
            // carries the forward (rowwise) copy's block scales, derived from
            // the tensor shown by the site's recipe, when its format reads
            // block scales itself (ABI >= 1.2; an older one's view has none).
            // A weight's gradient, which is not quantized, gets the scales the
            // recipe would give it.
            const float scale = s.block_scaled() ? 1.0f : s.scale;
            const quant_site* blocks =
                s.format && s.block_scaled() && s.format->takes_block_scales() ? &s : nullptr;
            if (s.role == ALTGRAD_TENSOR_WEIGHT) {
                const torch::Tensor w = weight_of(s);
                if (d->interested_in(ALTGRAD_TENSOR_WEIGHT))
                    vs.add(s.name(), ALTGRAD_TENSOR_WEIGHT, w, stall.previous(k), f, scale, blocks);
                if (d->interested_in(ALTGRAD_TENSOR_GRADIENT) && w.grad().defined())
                    vs.add(s.name(), ALTGRAD_TENSOR_GRADIENT, w.grad(), torch::Tensor(), f, scale, blocks);
            } else if (s.captured.defined() && d->interested_in(s.role)) {
                vs.add(s.name(), s.role, s.captured, torch::Tensor(), f, scale, blocks);
            }
        }
        if (d->interested_in(ALTGRAD_TENSOR_ATTENTION_PROBS))
            for (const auto& [name, probs] : plan.attention_probs)
                vs.add(name, ALTGRAD_TENSOR_ATTENTION_PROBS, probs, torch::Tensor(), fp32, 1.0f);
        vs.finish();
        const std::vector<diagnostic_value> values = d->measure(step, vs.views);
        // One record per tensor, in the order the plugin answered.
        std::map<uint32_t, size_t> record_of;
        for (const diagnostic_value& v : values) {
            auto it = record_of.find(v.tensor_index);
            if (it == record_of.end()) {
                diagnostic_record r;
                r.diagnostic = d->name();
                const bool all = v.tensor_index == ALTGRAD_ALL_TENSORS;
                r.tensor = all ? "*" : vs.names[v.tensor_index];
                r.role = all ? "all" : role_name(vs.views[v.tensor_index].role);
                it = record_of.emplace(v.tensor_index, out.size()).first;
                out.push_back(std::move(r));
            }
            out[it->second].values.emplace_back(v.name, v.value);
        }
    }
    return out;
}

void release_captures(quant_plan& plan) {
    plan.capture = false;
    plan.attention_probs.clear();
    for (quant_site& s : plan.sites) s.captured = torch::Tensor();
}

}  // namespace altgrad::host::train
