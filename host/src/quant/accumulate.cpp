// The accumulation model (accumulate.hpp, docs/accumulation.md): exact chunk
// sums, their rounding through float32 and the format plugin, promotion.
//
// The work is laid out for speed without changing a bit of the result: the
// operands are packed once as float64 (A by columns, B by rows, both padded
// with zeros to whole tiles); a tile of kRows rows x two vectors of columns
// keeps its chunk sums in registers while the chunk's K runs (plain float64
// sums where the operands' bit spans prove them exact, as they do for
// low-precision operands; TwoSum pairs elsewhere); row blocks go in panels
// that share each tile of B while it is in L1, and the rounding of a panel's
// accumulators is one plugin call per chunk; threads take whole row blocks.
// The kernel (accumulate_kernel.inc) is compiled once per vector instruction
// set. Every output is computed by the same operations in the same order
// whatever the tile, the vector width or the thread.
#include "quant/accumulate.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <altgrad/sdk/philox.hpp>    // sdk::detail::cpu_vector_isa
#include <altgrad/sdk/rounding.hpp>  // sdk::float_bits, sdk::bits_float

#include "util/abi_names.hpp"
#include "util/error.hpp"

namespace altgrad::host::quant {

namespace {

uint64_t double_bits(double x) {
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    return b;
}
double bits_double(uint64_t b) {
    double x = 0;
    std::memcpy(&x, &b, sizeof x);
    return x;
}
using sdk::bits_float;  // float32's bits, as the format plugins take them
using sdk::float_bits;

#define ALTGRAD_ACCUMULATE_INLINE inline __attribute__((always_inline))

// a > 0 (not NaN) truncated to float32's grid: 24 significant bits, steps of
// 2^-149 below 2^-126, FLT_MAX above the range.
ALTGRAD_ACCUMULATE_INLINE double truncate_to_float32(double a) {
    if (a > FLT_MAX) return FLT_MAX;
    // a in [2^e, 2^(e+1)); a double subnormal (e = -1023) is far below float32's smallest step.
    const int e = static_cast<int>((double_bits(a) >> 52) & 0x7FF) - 1023;
    const int kept = e >= -126 ? 23 : e + 149;  // fraction bits float32 keeps in that binade
    if (kept < 0) return 0.0;
    return bits_double(double_bits(a) & ~((uint64_t{1} << (52 - kept)) - 1u));
}

// round_to_float32, inlined into the kernels (once per output and chunk: a call costs as much).
ALTGRAD_ACCUMULATE_INLINE float rounded_to_float32(double h, int side, float32_step step) {
    if (h == 0.0) return 0.0f;  // then S = 0: the model's exact zero is +0
    const bool negative = h < 0;
    const double a = std::fabs(h);
    const int above = negative ? -side : side;  // the sign of |S| - |h|
    const double t = truncate_to_float32(a);
    uint32_t bits = float_bits(static_cast<float>(t));  // exact: t is a float32
    bool sticky = true;                                 // |S| is no float32
    if (t == a && above == 0) sticky = false;
    else if (t == a && above < 0) bits -= 1u;  // |S| lies just below the float32 |h|: the one below it
    // bits is now the truncation of |S| to float32, |S| in [bits, bits + 1 step).
    if (step == float32_step::odd) bits |= sticky ? 1u : 0u;
    if (step == float32_step::nearest_even && sticky) {
        // The midpoint of bits and the float32 above (Inf above FLT_MAX: the step is that below it).
        const double low = bits_float(bits);
        const double up = bits == 0x7F7FFFFFu ? low + (low - bits_float(bits - 1u)) : bits_float(bits + 1u);
        const double mid = low + (up - low) / 2;
        // Without branches: which side of the midpoint S lies on is a coin toss for random data.
        const bool odd_tie = (above == 0) & ((bits & 1u) != 0);
        bits += static_cast<uint32_t>((a > mid) | ((a == mid) & ((above > 0) | odd_tie)));
    }
    return bits_float(bits | (negative ? 0x80000000u : 0u));
}

}  // namespace

float round_to_float32(double h, int side, float32_step step) { return rounded_to_float32(h, side, step); }

namespace {

// An exact sum of doubles whose bits lie between 2^-352 and 2^351 (float32
// values, products of two, and sums of fewer than 2^31 of those: products lie
// in [2^-298, 2^256)): a two's-complement fixed-point number whose last bit
// weighs 2^kLowExponent. Kulisch's long accumulator, for the chunks the
// float64 path cannot prove exact.
class long_sum {
public:
    void add(double x) {
        if (x == 0.0) return;
        const uint64_t b = double_bits(x);
        const int exponent_field = static_cast<int>((b >> 52) & 0x7FF);
        const uint64_t significand = (b & ((uint64_t{1} << 52) - 1u)) | (uint64_t{1} << 52);
        const int shift = exponent_field - 1075 - kLowExponent;  // of the significand's last bit
        if (exponent_field == 0 || shift < 0 || shift + 53 > kLimbs * 64 - 2)
            throw error("accumulator: internal error: a term outside the long accumulator's range");
        const size_t limb = static_cast<size_t>(shift) / 64;
        const unsigned __int128 v = static_cast<unsigned __int128>(significand) << (shift % 64);
        uint64_t part[2] = {static_cast<uint64_t>(v), static_cast<uint64_t>(v >> 64)};
        if (x > 0) add_at(limb, part);
        else subtract_at(limb, part);
    }

