// A matrix product as a GPU kernel runs it through an accumulator plugin
// (ABI 1.5, abi/accumulator.h; docs/accumulation.md, "Instruction models"):
// for each output tile, instructions of the plugin's depth in sequence along
// K, C = the previous D from +0. With promote_every = N > 0 (a multiple of
// the depth: DeepSeek-V3's and CUTLASS's promotion on the CUDA cores), the
// chain's D is added into a float32 total, nearest even, after every N
// elements and at the end, and the chain restarts from +0; the product is
// that total. With N = 0 it is the chain's last D. The one definition of a
// product through instructions: the CLI's gemm, Python's matmul and the
// hardware-capture tests all run this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <altgrad/abi/accumulator.h>

#include "plugins/accumulator_handle.hpp"
#include "plugins/format_handle.hpp"

namespace altgrad::host::quant {

// C = A·Bᵀ's operands as the instruction takes them, borrowed for the call:
// a [m, k] and b [n, k] row-major (K contiguous), float32 values of formats
// whose smallest normal exponents are a_min_exponent and b_min_exponent;
// with a scale kind, one block scale per block along K, a_scales
// [m, ceil(k / block)] and b_scales [n, ceil(k / block)].
struct instruction_operands {
    const float* a = nullptr;
    const float* b = nullptr;
    size_t m = 0, n = 0, k = 0;
    int32_t a_min_exponent = -126, b_min_exponent = -126;
    altgrad_acc_scale_kind scale_kind = ALTGRAD_ACC_SCALE_NONE;
    const float* a_scales = nullptr;
    const float* b_scales = nullptr;
    // With promotion (promote_every = N > 0), optionally: one decode scale
    // per row and promotion interval of each operand, a_promotion_scales
    // [m, ceil(k / N)] and b_promotion_scales [n, ceil(k / N)], and each
    // promoted D goes into the total as total += D * (a_scale * b_scale),
    // in float32: DeepSeek-V3's block scales applied on the CUDA cores (the
    // instructions then take the blocks' unscaled format values). Both or
    // neither.
    const float* a_promotion_scales = nullptr;
    const float* b_promotion_scales = nullptr;
};

// Elements per block scale of a scale kind: 32 (UE8M0), 16 (UE4M3), 0 (none).
size_t scale_block(altgrad_acc_scale_kind kind);

// Why promote_every cannot be used with `acc` ("" when it can): it must be 0
// or a multiple of the instruction's depth, as a kernel promotes between
// instructions.
std::string promote_every_problem(const accumulator_handle& acc, size_t promote_every);

// The smallest normal exponent of `format` (floor(log2(min_normal))): what
// the instruction's split of an operand needs (abi/accumulator.h, step 1).
int32_t min_exponent(const format_handle& format);

// Throws host::error "WHAT[i, j] = V is not a value of FORMAT" for the first
// of x's rows x cols elements (row-major) that `format` does not represent
// (its nearest-even quantization changes it).
void check_values(const format_handle& format, const float* x, size_t rows, size_t cols,
                  const std::string& what);

// Throws host::error "WHAT[i, j] = V is not a KIND scale" for the first of the rows x blocks
// scales (row-major) that is not of the kind: UE8M0 a power of two in 2^-127 .. 2^127 or NaN,
// UE4M3 an E4M3 value by magnitude. instruction_product checks its scales so.
void check_scales(altgrad_acc_scale_kind kind, const float* scales, size_t rows, size_t blocks,
                  const std::string& what);

// c[i * n + j] = (A·Bᵀ)[i][j] through `acc`'s instructions, promoted every
// promote_every elements (0: never). threads: how many share the output rows,
// 0 for every core; each output is the same for any number. Throws
// host::error for a promote_every of promote_every_problem, scales that do
// not fit the scale kind (check_scales), or a plugin that fails.
void instruction_product(const accumulator_handle& acc, const instruction_operands& p, size_t promote_every,
                         float* c, unsigned threads = 1);

}  // namespace altgrad::host::quant
