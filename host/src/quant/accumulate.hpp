// The accumulation model of issue #31 (docs/accumulation.md): a matrix
// product C = A·B whose reduction runs through a low-precision accumulator,
// as FP8 tensor cores keep only part of float32 in theirs. No LibTorch here.
//
// An accumulator is {format, rounding, mma_depth G, promote_every N}. The
// reduction dimension is cut into intervals of N elements (one interval when
// N = 0), each interval into chunks of G (the last of each shorter). For each
// chunk: acc := round(acc + the chunk's dot product), the sum taken exactly and
// rounded once, to the format, with the rounding; at the end of each interval
// total := fl32(total + acc) and acc := 0. C is the final total. A model: the
// hardware's behaviour is not public.
//
// Exactness (docs/accumulation.md proves it): a product of two float32 is
// exact in float64. A chunk's sum is accumulated in float64 as a pair
// (hi, lo) by Knuth's TwoSum, and the sum into lo by TwoSum again: when none
// of those second TwoSums has an error, hi + lo is the exact sum; a chunk
// where one has (a spread of more than about 50 binades inside the chunk, a
// NaN or an Inf) is summed again by an exact long accumulator. From an exact
// sum S, the rounding reaches the format through float32, which the plugin's
// quantize takes: toward-zero truncates S to float32 first (truncating twice
// is truncating once, every format value being a float32); nearest rounds S
// to float32 by round-to-odd, whose result lies strictly between the same
// two points of the format's grid and its midpoints as S (so the plugin's
// nearest-even gives the format's rounding of S), when those points are
// float32 values with an even last bit: float formats of at most 22
// significant bits. float32 itself (the fp32 plugin) gets S rounded to
// nearest directly.
#pragma once

#include <cstddef>
#include <memory>

#include <altgrad/abi/format.h>

#include "plugins/format_handle.hpp"

namespace altgrad::host::quant {

// An accumulator's rounding and shape (docs/accumulation.md).
struct accumulator_spec {
    // ALTGRAD_ROUND_NEAREST_EVEN or ALTGRAD_ROUND_TOWARD_ZERO (stochastic is not modelled).
    altgrad_rounding rounding = ALTGRAD_ROUND_TOWARD_ZERO;
    size_t mma_depth = 32;     // G: the chunk summed exactly, 1 .. kMaxMmaDepth (an FP8 WGMMA's K is 32)
    size_t promote_every = 0;  // N: elements between promotions into the float32 total; 0 = never
};

constexpr size_t kMaxMmaDepth = size_t{1} << 24;

// How an operand of C = A·B (A: M x K, B: K x N) is stored, row-major: A as
// [M, K] (as_is) or as [K, M] (transposed), B as [K, N] or as [N, K]. A linear
// layer's three products, with x [T, in], W [out, in], dy [T, out]:
//   forward        y  = x·Wᵀ:   A = x (as_is),  B = W (transposed);  M, K, N = T, in, out
//   input grad.    dx = dy·W:   A = dy (as_is), B = W (as_is);       M, K, N = T, out, in
//   weight grad.   dW = dyᵀ·x:  A = dy (transposed), B = x (as_is);  M, K, N = out, T, in
enum class operand_layout { as_is, transposed };

// The operands of one product: contiguous float32 buffers, borrowed for the call.
struct gemm_operands {
    const float* a = nullptr;
    operand_layout a_layout = operand_layout::as_is;
    const float* b = nullptr;
    operand_layout b_layout = operand_layout::as_is;
    size_t m = 0, k = 0, n = 0;
};

// How an exact sum reaches float32 before the plugin rounds it to the format.
enum class float32_step { toward_zero, odd, nearest_even };

class accumulator {
public:
    // Checks that `format` can be this accumulator: its plugin takes host
    // memory and the rounding, nearest only where it is exact (see above);
    // throws host::error naming the format and what is wrong otherwise.
    accumulator(std::shared_ptr<const format_handle> format, const accumulator_spec& spec);

    const accumulator_spec& spec() const { return spec_; }
    const format_handle& format() const { return *format_; }
    float32_step step() const { return step_; }

    // c[i * n + j] = (A·B)[i][j] through this accumulator. threads: how many
    // to use, 0 for every core; the result is the same for any number. Throws
    // host::error if the plugin fails.
    void gemm(const gemm_operands& p, float* c, unsigned threads = 1) const;

private:
    std::shared_ptr<const format_handle> format_;
    accumulator_spec spec_;
    float32_step step_ = float32_step::toward_zero;
};

// The float32 that rounding S gives, for an S known as a double h (not
// Inf or NaN) and the sign of S - h (side: -1, 0, +1), where S lies strictly
// between h's two neighbouring doubles: toward zero, to odd (toward zero, the
// last bit set when S is no float32), or to nearest-even (beyond the range:
// Inf). S = 0 gives +0.
float round_to_float32(double h, int side, float32_step step);

// The same over arrays in vector lanes, as the kernels round: out[x] is
// round_to_float32(h[x], the sign of l[x], step) for S = h[x] + l[x] exactly,
// |l[x]| at most half an ulp of h[x] (what TwoSum leaves).
void round_to_float32(const double* h, const double* l, size_t n, float32_step step, float* out);

}  // namespace altgrad::host::quant