    // The sum truncated to 53 bits (h) and the sign of what was cut (side), as round_to_float32 takes them.
    std::pair<double, int> truncated() const {
        uint64_t mag[kLimbs];
        std::copy(limb_, limb_ + kLimbs, mag);
        const bool negative = (mag[kLimbs - 1] >> 63) != 0;
        if (negative) {  // two's complement: invert and add 1
            unsigned carry = 1;
            for (uint64_t& w : mag) {
                w = ~w + carry;
                carry = carry && w == 0;
            }
        }
        int top = -1;  // the highest set bit
        for (int i = kLimbs - 1; i >= 0 && top < 0; --i)
            if (mag[i] != 0) top = i * 64 + 63 - __builtin_clzll(mag[i]);
        if (top < 0) return {0.0, 0};
        const int low = std::max(0, top - 52);  // the 53 bits [low, top] are kept
        const uint64_t kept = bits_at(mag, low, top - low + 1);
        bool sticky = false;
        for (int i = 0; i < low / 64; ++i) sticky = sticky || mag[i] != 0;
        if (low % 64 != 0) sticky = sticky || (mag[low / 64] & ((uint64_t{1} << (low % 64)) - 1u)) != 0;
        const double h = std::ldexp(static_cast<double>(kept), low + kLowExponent);
        const int sign = negative ? -1 : 1;
        return {sign * h, sticky ? sign : 0};
    }

private:
    static constexpr int kLimbs = 11;
    static constexpr int kLowExponent = -352;

    void add_at(size_t limb, const uint64_t (&part)[2]) {
        uint64_t carry = 0;
        for (size_t i = limb; i < kLimbs; ++i) {
            const uint64_t addend = i - limb < 2 ? part[i - limb] : 0, s = limb_[i] + addend;
            const uint64_t carry_out = (s < addend) | (s + carry < carry);
            limb_[i] = s + carry;
            carry = carry_out;
            if (i > limb && carry == 0) break;
        }
    }
    void subtract_at(size_t limb, const uint64_t (&part)[2]) {
        uint64_t borrow = 0;
        for (size_t i = limb; i < kLimbs; ++i) {
            const uint64_t subtrahend = i - limb < 2 ? part[i - limb] : 0, x = limb_[i];
            const uint64_t borrow_out = (x < subtrahend) | (x - subtrahend < borrow);
            limb_[i] = x - subtrahend - borrow;
            borrow = borrow_out;
            if (i > limb && borrow == 0) break;
        }
    }
    // count <= 64 bits of `mag` from bit `from` up.
    static uint64_t bits_at(const uint64_t* mag, int from, int count) {
        const int limb = from / 64, off = from % 64;
        unsigned __int128 w = mag[limb];
        if (limb + 1 < kLimbs) w |= static_cast<unsigned __int128>(mag[limb + 1]) << 64;
        const uint64_t v = static_cast<uint64_t>(w >> off);
        return count == 64 ? v : v & ((uint64_t{1} << count) - 1u);
    }

