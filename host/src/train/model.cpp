#include "train/model.hpp"

#include <dlfcn.h>

#include "util/error.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

namespace altgrad::host::train {
// ---------------------------------------------------------------- modules

gpt_config gpt_config_of(const config::model_config& m, int64_t vocab_size) {
    gpt_config g;
    g.vocab_size = vocab_size;
    g.block_size = m.block_size;
    g.n_layer = m.n_layer;
    g.n_head = m.n_head;
    g.n_embd = m.n_embd;
    g.dropout = m.dropout;
    g.bias = m.bias;
    g.swiglu = m.activation == config::activation_function::swiglu;
    return g;
}

QuantizedLinearImpl::QuantizedLinearImpl(int64_t in, int64_t out, bool has_bias, quant_plan& plan,
                                         const std::string& layer)
    : plan_(&plan), first_site_(plan.add_linear(layer)) {
    weight = register_parameter("weight", torch::randn({out, in}) * 0.02);
    if (has_bias) bias = register_parameter("bias", torch::zeros({out}));
}

torch::Tensor QuantizedLinearImpl::forward(const torch::Tensor& x) {
    return quantized_linear(x, weight, bias, *plan_, first_site_);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const gpt_config& c, quant_plan& plan,
                                                 const config::block_names& names)
    : n_head_(c.n_head), n_embd_(c.n_embd), plan_(&plan), probs_name_(names.attn_probs) {
    qkv = register_module("qkv", QuantizedLinear(c.n_embd, 3 * c.n_embd, c.bias, plan, names.attn_qkv));
    proj = register_module("proj", QuantizedLinear(c.n_embd, c.n_embd, c.bias, plan, names.attn_proj));
    attn_drop = register_module("attn_drop", torch::nn::Dropout(c.dropout));
    resid_drop = register_module("resid_drop", torch::nn::Dropout(c.dropout));
    mask_ = register_buffer(
        "mask",
        torch::tril(torch::ones({c.block_size, c.block_size})).view({1, 1, c.block_size, c.block_size}));
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

MLPImpl::MLPImpl(const gpt_config& c, quant_plan& plan, const config::block_names& names)
    : swiglu_(c.swiglu) {
    // SwiGLU keeps the parameter count of the 4x GELU MLP: hidden = 8/3 C,
    // rounded up to a multiple of 8.
    const int64_t hidden = swiglu_ ? ((8 * c.n_embd / 3 + 7) / 8) * 8 : 4 * c.n_embd;
    fc = register_module("fc", QuantizedLinear(c.n_embd, hidden, c.bias, plan, names.mlp_fc));
    if (swiglu_)
        gate = register_module("gate", QuantizedLinear(c.n_embd, hidden, c.bias, plan, names.mlp_gate));
    proj = register_module("proj", QuantizedLinear(hidden, c.n_embd, c.bias, plan, names.mlp_proj));
    drop = register_module("drop", torch::nn::Dropout(c.dropout));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
    torch::Tensor h = swiglu_ ? torch::silu(gate->forward(x)) * fc->forward(x) : torch::gelu(fc->forward(x));
    return drop->forward(proj->forward(h));
}

BlockImpl::BlockImpl(const gpt_config& c, quant_plan& plan, const config::block_names& names) {
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
        blocks->push_back(Block(c, plan, config::names_of_block(std::to_string(i), c.swiglu)));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
    head_site_ = plan.add_linear(config::kHeadLayer);
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

std::pair<torch::Tensor, torch::Tensor> GPTImpl::forward(const torch::Tensor& idx,
                                                         const torch::Tensor& targets) {
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

int cpu_threads_of(const config::training_config& c) {
    return c.threads > 0 ? static_cast<int>(c.threads)
                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int set_cpu_threads(int threads) {
    at::set_num_threads(threads);
    // Looked up at run time: OpenBLAS is LibTorch's dependency, not ours.
    using set_fn = void (*)(int);
    using get_fn = int (*)();
    const auto set = reinterpret_cast<set_fn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    const auto get = reinterpret_cast<get_fn>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    if (set == nullptr || get == nullptr) return -1;
    set(threads);
    return get();
}

}  // namespace altgrad::host::train
