// Block scaling: one scale per block of consecutive elements (OCP MX, NVFP4,
// TransformerEngine's 1x128 blocks, torchao's rowwise scaling), derived from
// each block's own amax when the tensor is quantized. No LibTorch here.
//
// Two conventions meet here. The standards store a block's *decode* scale X
// (a value is X * element: MX's E8M0 "shared scale", NVFP4's E4M3 block
// scale); the ABI's quantize call takes the *encode* multiplier s = 1/X
// (element i is q(fl(x_i * s)) / s, format.h). A scale format says which
// values X may take; the rules below choose X, and the call gets s = 1/X
// rounded to float32 (exact whenever X is a power of two).
//
// The rules (docs/config.md cites their sources). M is the element format's
// largest finite value, emax = floor(log2 M) (OCP's emax_elem), a the block's
// amax, A the tensor's amax:
//  - mx_floor (OCP MX v1.0, section 6.3): X = 2^(floor(log2 a) - emax), taken
//    down to the scale format. The largest element may exceed M and saturate
//    (up to a factor 2 - 2^-m above it, by design of the standard).
//  - round_up (cuDNN / TransformerEngine MXFP8): X = a / M rounded *up* to the
//    scale format, so a * s <= M: nothing clips.
//  - two_level (NVIDIA NVFP4): a float32 tensor encode scale g = Smax * M / A
//    (Smax the scale format's largest value), block decode scales
//    X_b = nearest(a / M * g) in the scale format, element scale s = g / X_b.
// Every X is clamped into [smallest, largest positive value] of the scale
// format (the ABI refuses zero scales): a block clamped at the top has its
// scale *saturated* (its elements clip), one clamped at the bottom has its
// scale *underflowed* (its elements are smaller than the format can show).
// A block whose amax is 0 or not finite (a NaN or an Inf inside) gets s = 1:
// zeros stay zeros at any scale, and an Inf or NaN goes through the element
// format's overflow mode, where the run's non-finite checks see it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "plugins/format_handle.hpp"
#include "quant/vocabulary.hpp"

namespace altgrad::host::quant {

// The values a block's decode scale X may take.
class scale_grid {
public:
    // float32's normal range, [2^-126, 2^126] (so 1/X is a normal float too).
    static scale_grid fp32();
    // Powers of two over the same range: 2^-126 .. 2^126.
    static scale_grid power_of_two();
    // A format plugin's values (decode of every code): its positive finite
    // values are the grid; `name` names it in errors. Throws host::error if
    // there is no positive finite value.
    static scale_grid of_values(const std::string& name, const std::vector<float>& values);

    const std::string& name() const { return name_; }
    float smallest() const { return smallest_; }
    float largest() const { return largest_; }
    // Whether the grid is every power of two from smallest() to largest() (power_of_two(), and
    // of_values() given such values, e.g. E8M0's): scales_from_amaxes has a fast path for it.
    bool powers_of_two() const { return kind_ == kind::power_of_two; }

    // x > 0 and finite, taken to a grid value: the nearest (ties to the
    // larger), the smallest at or above, the largest at or below; clamped into
    // [smallest(), largest()].
    float nearest(double x) const;
    float up(double x) const;
    float down(double x) const;

private:
    enum class kind { fp32, power_of_two, values };
    scale_grid(kind k, std::string name, float smallest, float largest)
        : kind_(k), name_(std::move(name)), smallest_(smallest), largest_(largest) {}

    // kind::values: where in values_ the search for x starts and ends. Bucket k holds the floats
    // whose bits >> 20 are k (an exponent and its top 3 mantissa bits); bucket_start_[k] is the
    // first value at or above the bucket's smallest float, so the answer for an x in bucket k lies
    // in values_[bucket_start_[k] .. bucket_start_[k + 1]]: a few values instead of the grid
    // (NVFP4's E4M3 scales: at most one), the hot step of two_level's scales.
    std::pair<const float*, const float*> bucket_of(double x) const;