    uint64_t limb_[kLimbs] = {};
};

// One chunk's rounded sum, exactly: acc + sum of a[k * lda] * b[k * ldb] over k < count, with IEEE's
// non-finite rules (a NaN, 0 x Inf, or Infs of both signs: NaN; else an Inf wins), then
// round_to_float32. The path of the outputs the float64 sums cannot prove exact.
float exact_chunk(float acc, const double* a, size_t lda, const double* b, size_t ldb, size_t count,
                  float32_step step) {
    bool nan = false, plus_inf = false, minus_inf = false;
    long_sum sum;
    const auto term = [&](double x) {
        if (std::isnan(x)) nan = true;
        else if (std::isinf(x)) (x > 0 ? plus_inf : minus_inf) = true;
        else sum.add(x);
    };
    term(acc);
    for (size_t k = 0; k < count; ++k) term(a[k * lda] * b[k * ldb]);  // float32 values: exact products
    if (nan || (plus_inf && minus_inf)) return std::numeric_limits<float>::quiet_NaN();
    if (plus_inf || minus_inf) return plus_inf ? INFINITY : -INFINITY;
    const auto [h, side] = sum.truncated();
    return round_to_float32(h, side, step);
}

// The operands packed for the kernel: A as [k, m_pad] (A's columns) and B as [k, n_pad] (B's
// rows), as float64 (each float32 exactly, converted once here rather than in the kernel's
// loop), zeros in the padding; the chunks of K in the order the model sums them, and for each
// chunk every row of A's and every column of B's bit span (column_spans, accumulate_kernel.inc).
constexpr size_t kRows = 4;         // rows of A per block (a tile's rows)
constexpr size_t kPad = 16;         // m_pad, n_pad: multiples of the widest tile (two AVX-512 vectors of 8)
constexpr size_t kPanelBlocks = 8;  // row blocks that take each chunk's tile of B in turn, while in L1
constexpr int16_t kNoSpan = 1000;   // the bit span of values with a NaN or an Inf: no plain sum
struct k_chunk {
    size_t k0, count;
    bool last_of_interval;  // a promotion follows it
};
struct packed_operands {
    size_t m = 0, k = 0, n = 0, m_pad = 0, n_pad = 0;
    std::unique_ptr<double[]> a, b;
    std::vector<k_chunk> chunks;
    std::vector<int16_t> a_spans, b_spans;  // [c * m_pad + row], [c * n_pad + column]
    const double* a_columns(size_t k0, size_t i0) const { return a.get() + k0 * m_pad + i0; }
    const double* b_rows(size_t k0, size_t j0) const { return b.get() + k0 * n_pad + j0; }
    const int16_t* a_span(size_t c, size_t i0) const { return a_spans.data() + c * m_pad + i0; }
    const int16_t* b_span(size_t c, size_t j0) const { return b_spans.data() + c * n_pad + j0; }
};

// to[r * stride + c] = from[r * cols + c] (rows x cols), as float64.
void widen_rows(const float* from, size_t rows, size_t cols, double* to, size_t stride) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) to[r * stride + c] = from[r * cols + c];
}
// to[c * stride + r] = from[r * cols + c] (rows x cols), as float64, in blocks that stay in L1.
void widen_transposed(const float* from, size_t rows, size_t cols, double* to, size_t stride) {
    constexpr size_t kBlock = 32;
    for (size_t r0 = 0; r0 < rows; r0 += kBlock)
        for (size_t c0 = 0; c0 < cols; c0 += kBlock)
            for (size_t c = c0; c < std::min(cols, c0 + kBlock); ++c)
                for (size_t r = r0; r < std::min(rows, r0 + kBlock); ++r)
                    to[c * stride + r] = from[r * cols + c];
}

// The chunks of K in the model's order (accumulate.hpp): intervals of promote_every, chunks of G.
std::vector<k_chunk> chunks_of(size_t k, const accumulator_spec& spec) {
    std::vector<k_chunk> chunks;
    const size_t interval = spec.promote_every ? spec.promote_every : k;
    for (size_t start = 0; start < k; start += interval) {
        const size_t end = std::min(k, start + interval);
        for (size_t k0 = start; k0 < end; k0 += spec.mma_depth)
            chunks.push_back({k0, std::min(spec.mma_depth, end - k0), k0 + spec.mma_depth >= end});
    }
    return chunks;
}

// Whether a plain float64 sum of a chunk's products is exact for every output of a tile: each
// product a·b of the chunk is a multiple of 2^(lo_a + lo_b) below 2^(lo_a + lo_b + span_a +
// span_b + 2) in magnitude, so every partial sum of `count` of them is a multiple of that below
// 2^(lo_a + lo_b + span_a + span_b + 2 + ceil(log2 count)): a float64 when that exponent
// exceeds the multiple's by at most 53 (one bit kept in hand).
bool plain_sum_is_exact(int span_a, int span_b, size_t count) {
    int log2_count = 0;
    while ((size_t{1} << log2_count) < count) ++log2_count;
    return span_a + span_b + 2 + log2_count <= 52;
}

