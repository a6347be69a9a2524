#include "train/model.hpp"

#include <ATen/Parallel.h>

#include <atomic>
#include <cmath>

#include "util/error.hpp"

namespace altgrad::host::train {

std::string quant_site::name() const {
    switch (role) {
        case ALTGRAD_TENSOR_WEIGHT: return layer + ".weight";
        case ALTGRAD_TENSOR_ACTIVATION: return layer + ".input";
        default: return layer + ".output_grad";
    }
}

const char* quant_site::role_name() const {
    return role == ALTGRAD_TENSOR_WEIGHT ? "weight" : role == ALTGRAD_TENSOR_ACTIVATION ? "activation" : "gradient";
}

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

// ---------------------------------------------------------------- modules

QuantizedLinearImpl::QuantizedLinearImpl(int64_t in, int64_t out, bool has_bias, quant_plan& plan,
                                         const std::string& layer)
    : plan_(&plan), first_site_(plan.add_linear(layer)) {
    weight = register_parameter("weight", torch::randn({out, in}) * 0.02);
    if (has_bias) bias = register_parameter("bias", torch::zeros({out}));
}

torch::Tensor QuantizedLinearImpl::forward(const torch::Tensor& x) {
    return quantized_linear(x, weight, bias, *plan_, first_site_);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const gpt_config& c, quant_plan& plan, const block_names& names)
    : n_head_(c.n_head), n_embd_(c.n_embd), plan_(&plan), probs_name_(names.attn_probs) {
    qkv = register_module("qkv", QuantizedLinear(c.n_embd, 3 * c.n_embd, c.bias, plan, names.attn_qkv));
    proj = register_module("proj", QuantizedLinear(c.n_embd, c.n_embd, c.bias, plan, names.attn_proj));
    attn_drop = register_module("attn_drop", torch::nn::Dropout(c.dropout));
    resid_drop = register_module("resid_drop", torch::nn::Dropout(c.dropout));
    mask_ = register_buffer("mask", torch::tril(torch::ones({c.block_size, c.block_size})).view(
                                        {1, 1, c.block_size, c.block_size}));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hd = C / n_head_;
    const auto parts = qkv->forward(x).split(n_embd_, 2);
    const torch::Tensor q = parts[0].view({B, T, n_head_, hd}).transpose(1, 2);
    const torch::Tensor k = parts[1].view({B, T, n_head_, hd}).transpose(1, 2);
    const torch::Tensor v = parts[2].view({B, T, n_head_, hd}).transpose(1, 2);
    torch::Tensor att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));
    att = att.masked_fill(mask_.index({torch::indexing::Slice(), torch::indexing::Slice(),
                                       torch::indexing::Slice(0, T), torch::indexing::Slice(0, T)}) == 0,
                          -std::numeric_limits<float>::infinity());
    att = torch::softmax(att, -1);
    if (plan_->capture) plan_->attention_probs.emplace_back(probs_name_, att.detach());
    att = attn_drop->forward(att);
    const torch::Tensor y = torch::matmul(att, v).transpose(1, 2).contiguous().view({B, T, C});
    return resid_drop->forward(proj->forward(y));
}

MLPImpl::MLPImpl(const gpt_config& c, quant_plan& plan, const block_names& names) : swiglu_(c.swiglu) {
    // SwiGLU keeps the parameter count of the 4x GELU MLP: hidden = 8/3 C,
    // rounded up to a multiple of 8.
    const int64_t hidden = swiglu_ ? ((8 * c.n_embd / 3 + 7) / 8) * 8 : 4 * c.n_embd;
    fc = register_module("fc", QuantizedLinear(c.n_embd, hidden, c.bias, plan, names.mlp_fc));
    if (swiglu_) gate = register_module("gate", QuantizedLinear(c.n_embd, hidden, c.bias, plan, names.mlp_gate));
    proj = register_module("proj", QuantizedLinear(hidden, c.n_embd, c.bias, plan, names.mlp_proj));
    drop = register_module("drop", torch::nn::Dropout(c.dropout));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
    torch::Tensor h = swiglu_ ? torch::silu(gate->forward(x)) * fc->forward(x) : torch::gelu(fc->forward(x));
    return drop->forward(proj->forward(h));
}

BlockImpl::BlockImpl(const gpt_config& c, quant_plan& plan, const block_names& names) {
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
    attn = register_module("attn", CausalSelfAttention(c, plan, names));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
    mlp = register_module("mlp", MLP(c, plan, names));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
    const torch::Tensor h = x + attn->forward(ln_1->forward(x));
    return h + mlp->forward(ln_2->forward(h));
}

GPTImpl::GPTImpl(const gpt_config& c, quant_plan& plan) : config_(c), plan_(&plan) {
    tok_emb = register_module("tok_emb", torch::nn::Embedding(c.vocab_size, c.n_embd));
    pos_emb = register_module("pos_emb", torch::nn::Embedding(c.block_size, c.n_embd));
    drop = register_module("drop", torch::nn::Dropout(c.dropout));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.n_layer; ++i)
        blocks->push_back(Block(c, plan, names_of_block(std::to_string(i), c.swiglu)));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
    head_site_ = plan.add_linear(kHeadLayer);
    // The module names above must spell the paths layer_names.hpp defines.
    const auto parameters = named_parameters();
    for (const quant_site& s : plan.sites)
        if (s.role == ALTGRAD_TENSOR_WEIGHT && !parameters.contains(parameter_of(s)))
            throw error("GPT: layer '" + s.layer + "' has no parameter '" + parameter_of(s) + "'");

    // nanoGPT's initialisation: N(0, 0.02), residual projections scaled by
    // 1/sqrt(2 n_layer), zero biases, unit LayerNorm gains.
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
        const std::string& name = p.key();
        torch::Tensor& t = p.value();
        if (name.find("ln_") != std::string::npos) {
            t.fill_(name.size() > 6 && name.compare(name.size() - 6, 6, "weight") == 0 ? 1.0 : 0.0);
        } else if (name.size() > 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
            t.zero_();
        } else {
            const bool residual = name.find(".proj.weight") != std::string::npos;
            t.normal_(0.0, residual ? 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer)) : 0.02);
        }
    }
}

std::pair<torch::Tensor, torch::Tensor> GPTImpl::forward(const torch::Tensor& idx, const torch::Tensor& targets) {
    const int64_t T = idx.size(1);
    if (T > config_.block_size)
        throw error("GPT: sequence of " + std::to_string(T) + " tokens exceeds block_size " +
                    std::to_string(config_.block_size));
    const torch::Tensor pos = torch::arange(T, idx.options().dtype(torch::kLong));
    torch::Tensor x = drop->forward(tok_emb->forward(idx) + pos_emb->forward(pos));
    for (const auto& block : *blocks) x = block->as<Block>()->forward(x);
    x = ln_f->forward(x);
    // The LM head shares the token embedding's weight (tied), quantized as "lm_head".
    const torch::Tensor logits = quantized_linear(x, tok_emb->weight, torch::Tensor(), *plan_, head_site_);
    torch::Tensor loss;
    if (targets.defined())
        loss = torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view({-1}));
    return {logits, loss};
}

}  // namespace altgrad::host::train
