// The kit's own model of an accumulator instruction (abi/accumulator.h), what
// the accumulator.* checks hold a plugin to: the definition step by step, as
// MMA-Sim states it (the split by frexp, each term truncated in double, the
// terms added in int64, the sum normalized through long double), sharing no
// code with the SDK's integer implementation a plugin may use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

namespace altgrad::host::conformance {

// One output's operands: row a and row b of k values, their formats'
// smallest normal exponents, and their rows of block scales (empty: none).
struct acc_row_pair {
    const float* a = nullptr;
    const float* b = nullptr;
    size_t k = 0;
    int32_t a_min_exponent = -126, b_min_exponent = -126;
    altgrad_acc_scale_kind scale_kind = ALTGRAD_ACC_SCALE_NONE;
    const float* a_scales = nullptr;
    const float* b_scales = nullptr;
};

// D of one output by the definition, for the instruction `info` declares.
float model_output(const altgrad_accumulator_info& info, const acc_row_pair& x, float c);

// Elements per scale along k (32 for UE8M0, 16 for UE4M3, 0 for none).
size_t acc_scale_block(altgrad_acc_scale_kind kind);

// value rounded to the output as step 3 of the definition does it (float32 or
// E8M13 toward zero, FP16 to nearest even; Inf beyond the range; +0 for 0),
// for a value long double holds exactly.
float model_round(long double value, altgrad_acc_output out);

// The bits a NaN result has (float32 0x7FFFFFFF; FP16's 0x7FFF as float32).
uint32_t model_nan_bits(altgrad_acc_output out);

// Every output of a call's tile: d[i * n + j] for rows i of a, j of b.
std::vector<float> model_tile(const altgrad_accumulator_info& info, const altgrad_accumulator_args& args);

}  // namespace altgrad::host::conformance