// The kernel, once per vector instruction set (accumulate_kernel.inc says why so): the chunk
// of a panel, the rounding of arrays to float32 and the operands' bit spans, in lanes of L doubles.
struct kernel {
    void (*chunk_of_panel)(const packed_operands& p, size_t i0, size_t blocks, size_t c, const float* acc,
                           float* rounded, float32_step step);
    void (*round_lanes)(const double* h, const double* l, size_t n, float32_step step, float* out);
    void (*column_spans)(const double* x, size_t stride, size_t width, size_t k0, size_t k1, int16_t* spans);
};

namespace baseline {
constexpr int L = 2;
#include "quant/accumulate_kernel.inc"
}  // namespace baseline

// GCC's target pragmas; another compiler gets the baseline kernel.
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define ALTGRAD_ACCUMULATE_X86_KERNELS 1
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
constexpr int L = 4;
#include "quant/accumulate_kernel.inc"
}  // namespace avx2
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
namespace avx512 {
constexpr int L = 8;
#include "quant/accumulate_kernel.inc"
}  // namespace avx512
#pragma GCC pop_options
#endif

// The kernel for this CPU (the same results from each: the same operations on each output).
kernel kernel_for_this_cpu() {
#ifdef ALTGRAD_ACCUMULATE_X86_KERNELS
    switch (sdk::detail::cpu_vector_isa()) {
        case sdk::detail::vector_isa::avx512:
            if (__builtin_cpu_supports("fma"))
                return {avx512::chunk_of_panel, avx512::round_lanes, avx512::column_spans};
            return {avx2::chunk_of_panel, avx2::round_lanes, avx2::column_spans};
        case sdk::detail::vector_isa::avx2:
            return {avx2::chunk_of_panel, avx2::round_lanes, avx2::column_spans};
        case sdk::detail::vector_isa::baseline: break;
    }
#endif
    return {baseline::chunk_of_panel, baseline::round_lanes, baseline::column_spans};
}

packed_operands pack(const gemm_operands& p, const accumulator_spec& spec) {
    packed_operands q;
    q.m = p.m, q.k = p.k, q.n = p.n;
    q.m_pad = (p.m + kPad - 1) / kPad * kPad;
    q.n_pad = (p.n + kPad - 1) / kPad * kPad;
    q.a.reset(new double[q.k * q.m_pad]);  // every element written below
    q.b.reset(new double[q.k * q.n_pad]);
    if (p.a_layout == operand_layout::as_is) widen_transposed(p.a, p.m, p.k, q.a.get(), q.m_pad);
    else widen_rows(p.a, p.k, p.m, q.a.get(), q.m_pad);
    if (p.b_layout == operand_layout::as_is) widen_rows(p.b, p.k, p.n, q.b.get(), q.n_pad);
    else widen_transposed(p.b, p.n, p.k, q.b.get(), q.n_pad);
    for (size_t k = 0; k < p.k; ++k) {
        std::fill(q.a.get() + k * q.m_pad + p.m, q.a.get() + (k + 1) * q.m_pad, 0.0);
        std::fill(q.b.get() + k * q.n_pad + p.n, q.b.get() + (k + 1) * q.n_pad, 0.0);
    }
    q.chunks = chunks_of(p.k, spec);
    q.a_spans.resize(q.chunks.size() * q.m_pad);
    q.b_spans.resize(q.chunks.size() * q.n_pad);
    const kernel kernel = kernel_for_this_cpu();
    for (size_t c = 0; c < q.chunks.size(); ++c) {
        const size_t k0 = q.chunks[c].k0, k1 = k0 + q.chunks[c].count;
        kernel.column_spans(q.a.get(), q.m_pad, q.m_pad, k0, k1, q.a_spans.data() + c * q.m_pad);
        kernel.column_spans(q.b.get(), q.n_pad, q.n_pad, k0, k1, q.b_spans.data() + c * q.n_pad);
    }
    return q;
}

