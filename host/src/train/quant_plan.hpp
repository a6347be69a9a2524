// The quantization plan: every tensor the model quantizes (a site: a linear
// layer's weight, input activation or output gradient), the format plugin,
// rounding and scaling each one has, and the calls that quantize through
// them. The trainer assigns formats from the config once and switches them
// when an intervention asks; the model's layers call fake_quantize.
// Building (sites, assign_formats, switch_formats, records): quant_plan_build.cpp;
// running (fake_quantize, quantized_linear and the rest): quant_plan.cpp.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <altgrad/altgrad.h>

#include "config/layer_names.hpp"
#include "config/run_config.hpp"
#include "plugins/accumulator_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "plugins/transform_handle.hpp"
#include "quant/accumulate.hpp"
#include "quant/block_scales.hpp"
#include "quant/scaling.hpp"
#include "run/records.hpp"
#include "train/format_library.hpp"

namespace altgrad::host::train {

// One tensor the model quantizes: a layer's weight, its input activation or
// its output gradient.
struct quant_site {
    // "blocks.0.attn.qkv"; a communication site's (role GRADIENT): its
    // parameter, "blocks.0.attn.qkv.weight"
    std::string layer;
    altgrad_tensor_role role = ALTGRAD_TENSOR_WEIGHT;
    // A second use with settings of its own (config::operand_for): the
    // product it is quantized for ("input_gradient" for W, "weight_gradient"
    // for x and dy); empty for a tensor's first use, the site every config has.
    std::string use;
    bool second_use() const { return !use.empty(); }
    // layer + ".weight" | ".input" | ".output_grad", then "@" + use if any;
    // a communication site's: its parameter + ".communication"
    std::string name() const;
    // "weight" | "activation" | "output_gradient" | "weight_gradient" (metrics and reports)
    const char* role_name() const;
    std::shared_ptr<const format_handle> format;  // null: stays float32
    // How it is quantized, every key as the recipe resolved it
    // (config::operand_spec: the format's name, rounding, granularity, block
    // shape, scale format and rule, pre-scale, the keys that decided them).
    config::operand_spec spec;
    std::string where;                                      // the config file, for errors
    altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE;  // quantization.overflow
    uint32_t random_bits = 32;     // stochastic rounding's random bits (quantization.sr_bits)
    quant::scaling_state scaling;  // granularity tensor: the scale and its amax history
    quant::block_recipe blocks;    // granularity row or block: spec's scale rule, its scale format's grid
    bool block_scaled() const { return spec.granularity != config::granularity_kind::tensor; }
    // Row or block: one scale per block of block_length() elements along
    // the last dimension of the tensor quantized (the reduction dimension of
    // the product that consumes it; a row's last block may be short):
    // spec.block_size, or SIZE_MAX (one block per row) for granularity row.
    size_t block_length() const;
    // Rows per block: 1 for blocks along a row; R > 1 for tiles of R rows by
    // block_length() columns, which must divide the tensor as [rows, K].
    size_t tile_rows() const;
    // spec.pre_scale as the kernels take it: q(x*s*c)/(s*c). `scale` records s.
    float pre_scale() const { return static_cast<float>(spec.pre_scale); }
    // "WHERE: key 'K'", K the key that gave block_rows (a tile's errors).
    std::string tile_key() const { return where + ": key '" + spec.tile_key + "'"; }
    // The last use, for metrics (a tensor quantized twice, along two
    // dimensions, sums both copies' counts and block statistics).
    double amax = 0;
    float scale = 1;  // granularity tensor
    uint64_t overflow_count = 0, underflow_count = 0, count = 0;
    quant::block_scale_stats block_stats;
    double overflow_rate() const { return count ? static_cast<double>(overflow_count) / count : NAN; }
    double underflow_rate() const { return count ? static_cast<double>(underflow_count) / count : NAN; }
    // Weights: the last bit-stall measurement (NaN before the second).
    double bit_stall_rate = NAN;
    // Activations and output gradients: the last input, unquantized, kept
    // only while quant_plan::capture is on (for diagnostics).
    torch::Tensor captured;
    // Granularity row or block, while quant_plan::keep_copy_scales: the last
    // copy's encode scales s, [rows, blocks per row] (a tile's for each of its
    // rows): what a product through an instruction needs to take the copy
    // back to its format's values.
    torch::Tensor copy_scales;
};

// The accumulator a product is summed through (docs/accumulation.md): the
// chunked model over a format plugin, or a GPU instruction's (an accumulator
// plugin, chained along K by quant::instruction_product, promoted every
// promote_every elements); neither: the plain float32 product (LibTorch's
// matmul).
struct product_accumulator {
    std::shared_ptr<const quant::accumulator> model;
    std::shared_ptr<const accumulator_handle> instruction;
    size_t promote_every = 0;  // the instruction's (the model holds its own)
    bool modelled() const { return model || instruction; }
};
// A linear layer's three products' accumulators (config::product_kind order).
using product_accumulators = std::array<product_accumulator, config::kProducts>;

// A product's transform (docs/transforms.md): applied along the reduction
// dimension to both operands before they are quantized, keyed by the same
// seed, so the exact product is unchanged. `key` names its config key in errors.
struct product_transform {
    std::shared_ptr<const transform_handle> handle;  // null: none
    std::string key;
};
using product_transforms = std::array<product_transform, config::kProducts>;

// How a linear layer's tensor is quantized for its second use (W for the
// input gradient, x and dy for the weight gradient; config::operand_kind):
// as its first use (`own` unset: the first use's site, settings and
// statistics; one copy serves both products when it has one scale per
// tensor or tiles, else it is quantized again along the new reduction
// dimension), or by a site of its own (`own`: its index in sites).
struct second_use {
    std::optional<size_t> own;
    config::copy_source source = config::copy_source::unquantized;  // what the second copy is quantized from
};

// Every site of a model, and what keys stochastic rounding: (seed, step, site).
struct quant_plan {
    // The first uses' sites, three per linear layer (layer k's start at 3k),
    // then the second uses that have settings of their own, then the
    // communication sites (add_communication_sites).
    std::vector<quant_site> sites;
    // Per linear layer, in its sites' order (W, x, dy).
    std::vector<std::array<second_use, 3>> second_uses;
    size_t first_use_sites() const { return 3 * second_uses.size(); }
    // Per linear layer, in add_linear order (layer k's sites start at 3k).
    std::vector<product_accumulators> accumulators;
    std::vector<product_transforms> transforms;
    unsigned gemm_threads = 1;      // threads of an accumulator's product (the result is the same for any)
    bool keep_copy_scales = false;  // some product runs through an instruction (quant_site::copy_scales)
    uint64_t seed = 0;
    // Set by the trainer before each step's forward (Python's QuantLinear:
    // before each call, its own count); a layer's call keeps it for its backward.
    uint64_t step = 0;
    // The micro-batch of the step being run (train/step_totals.hpp): with the
    // step, it keys the rounding of activations and gradients (quant/seeds.hpp).
    uint64_t micro_batch = 0;
    // On a diagnostic step: keep each site's input (quant_site::captured) and
    // every attention layer's softmax output, for the diagnostic plugins.
    bool capture = false;
    std::vector<std::pair<std::string, torch::Tensor>>
        attention_probs;  // "blocks.N.attn.probs", [B, H, T, T]
    // Set by a tool that compares devices (train/device_parity.hpp), unset in
    // training: called with each copy a layer's products consume, as quantized
    // (and transformed), in a fixed order: "x", "w" in the forward, "dy",
    // "w@input_gradient", "dy@weight_gradient", "x@weight_gradient" in the
    // backward; `first_site` names the layer.
    std::function<void(size_t first_site, const char* operand, const torch::Tensor& values)> operand_tap;

