// The GPT the trainer trains (nanoGPT's architecture in LibTorch C++). Its
// linear layers are the quantized ones of train/quant_plan.hpp: their forward
// quantizes the weight and the input activation and their backward the
// output gradient (straight-through estimator).
//
// Parameter names are stable and are what config rules and reports use:
// tok_emb.weight, pos_emb.weight, blocks.N.ln_1.{weight,bias},
// blocks.N.attn.qkv.{weight,bias}, blocks.N.attn.proj.*, blocks.N.ln_2.*,
// blocks.N.mlp.fc.*, blocks.N.mlp.gate.* (SwiGLU), blocks.N.mlp.proj.*,
// ln_f.*; the LM head is tied to tok_emb.weight and quantized as "lm_head".
// The quantized layers take their names from config/layer_names.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <altgrad/altgrad.h>

#include "train/quant_plan.hpp"

namespace altgrad::host::train {

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

// The config's [model] with `vocab_size` (the config's, else the data's).
gpt_config gpt_config_of(const config::model_config& m, int64_t vocab_size);

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
    CausalSelfAttentionImpl(const gpt_config& c, quant_plan& plan, const config::block_names& names);
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
    MLPImpl(const gpt_config& c, quant_plan& plan, const config::block_names& names);
    torch::Tensor forward(const torch::Tensor& x);

private:
    bool swiglu_;
    QuantizedLinear fc{nullptr}, gate{nullptr}, proj{nullptr};
    torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(MLP);

class BlockImpl : public torch::nn::Module {
public:
    BlockImpl(const gpt_config& c, quant_plan& plan, const config::block_names& names);
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
    std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& idx,
                                                    const torch::Tensor& targets = {});
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

// The CPU threads of the model's tensor operations: LibTorch's intra-op pool
// and the BLAS that LibTorch's matrix products call (OpenBLAS on Debian),
// whose own pool otherwise takes every core whatever LibTorch is told: a run
// of `threads = 1` then kept two cores busy (one spinning in sched_yield), and
// its results depended on the machine's core count (matrix products split
// across BLAS threads differ in their last bits). Returns the BLAS's thread
// count after the call, or -1 where LibTorch's BLAS is not OpenBLAS.
int set_cpu_threads(int threads);

// The CPU threads a run of `c` uses: training.threads, or every core when 0.
int cpu_threads_of(const config::training_config& c);

}  // namespace altgrad::host::train
