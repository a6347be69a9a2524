// `altgrad-host parity`: whether a config's recipe quantizes on a GPU what it
// quantizes on the CPU, bit for bit. Every linear layer of the config's
// model runs through the trainer's own quantized_linear on both devices, on
// the same tensors (the model's initial weights, drawn inputs and output
// gradients), for a few steps; every operand copy its three products consume
// (x, w, dy and their second copies, transformed where the recipe says) is
// compared bit for bit, and so is each site's state after it (amax, scale,
// the overflow, underflow and element counts). The gradients the ranks send
// ([quantization.communication]) are compared the same way. The products
// themselves are float32 matrix products by different libraries (cuBLAS,
// the CPU's BLAS): their difference is reported, not judged.
// No LibTorch types here, so the CLI does not pull LibTorch's headers in.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace altgrad::host::train {

struct parity_request {
    std::filesystem::path config;        // CONFIG.toml
    std::vector<std::string> overrides;  // --set KEY=VALUE
    // --against-set KEY=VALUE: the other side's config has these too (the
    // model and which tensors are quantized must stay): what a change moves.
    std::vector<std::string> against_overrides;
    std::filesystem::path plugins;  // --plugins DIR
    // "cuda" (GPU 0, against the CPU), or "cpu": the CPU with one thread
    // against the CPU with training.threads (the split must change no bit).
    std::string device = "cuda";
    int64_t steps = 2;     // per layer: the second step scales from the first's amax history
    int64_t tokens = 256;  // rows of x and dy
    int64_t vocab = 97;    // the LM head's rows (not a multiple of a block: a short last block)
};

// One tensor (or one site's state) that differs: what, and where first.
struct parity_mismatch {
    std::string what;  // "blocks.0.mlp.fc x@weight_gradient, step 1"
    int64_t elements = 0, differing = 0;
    std::string first;  // "element 17: 0x1.8p-3 on the CPU, 0x1.cp-3 on cuda:0"
};

// Per operand kind ("x", "w@input_gradient", "communication", "site state").
struct parity_tally {
    int64_t tensors = 0, elements = 0, differing = 0;
};

struct parity_report {
    std::string against;  // "cuda:0", or "cpu, 1 thread"
    int64_t layers = 0, steps = 0;
    std::map<std::string, parity_tally> by_operand;
    std::vector<parity_mismatch> mismatches;  // in the order met
    // The largest |a - b| / max |a| of each product over every layer and step
    // ("y", "dx", "dW"): float32 products by two libraries, not judged.
    std::map<std::string, double> product_difference;
    std::vector<std::string> not_compared;  // what runs on the CPU only (accumulators), and why
    int64_t differing() const;              // elements (and site fields) that differ, over all
};

// Runs the comparison; throws altgrad::host::error on a bad config, a plugin
// or accumulator without a CUDA path, or no usable GPU.
parity_report check_device_parity(const parity_request& request);

}  // namespace altgrad::host::train
