// The quantization kernels' vocabulary: how a tensor is scaled (per tensor,
// per row, in blocks), the rules that give a block its scale, and how a
// per-tensor scale follows from an amax history. The kernels (block_scales,
// scaling) own these terms; the config reads and writes them by these names,
// and the CLI's help and Python's docstrings are made from or checked against
// the scale-rule table (docs/config.md, "Block scaling").
#pragma once

#include <vector>

#include "util/name_table.hpp"

namespace altgrad::host::quant {

// How many scales a quantized tensor has: one (tensor), one per row of the
// consuming product's reduction dimension (row), or one per block along it
// (block; tiles of block_rows x block_size when block_rows > 1).
enum class granularity_kind { tensor, row, block };

// How a block's decode scale X follows from the block's amax a (M: the
// element format's largest finite value). Each rule is one entry of
// scale_rules() below and one specialization of its code (block_scales.cpp).
enum class scale_rule { mx_floor, round_up, two_level, nearest };

// Per-tensor scaling (quantization.scaling): none, delayed (TransformerEngine's
// amax history), current (this use's own amax).
enum class scaling_mode { none, delayed, current };
// The amax a delayed scale is computed from: the history's max or its most recent.
enum class amax_compute_kind { max, most_recent };
// The values a per-tensor scale may take: powers of two (exact scaling) or
// any float32 (TransformerEngine's default fp8_max / amax).
enum class tensor_scale_kind { pow2, fp32 };
// A delayed-scaling tensor's scale before its amax history has a value: from
// its own amax (as current scaling), or 1 (TransformerEngine's initial scale).
enum class first_scale_kind { amax, one };

// One scale rule, as data: its name (the config's scale_rule, the CLI's
// --scale-rule, Python's scale_rule=), what it does in a line, where it is
// defined, and whether it needs the whole tensor's amax (a second pass).
struct scale_rule_info {
    scale_rule rule;
    const char* name;
    const char* description;
    const char* source;
    bool needs_tensor_amax;
    bool may_clip;  // whether a block's largest element may exceed M after scaling, by design
};

// Every rule, in the order help texts list them.
const std::vector<scale_rule_info>& scale_rules();
const scale_rule_info& info_of(scale_rule r);

// "mx_floor | round_up | two_level | nearest": the rules' names for help texts.
std::string scale_rule_choices(const char* separator = " | ");

const name_table<granularity_kind>& granularity_names();    // tensor, row, block
const name_table<scale_rule>& scale_rule_names();           // scale_rules()' names
const name_table<scaling_mode>& scaling_names();            // delayed, current, none
const name_table<amax_compute_kind>& amax_compute_names();  // max, most_recent
const name_table<tensor_scale_kind>& tensor_scale_names();  // pow2, fp32
const name_table<first_scale_kind>& first_scale_names();    // amax, one

}  // namespace altgrad::host::quant
