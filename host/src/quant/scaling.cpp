#include "quant/scaling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "util/error.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::quant {

float scaling_state::scale_of(double amax) const {
    if (config_.values == tensor_scale_kind::fp32) {
        float s = static_cast<float>(format_max_) / static_cast<float>(amax);
        s = std::ldexp(s, -config_.margin);
        if (!std::isfinite(s)) s = std::numeric_limits<float>::max();
        return std::max(s, std::numeric_limits<float>::min());
    }
    const double target = format_max_ / (amax * std::ldexp(1.0, config_.margin));
    int e = static_cast<int>(std::floor(std::log2(target)));
    // Keep the scale a normal float32 power of two.
    e = std::max(-126, std::min(127, e));
    return std::ldexp(1.0f, e);
}

float scaling_state::scale_for(double current_amax) {
    if (config_.mode == scaling_mode::none) return scale_ = 1.0f;
    double amax = current_amax;
    // TransformerEngine's delayed scaling starts from scale 1, its amax history empty.
    if (config_.mode == scaling_mode::delayed && history_.empty() && config_.first == first_scale_kind::one)
        return scale_ = 1.0f;
    if (config_.mode == scaling_mode::delayed && !history_.empty())
        amax = config_.compute == amax_compute::most_recent
                   ? history_.back()
                   : *std::max_element(history_.begin(), history_.end());
    if (std::isfinite(amax) && amax > 0) scale_ = scale_of(amax);
    return scale_;
}

void scaling_state::record(double amax) {
    if (config_.mode != scaling_mode::delayed) return;
    if (!(std::isfinite(amax) && amax > 0)) return;  // keeps the previous scale
    history_.push_back(amax);
    while (static_cast<int>(history_.size()) > config_.history_len) history_.pop_front();
}

void scaling_state::reset(double format_max) {
    format_max_ = format_max;
    scale_ = 1.0f;
    history_.clear();
}

void scaling_state::restore(float scale, const std::vector<double>& amax_history) {
    scale_ = scale;
    history_.assign(amax_history.begin(), amax_history.end());
}

}  // namespace altgrad::host::quant