    // Register a linear layer's three sites; returns the index of the first.
    size_t add_linear(const std::string& layer);
};

// q(t*s)/s through the site's format plugin (identity when it has none),
// updating the site's scaling state and statistics. Block scales run along
// t's last dimension. `again`: a second copy of the same tensor along another
// dimension (adds to the statistics; the amax history is not touched; one
// scale per tensor: the first copy's).
// Float32 tensors on the CPU, or on a GPU when the site's format plugin has a
// CUDA implementation. `seed`: stochastic rounding's (quant/seeds.hpp).
torch::Tensor fake_quantize(const torch::Tensor& t, quant_site& site, const quant_plan& plan, uint64_t seed,
                            bool again = false);

// w = q(w*s)/s in place, with the site's format, rounding and last scale
// (block scales: derived from w, along its rows),
// touching neither its scaling state nor its statistics: how weights live
// when there are no FP32 master weights.
void store_in_format(torch::Tensor& w, const quant_site& site, const quant_plan& plan, uint64_t stream);

// The parameter that holds a weight site's tensor (the LM head is tied to tok_emb).
inline std::string parameter_of(const quant_site& s) { return config::weight_of_layer(s.layer); }

// q(t*s)/s with the site's format at its last scale (block scales: derived
// from t, along its last dimension), round-to-nearest-even
// and saturating, into a new tensor; touches no state. What a measurement
// compares (stochastic rounding would make equal inputs differ).
torch::Tensor quantize_nearest(const torch::Tensor& t, const quant_site& site);

// The block scales a block-scaled site's recipe gives t along its last
// dimension (K), as q(t) would use them: float32 on the CPU, ceil(K /
// block_size) per row, in row order (the layout of altgrad_tensor_view's
// block_scales), with the block size that applies (the site's, at most K).
// Touches no state. What diagnostics are shown.
struct site_block_scales {
    torch::Tensor scales;
    size_t block_size = 0;
};
site_block_scales block_scales_for(const torch::Tensor& t, const quant_site& site);

// y = q(x) q(w)^T + b, with q(dy) in the backward pass. With block scaling
// every operand is quantized along the reduction dimension of the product
// that consumes it, so x, w and dy are each quantized twice (docs/training.md).
// Each product runs through its accumulator where the plan gives one (CPU only).
torch::Tensor quantized_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                               quant_plan& plan, size_t first_site);

