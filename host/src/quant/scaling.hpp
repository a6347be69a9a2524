// Per-tensor scaling: the scale s in q(x*s)/s that puts a tensor's range on
// its format's range.
//
// Scales are powers of two by default: the largest 2^k <= format_max / (amax
// * 2^margin), so x*s and q/s are exact and scaling adds no rounding of its
// own. With tensor_scale fp32 (TransformerEngine's default) the scale is the
// float32 quotient fl(format_max / amax) * 2^-margin (amax as float32; a
// quotient beyond float32's range is its largest finite value, one below the
// smallest normal that), and q(x*s)/s rounds twice more.
//  - delayed (TransformerEngine's recipe): amax comes from a history of the
//    last `history_len` steps' amaxes (their max, or the most recent), so the
//    scale is known before the tensor is; the very first use, with an empty
//    history, uses the tensor's own amax;
//  - current: amax is the tensor's own, this step;
//  - none: s = 1.
// A zero or non-finite amax keeps the previous scale.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "quant/vocabulary.hpp"

namespace altgrad::host::quant {

using amax_compute = amax_compute_kind;

struct scaling_config {
    scaling_mode mode = scaling_mode::delayed;
    int history_len = 16;
    amax_compute compute = amax_compute::max;
    int margin = 0;
    tensor_scale_kind values = tensor_scale_kind::pow2;
    first_scale_kind first = first_scale_kind::amax;  // delayed, before any history
};

class scaling_state {
public:
    scaling_state() = default;
    scaling_state(const scaling_config& c, double format_max) : config_(c), format_max_(format_max) {}

    // The scale to use for a tensor whose own amax is `current_amax`.
    float scale_for(double current_amax);
    // Whether scale_for needs this use's amax: current scaling, and delayed
    // scaling before its history has one. Otherwise the scale is known before
    // the tensor, and the amax to record can be taken while quantizing.
    bool needs_current_amax() const {
        return config_.mode == scaling_mode::current ||
               (config_.mode == scaling_mode::delayed && history_.empty() &&
                config_.first == first_scale_kind::amax);
    }
    // Record this use's amax into the history (after quantizing).
    void record(double amax);
    // Forget everything (after a format switch).
    void reset(double format_max);

    float scale() const { return scale_; }
    const std::deque<double>& amax_history() const { return history_; }

    // From a checkpoint: the scale and the amax history (oldest first) it recorded.
    void restore(float scale, const std::vector<double>& amax_history);

private:
    float scale_of(double amax) const;

    scaling_config config_;
    double format_max_ = 1.0;
    float scale_ = 1.0f;
    std::deque<double> history_;
};

}  // namespace altgrad::host::quant
