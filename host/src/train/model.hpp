// The GPT the trainer trains (nanoGPT's architecture in LibTorch C++), and
// the one place where its tensors meet the format plugins: quantized linear
// layers whose forward quantizes the weight and the input activation and
// whose backward quantizes the output gradient (straight-through estimator).
//
// Parameter names are stable and are what config rules and reports use:
// tok_emb.weight, pos_emb.weight, blocks.N.ln_1.{weight,bias},
// blocks.N.attn.qkv.{weight,bias}, blocks.N.attn.proj.*, blocks.N.ln_2.*,
// blocks.N.mlp.fc.*, blocks.N.mlp.gate.* (SwiGLU), blocks.N.mlp.proj.*,
// ln_f.*; the LM head is tied to tok_emb.weight and quantized as "lm_head".
// The quantized layers take their names from train/layer_names.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <altgrad/altgrad.h>

#include "plugins/format_handle.hpp"
#include "train/layer_names.hpp"
#include "train/scaling.hpp"

namespace altgrad::host::train {

// One tensor the model quantizes: a layer's weight, its input activation or
// its output gradient.
struct quant_site {
    std::string layer;                // "blocks.0.attn.qkv"
    altgrad_tensor_role role = ALTGRAD_TENSOR_WEIGHT;
    std::string name() const;         // layer + ".weight" | ".input" | ".output_grad"
    const char* role_name() const;    // "weight" | "activation" | "gradient" (metrics and reports)
    std::shared_ptr<const format_handle> format;  // null: stays float32
    altgrad_rounding rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE;
    scaling_state scaling;
    // The last use, for metrics.
    double amax = 0;
    float scale = 1;
    uint64_t overflow_count = 0, underflow_count = 0, count = 0;
    double overflow_rate() const { return count ? static_cast<double>(overflow_count) / count : NAN; }
    double underflow_rate() const { return count ? static_cast<double>(underflow_count) / count : NAN; }
    // Weights: the last bit-stall measurement (NaN before the second).
    double bit_stall_rate = NAN;
    // Activations and output gradients: the last input, unquantized, kept
    // only while quant_plan::capture is on (for diagnostics).
    torch::Tensor captured;
};

// Every site of a model, and what keys stochastic rounding: (seed, step, site).
struct quant_plan {
    std::vector<quant_site> sites;
    uint64_t seed = 0;
    uint64_t step = 0;  // set by the trainer before each step's forward
    // On a diagnostic step: keep each site's input (quant_site::captured) and
    // every attention layer's softmax output, for the diagnostic plugins.
    bool capture = false;
    std::vector<std::pair<std::string, torch::Tensor>> attention_probs;  // "blocks.N.attn.probs", [B, H, T, T]

    // Register a linear layer's three sites; returns the index of the first.
    size_t add_linear(const std::string& layer);
};

// q(t*s)/s through the site's format plugin (identity when it has none),
// updating the site's scaling state and statistics. Float32 tensors on the
// CPU, or on a GPU when the site's format plugin has a CUDA implementation.
torch::Tensor fake_quantize(const torch::Tensor& t, quant_site& site, const quant_plan& plan, uint64_t stream);

// w = q(w*s)/s in place, with the site's format, rounding and last scale,
// touching neither its scaling state nor its statistics: how weights live
// when there are no FP32 master weights.
void store_in_format(torch::Tensor& w, const quant_site& site, const quant_plan& plan, uint64_t stream);

// The parameter that holds a weight site's tensor (the LM head is tied to tok_emb).
inline std::string parameter_of(const quant_site& s) { return weight_of_layer(s.layer); }

// q(t*s)/s with the site's format at its last scale, round-to-nearest-even
// and saturating, into a new tensor; touches no state. What a measurement
// compares (stochastic rounding would make equal inputs differ).
torch::Tensor quantize_nearest(const torch::Tensor& t, const quant_site& site);

// y = q(x) q(w)^T + b, with q(dy) in the backward pass.
torch::Tensor quantized_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                               quant_plan& plan, size_t first_site);

struct gpt_config {
    int64_t vocab_size = 0;
    int64_t block_size = 64;
    int64_t n_layer = 4;
    int64_t n_head = 4;
    int64_t n_embd = 128;
    double dropout = 0.0;
    bool bias = true;
    bool swiglu = false;
};

class QuantizedLinearImpl : public torch::nn::Module {
public:
    QuantizedLinearImpl(int64_t in, int64_t out, bool bias, quant_plan& plan, const std::string& layer);
    torch::Tensor forward(const torch::Tensor& x);
    torch::Tensor weight, bias;

private:
    quant_plan* plan_;
    size_t first_site_;
};
TORCH_MODULE(QuantizedLinear);

class CausalSelfAttentionImpl : public torch::nn::Module {
public:
    CausalSelfAttentionImpl(const gpt_config& c, quant_plan& plan, const block_names& names);
    torch::Tensor forward(const torch::Tensor& x);

private:
    int64_t n_head_, n_embd_;
    quant_plan* plan_;
    std::string probs_name_;  // "blocks.N.attn.probs"
    QuantizedLinear qkv{nullptr}, proj{nullptr};
    torch::nn::Dropout attn_drop{nullptr}, resid_drop{nullptr};
    torch::Tensor mask_;
};
TORCH_MODULE(CausalSelfAttention);

class MLPImpl : public torch::nn::Module {
public:
    MLPImpl(const gpt_config& c, quant_plan& plan, const block_names& names);
    torch::Tensor forward(const torch::Tensor& x);

private:
    bool swiglu_;
    QuantizedLinear fc{nullptr}, gate{nullptr}, proj{nullptr};
    torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(MLP);

class BlockImpl : public torch::nn::Module {
public:
    BlockImpl(const gpt_config& c, quant_plan& plan, const block_names& names);
    torch::Tensor forward(const torch::Tensor& x);

private:
    torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
    CausalSelfAttention attn{nullptr};
    MLP mlp{nullptr};
};
TORCH_MODULE(Block);

class GPTImpl : public torch::nn::Module {
public:
    GPTImpl(const gpt_config& c, quant_plan& plan);
    // Logits [B, T, V]; and the mean cross-entropy when targets are given.
    std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& idx, const torch::Tensor& targets = {});
    const gpt_config& config() const { return config_; }

private:
    gpt_config config_;
    quant_plan* plan_;
    size_t head_site_;
    torch::nn::Embedding tok_emb{nullptr}, pos_emb{nullptr};
    torch::nn::Dropout drop{nullptr};
    torch::nn::ModuleList blocks{nullptr};
    torch::nn::LayerNorm ln_f{nullptr};
};
TORCH_MODULE(GPT);

}  // namespace altgrad::host::train
