// The names the model gives its quantized layers, defined once: the model
// (train/model.cpp) registers its linear layers under these names, and config
// validation (config/run_config.cpp) matches quantization rules against them.
// LibTorch-free, so the config code (altgrad_host_core) can use it.
//
// A layer's name is also its LibTorch module path, so its weight is the
// parameter "<layer>.weight"; the LM head is tied to the token embedding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace altgrad::host::config {

// One transformer block's names.
struct block_names {
    // Quantized layers: blocks.N.attn.qkv, blocks.N.attn.proj, blocks.N.mlp.fc,
    // blocks.N.mlp.gate (SwiGLU only, else empty), blocks.N.mlp.proj.
    std::string attn_qkv, attn_proj, mlp_fc, mlp_gate, mlp_proj;
    std::string attn_probs;  // the attention's softmax output (for diagnostics)

    // The quantized layers, in the order the model registers them.
    std::vector<std::string> layers() const;
};

// Block `block`'s names: `block` is its index, or "N" for a description.
block_names names_of_block(const std::string& block, bool swiglu);

// The LM head's layer, and the parameter it shares (tied weights).
inline constexpr const char* kHeadLayer = "lm_head";
inline constexpr const char* kHeadWeight = "tok_emb.weight";

// The parameter holding a quantized layer's weight.
std::string weight_of_layer(const std::string& layer);

// Every quantized layer of a model, in registration order: each block's
// layers, then the head. Embeddings and LayerNorms stay float32.
std::vector<std::string> layer_names(int64_t n_layer, bool swiglu);

}  // namespace altgrad::host::config
