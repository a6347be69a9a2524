#include "train/block_scales.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "util/error.hpp"

namespace altgrad::host::train {

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

scale_grid scale_grid::fp32() { return scale_grid(kind::fp32, "fp32", kSmallestNormalScale, kLargestNormalScale); }

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
    scale_grid g(kind::values, name, positive.front(), positive.back());
    g.values_ = std::move(positive);
    return g;
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
        case kind::values: return *std::lower_bound(values_.begin(), values_.end(), x);
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
        case kind::values: return *(std::upper_bound(values_.begin(), values_.end(), x) - 1);
    }
    return smallest_;
}

float scale_grid::nearest(double x) const {
    if (kind_ == kind::fp32) return std::clamp(static_cast<float>(x), smallest_, largest_);
    const float lo = down(x), hi = up(x);
    return x - lo < hi - x ? lo : hi;  // a tie goes up
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

// The largest |x| of each block as the largest of the bit patterns with the
// sign cleared: for floats of one sign integer order is magnitude order, and
// every NaN pattern lies above +Inf's, so a NaN wins as abs().max() has it.
// An integer max vectorizes where a float one (with NaN rules) does not.
__attribute__((target_clones("avx2", "default"))) void block_amaxes(const float* x, size_t n, size_t block_size,
                                                                    float* amax) {
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

namespace {

// The largest s <= 1/X with fl(amax * s) <= M in float arithmetic: the
// round-up rule's promise that nothing clips, kept through float rounding.
float encode_scale_never_clipping(float decode_scale, float amax, float element_max) {
    float s = 1.0f / decode_scale;
    while (s > 0 && amax * s > element_max) s = std::nextafter(s, 0.0f);
    return s;
}

}  // namespace

block_scale_stats scales_from_amaxes(float* amax_then_scale, size_t blocks, const block_recipe& r,
                                     double tensor_amax) {
    const scale_grid& grid = *r.grid;
    const float element_max = static_cast<float>(r.element_max);
    const int emax = floor_log2(r.element_max);
    // two_level's tensor encode scale g (float32, as NVFP4 computes it).
    float g = 1.0f;
    if (r.rule == scale_rule::two_level && std::isfinite(tensor_amax) && tensor_amax > 0) {
        g = grid.largest() * element_max / static_cast<float>(tensor_amax);
        if (!std::isfinite(g)) g = FLT_MAX;
    }
    block_scale_stats st;
    st.blocks = blocks;
    for (size_t b = 0; b < blocks; ++b) {
        const float a = amax_then_scale[b];
        if (!(std::isfinite(a) && a > 0)) {
            amax_then_scale[b] = 1.0f;
            ++st.neutral;
            continue;
        }
        double ideal = 0;  // X before the scale format
        switch (r.rule) {
            case scale_rule::mx_floor: ideal = two_to(floor_log2(a) - emax); break;
            case scale_rule::round_up: ideal = static_cast<double>(a) / r.element_max; break;
            case scale_rule::two_level: ideal = static_cast<double>(a / element_max * g); break;
        }
        float x = 0;
        if (ideal > grid.largest()) {
            x = grid.largest();
            ++st.saturated;
        } else if (ideal < grid.smallest()) {
            x = grid.smallest();
            ++st.underflowed;
        } else {
            x = r.rule == scale_rule::mx_floor   ? grid.down(ideal)
                : r.rule == scale_rule::round_up ? grid.up(ideal)
                                                 : grid.nearest(ideal);
        }
        float s = 0;
        switch (r.rule) {
            case scale_rule::mx_floor: s = 1.0f / x; break;
            case scale_rule::round_up: s = encode_scale_never_clipping(x, a, element_max); break;
            case scale_rule::two_level: s = g / x; break;
        }
        if (!std::isfinite(s)) s = FLT_MAX;  // a scale format reaching below 1/FLT_MAX
        amax_then_scale[b] = s;
        const double decode = 1.0 / s;
        st.smallest_scale = std::fmin(st.smallest_scale, decode);
        st.largest_scale = std::fmax(st.largest_scale, decode);
    }
    return st;
}

}  // namespace altgrad::host::train
