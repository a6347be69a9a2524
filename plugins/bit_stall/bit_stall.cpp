// bit_stall: updates the format cannot see. For a weight tensor with master
// weights w (now) and p (`previous`, the same weights at the previous
// measurement), both quantized through the view's format at the view's
// current scale s (q(x) = q(x*s)/s, nearest-even, saturating overflow, so
// +-Inf becomes +-max), over all `count` elements i:
//   bit_stall_rate     = #{ q(w_i) == q(p_i) } / count
//   moved_rate         = #{ w_i != p_i } / count
//   stalled_moved_rate = #{ w_i != p_i and q(w_i) == q(p_i) } / #{ w_i != p_i }
// The comparisons are float comparisons, so NaN on either side is "not
// stalled" and "moved" (NaN == NaN is false), and +0 == -0. The denominator
// is every element, NaN ones included: the host's own bit_stall_rate (the
// failure detector's) is this exact definition, and the two must agree.
// previous == NULL (the first measurement) or count 0: all three NaN; no
// element moved: stalled_moved_rate NaN.
#include <cmath>
#include <limits>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class bit_stall_diagnostic {
public:
    // The values a report draws over training (ABI 1.3; docs/diagnostics.md).
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("stalled_moved_rate", "bit_stall.stalled_moved_rate")
            .title("Stalled updates (mean over weight tensors of the fraction of moved weights whose q(w) "
                   "stayed)")
            .label("stalled fraction of moved weights")
            .summary(ALTGRAD_HEADLINE_MEAN),
    };

    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 3; }

    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i) {
            const altgrad_tensor_view& t = tensors[i];
            const double nan = std::numeric_limits<double>::quiet_NaN();
            double stall = nan, moved = nan, stalled_moved = nan;
            if (t.previous != nullptr && t.count > 0) {
                qw_.resize(t.count);
                qp_.resize(t.count);
                sdk::quantize_like(t, t.data, qw_.data(), ALTGRAD_ROUND_NEAREST_EVEN);
                sdk::quantize_like(t, t.previous, qp_.data(),
                                   ALTGRAD_ROUND_NEAREST_EVEN);  // on the same grid
                uint64_t stalls = 0, moves = 0, stalled_moves = 0;
                for (size_t j = 0; j < t.count; ++j) {
                    const bool same_q = qw_[j] == qp_[j];
                    const bool moved_j = t.data[j] != t.previous[j];
                    stalls += same_q;
                    moves += moved_j;
                    stalled_moves += same_q && moved_j;
                }
                stall = static_cast<double>(stalls) / t.count;
                moved = static_cast<double>(moves) / t.count;
                if (moves > 0) stalled_moved = static_cast<double>(stalled_moves) / moves;
            }
            const uint32_t idx = static_cast<uint32_t>(i);
            out.add(idx, "bit_stall_rate", stall);
            out.add(idx, "moved_rate", moved);
            out.add(idx, "stalled_moved_rate", stalled_moved);
        }
    }

private:
    std::vector<float> qw_, qp_;
};

bit_stall_diagnostic make(const sdk::param_view&) { return bit_stall_diagnostic(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN(make)