    kind kind_;
    std::string name_;
    float smallest_, largest_;
    std::vector<float> values_;                     // kind::values: sorted, distinct, positive, finite
    std::vector<uint32_t> bucket_start_;            // kind::values: kBuckets + 1 indices into values_
    static constexpr uint32_t kBuckets = 1u << 11;  // positive floats' bits >> 20
};

// The grid a scale format's name stands for (quantization.scale_format, the
// CLI's --scale-format, Python's scale_format=): "fp32", "pow2", or else the
// positive finite values of the format plugin `plugin()` gives (called only
// then; the plugin of that name, at most 16 bits so that every code can be
// decoded). Throws host::error naming the scale format.
scale_grid scale_grid_named(const std::string& name,
                            const std::function<std::shared_ptr<const format_handle>()>& plugin);

// How one tensor's block scales are derived.
struct block_recipe {
    scale_rule rule = scale_rule::mx_floor;
    const scale_grid* grid = nullptr;  // not owned
    double element_max = 1.0;          // the element format's largest finite value (M)
};

// What the derived scales did, summed over blocks (metrics and reports).
struct block_scale_stats {
    uint64_t blocks = 0;
    uint64_t saturated = 0;    // scale clamped at the scale format's largest value
    uint64_t underflowed = 0;  // clamped at its smallest value
    uint64_t neutral = 0;      // amax 0 or not finite: s = 1
    double amax = 0;           // the largest block amax (NaN if a block's is)
    // The range of the decode scales X = 1/s of the other blocks (NaN if none).
    double smallest_scale = std::numeric_limits<double>::quiet_NaN();
    double largest_scale = std::numeric_limits<double>::quiet_NaN();
    void add(const block_scale_stats& o);
};

// The amax of each block of `block_size` consecutive elements of x[0..n)
// (the last block may be short) into amax[0 .. ceil(n / block_size)). A NaN
// anywhere in a block makes its amax NaN.
void block_amaxes(const float* x, size_t n, size_t block_size, float* amax);

// Turns each block amax into that block's encode scale s = 1/X, in place,
// by the recipe's rule. `tensor_amax` is the rule two_level's A (ignored by
// the others; 0 or non-finite there makes g = 1).
block_scale_stats scales_from_amaxes(float* amax_then_scale, size_t blocks, const block_recipe& recipe,
                                     double tensor_amax = 0.0);

// The larger of two amaxes as block_amaxes orders them (by the bits of
// values >= 0 or NaN: a NaN wins).
inline float larger_amax(float a, float b) {
    uint32_t x = 0, y = 0;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x >= y ? a : b;
}

// The fused passes. The amax a scale needs and the quantize call that uses
// it both read the tensor; over a whole large tensor they are two trips to
// memory. Piece by piece, the call finds its piece in the core's L2 cache.
// kFusedPiece: 2^18 floats, 1 MiB (L2 is 1-2 MiB per core on current x86
// server cores). Measured at 64 MiB (docs/performance.md): pieces of 32-512
// KiB gained nothing, 1-4 MiB gained 10-15%, 8 MiB lost (the re-read then
// comes from L3). Both work in place (a piece is read before it is written),
// and the pieces carry their first element, so the calls' offsets keep
// stochastic rounding independent of the piece size.
constexpr size_t kFusedPiece = size_t{1} << 18;

// Per tensor, when the scale is known before the tensor (delayed scaling
// with a history, or none): quantize(first, count) over x[0, n) piece by
// piece, each piece's amax taken just before its call. Returns the amax of
// x, as block_amaxes takes it.
template <class Quantize>
float quantize_taking_amax(const float* x, size_t n, Quantize&& quantize) {
    float amax = 0.0f;
    for (size_t first = 0; first < n; first += kFusedPiece) {
        const size_t count = std::min(kFusedPiece, n - first);
        float piece_amax = 0.0f;
        block_amaxes(x + first, count, count, &piece_amax);
        amax = larger_amax(amax, piece_amax);
        quantize(first, count);
    }
    return amax;
}

// Block scaling: over x[0, n) in pieces of whole blocks, each block's amax
// and its encode scale by `recipe` into scales[first / block_size, ...), then
// quantize(first, count, the piece's scales). The stats are those of
// scales_from_amaxes over all blocks, with amax the largest block amax.
// two_level's scales need the tensor's amax (`tensor_amax`, as for
// scales_from_amaxes): the caller takes it in a pass of its own before.
template <class Quantize>
block_scale_stats quantize_with_block_scales(const float* x, size_t n, size_t block_size,
                                             const block_recipe& recipe, float* scales, Quantize&& quantize,
                                             double tensor_amax = 0.0) {
    const size_t piece = std::max(block_size, kFusedPiece / block_size * block_size);
    block_scale_stats stats;
    for (size_t first = 0; first < n; first += piece) {
        const size_t count = std::min(piece, n - first), blocks = (count + block_size - 1) / block_size;
        float* piece_scales = scales + first / block_size;
        block_amaxes(x + first, count, block_size, piece_scales);
        float piece_amax = 0.0f;
        block_amaxes(piece_scales, blocks, blocks, &piece_amax);  // amaxes are >= 0 or NaN: their own |.|
        block_scale_stats piece_stats = scales_from_amaxes(piece_scales, blocks, recipe, tensor_amax);
        piece_stats.amax = piece_amax;
        stats.add(piece_stats);
        quantize(first, count, static_cast<const float*>(piece_scales));
    }
    return stats;
}

// The shape of a block of a tensor seen as [rows, k] (k its last dimension,
// the row length): `rows` x `cols`. rows 1: blocks of cols consecutive
// elements along each row, at most one row (kWholeRow: a scale per row), a
// row's last block possibly short. rows > 1: R x C tiles, which must divide
// the tensor exactly.
struct block_shape {
    static constexpr size_t kWholeRow = std::numeric_limits<size_t>::max();
    size_t rows = 1;
    size_t cols = kWholeRow;
};

struct blocked_quantize_result {
    quantize_counts counts;   // the plugin's overflow and underflow counts
    block_scale_stats stats;  // the derived scales (amax: the largest block amax)
};

// How quantize_blocked splits its work: work(begin, end) over parts that
// cover [0, units) once, each of at least `grain` units where it can, perhaps
// on threads of their own (work is safe to run concurrently on disjoint
// parts); the result does not depend on the split. The trainer passes
// LibTorch's at::parallel_for (training.threads), the CLI and Python
// in_threads(n).
using work_splitter =
    std::function<void(size_t units, size_t grain, const std::function<void(size_t, size_t)>& work)>;
// At most `threads` contiguous parts, each on a std::thread of its own (the
// caller's alone for one part; 0: every core); the first exception a part
// throws is rethrown after all end.
work_splitter in_threads(unsigned threads);

// What the trainer, `altgrad-host quantize --block-size` and Python's
// Format.quantize(block_size=...) apply to a block-scaled CPU tensor: each
// block's (or tile's) scale by `recipe` from its amax (two_level: under the
// tensor's amax, taken first), then q(x*s*c)/(s*c) with c = pre_scale (1
// keeps the bits of s alone) into out[0, rows*k) (may be x). `o`'s rounding,
// overflow, seed and offset hold (its scale and block fields are replaced);
// element i draws stochastic rounding from (seed, o.offset + i) however
// `split` splits the work. A null `format` derives the scales alone.
// `scales`, when given, receives every block's encode scale s in row order
// (rows * ceil(k / block) of them; a tile's for each of its rows), before
// pre_scale. Tiles that do not divide [rows, k] and a block of 0 columns
// throw host::error naming both shapes.
blocked_quantize_result quantize_blocked(const format_handle* format, const float* x, float* out, size_t rows,
                                         size_t k, block_shape shape, const block_recipe& recipe,
                                         const quantize_options& o, float pre_scale,
                                         const work_splitter& split, float* scales = nullptr);
// The same over `threads` (in_threads).
blocked_quantize_result quantize_blocked(const format_handle& format, const float* x, float* out, size_t rows,
                                         size_t k, block_shape shape, const block_recipe& recipe,
                                         const quantize_options& o, float pre_scale = 1.0f,
                                         unsigned threads = 1);

}  // namespace altgrad::host::quant