// Row blocks [first, last) of C, in panels of up to kPanelBlocks: for each panel, every
// interval's chunks, each rounded to float32 (chunk) and to the format (one plugin call for the
// panel), then the promotion.
void gemm_blocks(const packed_operands& p, const accumulator& acc, size_t first, size_t last, float* c) {
    const size_t most = kPanelBlocks * kRows * p.n_pad;
    std::vector<float> accumulators(most), rounded(most), total(most);
    quantize_options mode;
    mode.rounding = acc.spec().rounding;
    mode.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    const kernel kernel = kernel_for_this_cpu();
    for (size_t block = first; block < last; block += kPanelBlocks) {
        const size_t blocks = std::min(kPanelBlocks, last - block), i0 = block * kRows;
        const size_t width = blocks * kRows * p.n_pad;
        std::fill(accumulators.begin(), accumulators.begin() + width, 0.0f);
        std::fill(total.begin(), total.begin() + width, 0.0f);
        for (size_t c = 0; c < p.chunks.size(); ++c) {
            kernel.chunk_of_panel(p, i0, blocks, c, accumulators.data(), rounded.data(), acc.step());
            acc.format().quantize(rounded.data(), accumulators.data(), width, mode);
            if (!p.chunks[c].last_of_interval) continue;
            for (size_t x = 0; x < width; ++x) {  // promotion
                total[x] += accumulators[x];
                accumulators[x] = 0.0f;
            }
        }
        for (size_t r = 0; r < blocks * kRows && i0 + r < p.m; ++r)
            std::copy(total.begin() + r * p.n_pad, total.begin() + r * p.n_pad + p.n, c + (i0 + r) * p.n);
    }
}

bool is_float32_grid(const altgrad_format_info& i) {
    return i.family == ALTGRAD_FAMILY_FLOAT && i.exponent_bits == 8 && i.mantissa_bits == 23 &&
           i.bias == 127 && i.has_subnormals != 0 && i.max_finite == FLT_MAX;
}

// How the exact sum reaches float32 for this format and rounding (accumulate.hpp says why).
float32_step step_for(const format_handle& f, altgrad_rounding r) {
    const std::string what = "accumulator format '" + f.name() + "': ";
    if (r != ALTGRAD_ROUND_NEAREST_EVEN && r != ALTGRAD_ROUND_TOWARD_ZERO)
        throw error(what + "rounding '" + rounding_name(r) + "' is not modelled (nearest or toward-zero)");
    if ((f.info().rounding_modes & (1u << r)) == 0)
        throw error(what + "the plugin has no rounding '" + rounding_name(r) + "'");
    if (!f.accepts(ALTGRAD_MEMORY_HOST)) throw error(what + "the plugin takes no host memory");
    if (r == ALTGRAD_ROUND_TOWARD_ZERO) return float32_step::toward_zero;
    const altgrad_format_info& i = f.info();
    if (is_float32_grid(i)) return float32_step::nearest_even;
    // Every value and every midpoint of neighbours must be a float32 with an even last bit.
    const double smallest_step =
        i.has_subnormals ? i.min_subnormal : std::ldexp(i.min_normal, -static_cast<int>(i.mantissa_bits));
    if (i.family == ALTGRAD_FAMILY_FLOAT && i.mantissa_bits <= 21 && smallest_step >= 0x1p-147)
        return float32_step::odd;
    throw error(what +
                "nearest rounding of an exact sum is modelled for float formats of at most 22 significant "
                "bits, and float32 itself (this one: " +
                format_family_names().name(i.family) + ", " + std::to_string(i.mantissa_bits) +
                " mantissa bits); use toward-zero");
}

}  // namespace

accumulator::accumulator(std::shared_ptr<const format_handle> format, const accumulator_spec& spec)
    : format_(std::move(format)), spec_(spec) {
    if (!format_) throw error("accumulator: no format");
    if (spec.mma_depth < 1 || spec.mma_depth > kMaxMmaDepth)
        throw error("accumulator: mma_depth " + std::to_string(spec.mma_depth) + ": expected 1 .. " +
                    std::to_string(kMaxMmaDepth));
    step_ = step_for(*format_, spec.rounding);
}

void round_to_float32(const double* h, const double* l, size_t n, float32_step step, float* out) {
    kernel_for_this_cpu().round_lanes(h, l, n, step, out);
}

void accumulator::gemm(const gemm_operands& p, float* c, unsigned threads) const {
    if (p.m == 0 || p.n == 0) return;
    const packed_operands packed = pack(p, spec_);
    const size_t blocks = (p.m + kRows - 1) / kRows;
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    const size_t parts = std::min<size_t>(threads, blocks);
    if (parts <= 1) return gemm_blocks(packed, *this, 0, blocks, c);
    std::vector<std::thread> workers;
    std::vector<std::exception_ptr> errors(parts);
    for (size_t t = 0; t < parts; ++t)
        workers.emplace_back([&, t] {
            try {
                gemm_blocks(packed, *this, blocks * t / parts, blocks * (t + 1) / parts, c);
            } catch (...) {
                errors[t] = std::current_exception();
            }
        });
    for (std::thread& w : workers) w.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace altgrad::host::quant