// "fp32" for a site that stays float32, else its format plugin's name.
std::string format_name_of(const quant_site& s);

// The site at its last use as the run's record of it (run/records.hpp): what
// its metrics line writes, the interventions observe and the failure report
// lists; a weight's bit-stall rate only `with_bit_stall` (at a measurement;
// NaN before the second).
run::tensor_line record_of(const quant_site& s, int64_t step, bool with_bit_stall);

// Give every site its format plugin, rounding, overflow and scaling, and
// every linear layer's products their accumulators, from the config's global
// formats, product tables and per-layer rules.
void assign_formats(quant_plan& plan, const config::run_config& c, format_library& formats);

// [quantization.communication]: one site per parameter for its gradient as
// the ranks send it (role GRADIENT, named "<parameter>.communication"),
// appended to the plan's sites; returns their indices, one per name of
// `parameters` in that order, or none when the config quantizes no
// communication. After assign_formats, which drops them.
std::vector<size_t> add_communication_sites(quant_plan& plan, const config::run_config& c,
                                            format_library& formats,
                                            const std::vector<std::string>& parameters);

// A format switch asked for by an intervention: every site whose name matches
// `pattern` and is in another format moves to `to`, with fresh scaling (the
// old amax history says nothing about the new range). Returns what moved
// (step and plugin left for the caller).
std::vector<run::format_switch> switch_formats(quant_plan& plan, const std::string& pattern,
                                               const std::string& to, format_library& formats);

// A site's format, and what depends on it: fresh per-tensor scaling (an old
// amax history says nothing about a new range) and the block recipe's M.
void set_format(quant_site& s, std::shared_ptr<const format_handle> format);

}  // namespace altgrad::host::train
