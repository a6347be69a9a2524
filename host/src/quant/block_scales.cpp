#include "quant/block_scales.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include <altgrad/sdk/rounding.hpp>

#include "util/error.hpp"

namespace altgrad::host::quant {

namespace {

// 2^-126 and 2^126: X and 1/X both normal floats.
const float kSmallestNormalScale = std::ldexp(1.0f, -126);
const float kLargestNormalScale = std::ldexp(1.0f, 126);

// floor(log2 x) for a finite x > 0, exactly: the exponent field of a normal
// double, else frexp (x = m * 2^e, m in [0.5, 1)).
int floor_log2(double x) {
    uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    const int field = static_cast<int>((bits >> 52) & 0x7ff);
    if (field != 0 && field != 0x7ff) return field - 1023;
    int e = 0;
    std::frexp(x, &e);
    return e - 1;
}

// 2^k as a double, built from its bits where it is normal (a scale's every call).
double two_to(int k) {
    if (k < -1022 || k > 1023) return std::ldexp(1.0, k);
    const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
    double d = 0;
    std::memcpy(&d, &bits, sizeof d);
    return d;
}

}  // namespace

scale_grid scale_grid::fp32() {
    return scale_grid(kind::fp32, "fp32", kSmallestNormalScale, kLargestNormalScale);
}

scale_grid scale_grid::power_of_two() {
    return scale_grid(kind::power_of_two, "pow2", kSmallestNormalScale, kLargestNormalScale);
}

scale_grid scale_grid::of_values(const std::string& name, const std::vector<float>& values) {
    std::vector<float> positive;
    for (float v : values)
        if (std::isfinite(v) && v > 0) positive.push_back(v);
    std::sort(positive.begin(), positive.end());
    positive.erase(std::unique(positive.begin(), positive.end()), positive.end());
    if (positive.empty())
        throw error("scale format '" + name + "': has no positive finite value, so it cannot hold a scale");
    // Every power of two from the smallest to the largest and nothing else (E8M0's grid): the
    // power_of_two kind rounds to it by exponent arithmetic, with the same results as a search.
    int exponent = 0;
    bool consecutive_powers = std::frexp(positive.front(), &exponent) == 0.5f;
    for (size_t i = 1; i < positive.size() && consecutive_powers; ++i)
        consecutive_powers = positive[i] == 2 * positive[i - 1];
    if (consecutive_powers) return scale_grid(kind::power_of_two, name, positive.front(), positive.back());
    scale_grid g(kind::values, name, positive.front(), positive.back());
    g.values_ = std::move(positive);
    g.bucket_start_.resize(kBuckets + 1);
    for (uint32_t k = 0; k <= kBuckets; ++k) {
        const uint32_t lowest_bits = k << 20;  // k = kBuckets: +Inf's bits, above every value
        float lowest = 0;
        std::memcpy(&lowest, &lowest_bits, sizeof lowest);
        g.bucket_start_[k] = static_cast<uint32_t>(
            std::lower_bound(g.values_.begin(), g.values_.end(), lowest) - g.values_.begin());
    }
    return g;
}

// x in (smallest_, largest_): the float nearest x has x's neighbours among the grid's values in its
// bucket, or is one itself. Rounding x to float may move it across a bucket's lower edge, but only
// onto that edge, a float, and no grid value (a float) lies between x and it.
std::pair<const float*, const float*> scale_grid::bucket_of(double x) const {
    const float f = static_cast<float>(x);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    const uint32_t k = bits >> 20;
    return {values_.data() + bucket_start_[k], values_.data() + bucket_start_[k + 1]};
}

float scale_grid::up(double x) const {
    if (x >= largest_) return largest_;
    if (x <= smallest_) return smallest_;
    switch (kind_) {
        case kind::fp32: {
            float f = static_cast<float>(x);
            return f < x ? std::nextafter(f, INFINITY) : f;
        }
        case kind::power_of_two: {
            const double p = two_to(floor_log2(x));
            return static_cast<float>(p == x ? p : 2 * p);
        }
        case kind::values: {
            const auto [first, last] = bucket_of(x);
            return *std::lower_bound(first, last, x);  // last: the next bucket's first value
        }
    }
    return largest_;
}

float scale_grid::down(double x) const {
    if (x >= largest_) return largest_;
    if (x <= smallest_) return smallest_;
    switch (kind_) {
        case kind::fp32: {
            float f = static_cast<float>(x);
            return f > x ? std::nextafter(f, 0.0f) : f;
        }
        case kind::power_of_two: return static_cast<float>(two_to(floor_log2(x)));
        case kind::values: {
            const auto [first, last] = bucket_of(x);
            return *(std::upper_bound(first, last, x) - 1);  // first - 1: the last value below the bucket
        }
    }
    return smallest_;
}

float scale_grid::nearest(double x) const {
    if (kind_ == kind::fp32) return std::clamp(static_cast<float>(x), smallest_, largest_);
    if (kind_ == kind::values && x > smallest_ && x < largest_) {  // down and up from one search
        const auto [first, last] = bucket_of(x);
        const float* above = std::lower_bound(first, last, x);
        if (*above == x) return *above;
        const float below = *(above - 1);
        return x - below < *above - x ? below : *above;  // a tie goes up
    }
    const float lo = down(x), hi = up(x);
    return x - lo < hi - x ? lo : hi;  // a tie goes up
}

scale_grid scale_grid_named(const std::string& name,
                            const std::function<std::shared_ptr<const format_handle>()>& plugin) {
    if (name == "fp32") return scale_grid::fp32();
    if (name == "pow2") return scale_grid::power_of_two();
    const std::shared_ptr<const format_handle> f = plugin();
    if (f->info().total_bits > 16)
        throw error("scale_format '" + name + "': a scale format plugin must have at most 16 bits (it has " +
                    std::to_string(f->info().total_bits) + "); use \"fp32\" for float32 scales");
    return scale_grid::of_values(name, f->decode_all_codes());
}

void block_scale_stats::add(const block_scale_stats& o) {
    blocks += o.blocks;
    saturated += o.saturated;
    underflowed += o.underflowed;
    neutral += o.neutral;
    amax = std::isnan(amax) || std::isnan(o.amax) ? NAN : std::max(amax, o.amax);
    smallest_scale = std::fmin(smallest_scale, o.smallest_scale);  // fmin/fmax skip a NaN (no block yet)
    largest_scale = std::fmax(largest_scale, o.largest_scale);
}

namespace {

// The largest |x| of each block as the largest of the bit patterns with the
// sign cleared: for floats of one sign integer order is magnitude order, and
// every NaN pattern lies above +Inf's, so a NaN wins as abs().max() has it.
// An integer max vectorizes where a float one (with NaN rules) does not.
__attribute__((target_clones("avx2", "default"))) void block_amaxes_any(const float* x, size_t n,
                                                                        size_t block_size, float* amax) {
    for (size_t b = 0, first = 0; first < n; ++b, first += block_size) {
        const size_t end = std::min(n, first + block_size);
        uint32_t m = 0;
        for (size_t i = first; i < end; ++i) {
            uint32_t bits = 0;
            std::memcpy(&bits, x + i, sizeof bits);
            bits &= 0x7fffffffu;
            m = bits > m ? bits : m;
        }
        std::memcpy(amax + b, &m, sizeof m);
    }
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ALTGRAD_BLOCK_AMAXES_AVX512 1
// Blocks of 32 (OCP MX's), 16 blocks at a time with AVX-512: the same bit
// maxima, but instead of reducing each block's vector across its lanes (a
// chain of shuffles per block), the 16 blocks' vectors reduce each other in a
// transpose: each level halves the lanes per block and pairs two vectors
// into one, so 16 vectors of 16 lanes become one vector of 16 block maxima
// in 15 shuffle-and-max steps. Returns how many blocks it did (a multiple of 16).
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) size_t block_amaxes_32_avx512(const float* x,
                                                                                            size_t blocks,
                                                                                            float* amax) {
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    // Lane order the transpose leaves the blocks in: 0 8 4 12 1 9 5 13 2 10 6 14 3 11 7 15; this puts them
    // back.
    const __m512i block_order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15);
    size_t b = 0;
    for (; b + 16 <= blocks; b += 16) {
        const float* p = x + b * 32;
        __m512i v[16];  // block i's 32 magnitudes folded to 16 lanes
        for (int i = 0; i < 16; ++i)
            v[i] = _mm512_max_epu32(_mm512_and_si512(_mm512_loadu_si512(p + 32 * i), magnitude),
                                    _mm512_and_si512(_mm512_loadu_si512(p + 32 * i + 16), magnitude));
        __m512i t[8];  // blocks 2j, 2j+1: 8 lanes each (256-bit halves)
        for (int j = 0; j < 8; ++j)
            t[j] = _mm512_max_epu32(_mm512_shuffle_i32x4(v[2 * j], v[2 * j + 1], 0x44),
                                    _mm512_shuffle_i32x4(v[2 * j], v[2 * j + 1], 0xEE));
        __m512i u[4];  // blocks 4j .. 4j+3: 4 lanes each (128-bit quarters)
        for (int j = 0; j < 4; ++j)
            u[j] = _mm512_max_epu32(_mm512_shuffle_i32x4(t[2 * j], t[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_i32x4(t[2 * j], t[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
        __m512i w[2];  // quarter q: blocks q and 4 + q (of 8j): 2 lanes each
        for (int j = 0; j < 2; ++j)
            w[j] = _mm512_max_epu32(_mm512_unpacklo_epi64(u[2 * j], u[2 * j + 1]),
                                    _mm512_unpackhi_epi64(u[2 * j], u[2 * j + 1]));
        // Each pair of lanes to its maximum, then one lane from each of w[0] and w[1] per pair.
        const __m512i m0 = _mm512_max_epu32(w[0], _mm512_shuffle_epi32(w[0], _MM_PERM_CDAB));
        const __m512i m1 = _mm512_max_epu32(w[1], _mm512_shuffle_epi32(w[1], _MM_PERM_CDAB));
        const __m512i maxima = _mm512_mask_blend_epi32(0xAAAA, m0, m1);
        _mm512_storeu_si512(amax + b, _mm512_permutexvar_epi32(block_order, maxima));
    }
    return b;
}

bool cpu_has_avx512() {
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    }();
    return has;
}
#endif

}  // namespace

void block_amaxes(const float* x, size_t n, size_t block_size, float* amax) {
#ifdef ALTGRAD_BLOCK_AMAXES_AVX512
    if (block_size == 32 && cpu_has_avx512()) {
        const size_t done = block_amaxes_32_avx512(x, n / 32, amax);
        x += done * 32, n -= done * 32, amax += done;
    }
#endif
    block_amaxes_any(x, n, block_size, amax);
}

namespace {

// The largest s <= 1/X with fl(amax * s) <= M in float arithmetic: the
// round-up rule's promise that nothing clips, kept through float rounding.
float encode_scale_never_clipping(float decode_scale, float amax, float element_max) {
    float s = 1.0f / decode_scale;
    while (s > 0 && amax * s > element_max) s = std::nextafter(s, 0.0f);
    return s;
}

// mx_floor on a grid of the powers of two 2^kmin .. 2^kmax (E8M0's, or
// scale_grid::power_of_two), the trainer's hot case: the generic loop below
// computes the same X = 2^clamp(floor(log2 a) - emax) and s = 1/X through
// doubles, a grid search and divisions per block; here it is integer
// arithmetic on the amax's bits without branches, so the loop vectorizes.
// Needs -127 <= kmin, kmax <= 127 (s and X both floats). no-trapping-math:
// GCC will not vectorize an int-to-float conversion that might raise the
// inexact flag; this one converts m < 2^23, always exact.
__attribute__((target_clones("avx2", "default"), optimize("no-trapping-math"))) block_scale_stats
mx_floor_on_powers_of_two(float* amax_then_scale, size_t blocks, int emax, int kmin, int kmax) {
    block_scale_stats st;
    st.blocks = blocks;
    int smallest_k = kmax + 1, largest_k = kmin - 1;
    constexpr size_t kStretch = size_t{1} << 16;  // blocks per 32-bit tally (vector lanes)
    for (size_t b0 = 0; b0 < blocks; b0 += kStretch) {
        const size_t end = std::min(blocks, b0 + kStretch);
        uint32_t neutral = 0, saturated = 0, underflowed = 0;
        for (size_t b = b0; b < end; ++b) {
            uint32_t bits = 0;
            std::memcpy(&bits, amax_then_scale + b, sizeof bits);
            // Selects as masks (all ones or zero), so that the loop has no branch to keep it from
            // vectorizing. Zero, negative, Inf or NaN: s = 1, as in the generic loop.
            const uint32_t is_neutral = 0u - static_cast<uint32_t>(!sdk::positive_finite_bits(bits));
            // floor(log2 a): the exponent field; for a subnormal (m * 2^-149), float(m)'s (exact).
            const float m = static_cast<float>(static_cast<int32_t>(bits & 0x7FFFFFu));
            uint32_t m_bits = 0;
            std::memcpy(&m_bits, &m, sizeof m_bits);
            const uint32_t field = bits >> 23;
            const uint32_t is_subnormal = 0u - static_cast<uint32_t>(field == 0);
            const int log2_a =
                static_cast<int>(((field - 127u) & ~is_subnormal) | (((m_bits >> 23) - 276u) & is_subnormal));
            const int ideal = log2_a - emax;
            const int k = std::min(std::max(ideal, kmin), kmax);
            neutral += is_neutral & 1u;
            saturated += ~is_neutral & static_cast<uint32_t>(ideal > kmax);
            underflowed += ~is_neutral & static_cast<uint32_t>(ideal < kmin);
            // s = 2^-k: normal for k <= 126, else 2^-127 (k <= 127).
            const uint32_t is_normal_s = 0u - static_cast<uint32_t>(k <= 126);
            const uint32_t s_bits =
                (static_cast<uint32_t>(127 - k) << 23 & is_normal_s) | (0x00400000u & ~is_normal_s);
            const uint32_t result = (0x3F800000u & is_neutral) | (s_bits & ~is_neutral);
            std::memcpy(amax_then_scale + b, &result, sizeof result);
            smallest_k =
                std::min(smallest_k, static_cast<int>((static_cast<uint32_t>(k) & ~is_neutral) |
                                                      (static_cast<uint32_t>(kmax + 1) & is_neutral)));
            largest_k = std::max(largest_k, static_cast<int>((static_cast<uint32_t>(k) & ~is_neutral) |
                                                             (static_cast<uint32_t>(kmin - 1) & is_neutral)));
        }
        st.neutral += neutral;
        st.saturated += saturated;
        st.underflowed += underflowed;
    }
    if (smallest_k <= largest_k) {
        st.smallest_scale = std::ldexp(1.0, smallest_k);
        st.largest_scale = std::ldexp(1.0, largest_k);
    }
    return st;
}

}  // namespace

namespace {

// What a rule's code sees besides the block's amax a.
struct rule_inputs {
    const scale_grid& grid;
    float element_max;  // M
    int emax;           // floor(log2 M)
    float g;            // two_level's float32 tensor encode scale (1 for the others)
};

// Each rule's code, one specialization per entry of scale_rules()
// (quant/vocabulary.hpp): ideal(a) is X before the scale format, to_grid
// takes it to a grid value inside the grid's range, encode(X, a) is the
// multiplier s the quantize call gets. A new rule is its table entry, one of
// these, a line in scales_for_rule below, and its test.
template <scale_rule R>
struct rule_code;

template <>
struct rule_code<scale_rule::mx_floor> {
    static double ideal(float a, const rule_inputs& in) { return two_to(floor_log2(a) - in.emax); }
    static float to_grid(double x, const scale_grid& grid) { return grid.down(x); }
    static float encode(float x, float, const rule_inputs&) { return 1.0f / x; }
};

template <>
struct rule_code<scale_rule::round_up> {
    static double ideal(float a, const rule_inputs& in) { return static_cast<double>(a) / in.element_max; }
    static float to_grid(double x, const scale_grid& grid) { return grid.up(x); }
    static float encode(float x, float a, const rule_inputs& in) {
        return encode_scale_never_clipping(x, a, in.element_max);
    }
};

// In TransformerEngine's float32 order (transformer_engine/common/cast/nvfp4/core_nvfp4.cuh):
// g = fl(448 * 6 / A); X = e4m3(a * fl(g * fl(1/6))); s = fl(1 / fl(X * fl(1/g))).
template <>
struct rule_code<scale_rule::two_level> {
    static double ideal(float a, const rule_inputs& in) {
        return static_cast<double>(a * (in.g * (1.0f / in.element_max)));
    }
    static float to_grid(double x, const scale_grid& grid) { return grid.nearest(x); }
    static float encode(float x, float, const rule_inputs& in) { return 1.0f / (x * (1.0f / in.g)); }
};

template <>
struct rule_code<scale_rule::nearest> {
    static double ideal(float a, const rule_inputs& in) { return static_cast<double>(a) / in.element_max; }
    static float to_grid(double x, const scale_grid& grid) { return grid.nearest(x); }
    static float encode(float x, float, const rule_inputs&) { return 1.0f / x; }
};

// The scales of one rule over the blocks, in place (scales_from_amaxes' generic path).
template <scale_rule R>
block_scale_stats scales_for_rule(float* amax_then_scale, size_t blocks, const rule_inputs& in) {
    using code = rule_code<R>;
    const scale_grid& grid = in.grid;
    // Rounding to nearest saturates only beyond half the grid's top gap (E4M3: 448 + 16): a block
    // whose X the float32 steps put just above the largest value is not counted saturated.
    const double saturation_limit =
        R == scale_rule::two_level || R == scale_rule::nearest
            ? grid.largest() + (grid.largest() - grid.down(std::nextafter(grid.largest(), 0.0f))) / 2.0
            : grid.largest();
    block_scale_stats st;
    st.blocks = blocks;
    float smallest_s = FLT_MAX, largest_s = 0;  // over the blocks that are not neutral
    for (size_t b = 0; b < blocks; ++b) {
        const float a = amax_then_scale[b];
        if (!(std::isfinite(a) && a > 0)) {
            amax_then_scale[b] = 1.0f;
            ++st.neutral;
            continue;
        }
        const double ideal = code::ideal(a, in);  // X before the scale format
        float x = 0;
        if (ideal > grid.largest()) {
            x = grid.largest();
            if (ideal >= saturation_limit) ++st.saturated;
        } else if (ideal < grid.smallest()) {
            x = grid.smallest();
            ++st.underflowed;
        } else {
            x = code::to_grid(ideal, grid);
        }
        float s = code::encode(x, a, in);
        if (!std::isfinite(s)) s = FLT_MAX;  // a scale format reaching below 1/FLT_MAX
        amax_then_scale[b] = s;
        smallest_s = std::min(smallest_s, s);
        largest_s = std::max(largest_s, s);
    }
    // The decode scales' range from the encode scales': 1/s rounded is monotone, so the largest s
    // gives the smallest X (one division per call, not per block).
    if (largest_s > 0) {
        st.smallest_scale = 1.0 / largest_s;
        st.largest_scale = 1.0 / smallest_s;
    }
    return st;
}

}  // namespace

block_scale_stats scales_from_amaxes(float* amax_then_scale, size_t blocks, const block_recipe& r,
                                     double tensor_amax) {
    const scale_grid& grid = *r.grid;
    const float element_max = static_cast<float>(r.element_max);
    const int emax = floor_log2(r.element_max);
    if (r.rule == scale_rule::mx_floor && grid.powers_of_two()) {
        const int kmin = floor_log2(grid.smallest()), kmax = floor_log2(grid.largest());
        if (kmin >= -127 && kmax <= 127)
            return mx_floor_on_powers_of_two(amax_then_scale, blocks, emax, kmin, kmax);
    }
    float g = 1.0f;
    if (info_of(r.rule).needs_tensor_amax && std::isfinite(tensor_amax) && tensor_amax > 0) {
        g = grid.largest() * element_max / static_cast<float>(tensor_amax);
        if (!std::isfinite(g)) g = FLT_MAX;
    }
    const rule_inputs in{grid, element_max, emax, g};
    switch (r.rule) {
        case scale_rule::mx_floor: return scales_for_rule<scale_rule::mx_floor>(amax_then_scale, blocks, in);
        case scale_rule::round_up: return scales_for_rule<scale_rule::round_up>(amax_then_scale, blocks, in);
        case scale_rule::two_level:
            return scales_for_rule<scale_rule::two_level>(amax_then_scale, blocks, in);
        case scale_rule::nearest: return scales_for_rule<scale_rule::nearest>(amax_then_scale, blocks, in);
    }
    throw error("scales_from_amaxes: no code for the scale rule '" + std::string(info_of(r.rule).name) + "'");
}

work_splitter in_threads(unsigned threads) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    return [threads](size_t units, size_t, const std::function<void(size_t, size_t)>& work) {
        const size_t parts = std::min<size_t>(threads, units);
        if (parts <= 1) return work(size_t{0}, units);
        std::vector<std::thread> workers;
        std::vector<std::exception_ptr> errors(parts);
        for (size_t p = 0; p < parts; ++p)
            workers.emplace_back([&, p] {
                try {
                    work(units * p / parts, units * (p + 1) / parts);
                } catch (...) {
                    errors[p] = std::current_exception();
                }
            });
        for (std::thread& w : workers) w.join();
        for (const std::exception_ptr& e : errors)
            if (e) std::rethrow_exception(e);
    };
}

namespace {

std::string shape_text(size_t a, size_t b, const char* between) {
    const auto side = [](size_t v) {
        return v == block_shape::kWholeRow ? std::string("row") : std::to_string(v);
    };
    return side(a) + between + side(b);
}

// The amax of each tile of tile_rows x block of x as [rows, k] (tiles dividing it), tiles in row order:
// its rows' block amaxes, the larger of each (a NaN wins, as in block_amaxes).
std::vector<float> tile_amaxes(const float* x, size_t rows, size_t k, size_t tile_rows, size_t block) {
    const size_t per_row = k / block;
    std::vector<float> amax(rows / tile_rows * per_row), row_amax(per_row);
    for (size_t r = 0; r < rows; ++r) {
        float* tile = amax.data() + r / tile_rows * per_row;
        block_amaxes(x + r * k, k, block, r % tile_rows == 0 ? tile : row_amax.data());
        if (r % tile_rows != 0)
            for (size_t b = 0; b < per_row; ++b) tile[b] = larger_amax(tile[b], row_amax[b]);
    }
    return amax;
}

constexpr size_t kGrain =
    size_t{1} << 15;  // elements a part of quantize_blocked takes at least, where it can

// The amax of x[0, n) (a NaN wins, as in block_amaxes), its parts of `grain` split by `split`.
float amax_in_parts(const float* x, size_t n, size_t grain, const work_splitter& split) {
    std::mutex m;
    float amax = 0.0f;
    split((n + grain - 1) / grain, 1, [&](size_t c0, size_t c1) {
        const size_t first = c0 * grain, last = std::min(n, c1 * grain);
        float part = 0.0f;
        block_amaxes(x + first, last - first, last - first, &part);
        const std::lock_guard<std::mutex> lock(m);
        amax = larger_amax(amax, part);
    });
    return amax;
}

}  // namespace

blocked_quantize_result quantize_blocked(const format_handle* format, const float* x, float* out, size_t rows,
                                         size_t k, block_shape shape, const block_recipe& recipe,
                                         const quantize_options& o, float pre_scale,
                                         const work_splitter& split, float* scales_out) {
    if (shape.rows == 0 || shape.cols == 0)
        throw error("blocks of " + shape_text(shape.rows, shape.cols, "x") +
                    ": a block needs at least one row and one column");
    blocked_quantize_result result;
    const size_t n = rows * k;
    if (n == 0) return result;
    const size_t block = std::min(shape.cols, k), per_row = (k + block - 1) / block;
    std::vector<float> own_scales(scales_out ? 0 : rows * per_row);
    float* const scales =
        scales_out ? scales_out : own_scales.data();  // encode scales, one a block, row order
    std::mutex m;
    // q(x*s*c)/(s*c) of x[first, first + count) (whole blocks but a row's short last one), `piece_scales`
    // its blocks' scales s.
    const auto quantize = [&](size_t first, size_t count, const float* piece_scales) {
        if (!format) return;
        quantize_options piece = o;
        piece.scale = 1.0f;  // the block scales replace it (format.h)
        piece.block_size = block;
        piece.offset = o.offset + first;
        piece.block_scales = piece_scales;
        std::vector<float> pre_scaled;
        if (pre_scale != 1.0f) {
            pre_scaled.assign(piece_scales, piece_scales + (count + block - 1) / block);
            for (float& s : pre_scaled) s *= pre_scale;
            piece.block_scales = pre_scaled.data();
        }
        const quantize_counts c = format->quantize(x + first, out + first, count, piece);
        const std::lock_guard<std::mutex> lock(m);
        result.counts.overflow += c.overflow;
        result.counts.underflow += c.underflow;
    };

    if (shape.rows == 1) {
        // Blocks along rows, each piece's scales derived just before its call (quantize_with_block_scales).
        // Work items: blocks when rows are whole blocks (the tensor is one flat run of them), else rows.
        const float tensor_amax =
            info_of(recipe.rule).needs_tensor_amax ? amax_in_parts(x, n, kGrain, split) : 0.0f;
        const bool flat = k % block == 0;
        const size_t items = flat ? n / block : rows, item_len = flat ? block : k;
        split(items, std::max<size_t>(1, kGrain / item_len), [&](size_t i0, size_t i1) {
            const size_t segments = flat ? 1 : i1 - i0, segment_len = flat ? (i1 - i0) * block : k;
            block_scale_stats local;
            for (size_t j = 0; j < segments; ++j) {
                const size_t first = i0 * item_len + j * segment_len;
                local.add(quantize_with_block_scales(
                    x + first, segment_len, block, recipe, scales + first / k * per_row + first % k / block,
                    [&](size_t piece_first, size_t count, const float* piece_scales) {
                        quantize(first + piece_first, count, piece_scales);
                    },
                    tensor_amax));
            }
            const std::lock_guard<std::mutex> lock(m);
            result.stats.add(local);
        });
        return result;
    }

    // R x C tiles: each tile's amax (its rows' block amaxes, the larger of each), one scale per tile
    // by the rule, that scale for each row of the tile, then the rows quantized in whole blocks.
    if (k % block != 0 || rows % shape.rows != 0)
        throw error("tiles of " + shape_text(shape.rows, shape.cols, "x") + " do not divide a tensor of [" +
                    shape_text(rows, k, ", ") + "] (rows by row length)");
    std::vector<float> tile_amax = tile_amaxes(x, rows, k, shape.rows, block);
    float tensor_amax = 0.0f;  // amaxes are >= 0 or NaN: their own magnitudes
    block_amaxes(tile_amax.data(), tile_amax.size(), tile_amax.size(), &tensor_amax);
    result.stats = scales_from_amaxes(tile_amax.data(), tile_amax.size(), recipe, tensor_amax);
    result.stats.amax = tensor_amax;
    for (size_t r = 0; r < rows; ++r)
        std::copy_n(tile_amax.data() + r / shape.rows * per_row, per_row, scales + r * per_row);
    split(rows, std::max<size_t>(1, kGrain / k),
          [&](size_t r0, size_t r1) { quantize(r0 * k, (r1 - r0) * k, scales + r0 * per_row); });
    return result;
}

blocked_quantize_result quantize_blocked(const format_handle& format, const float* x, float* out, size_t rows,
                                         size_t k, block_shape shape, const block_recipe& recipe,
                                         const quantize_options& o, float pre_scale, unsigned threads) {
    return quantize_blocked(&format, x, out, rows, k, shape, recipe, o, pre_scale, in_threads(threads));
}

}  // namespace altgrad::host::quant
