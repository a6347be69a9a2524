// ulp: weight movement counted in the format's own grid. Weights w (now) and
// p (`previous`, at the previous measurement) are encoded through the view's
// format at its current scale s (a block-scaled view: each element at its
// block's scale, p on the same grid as w; nearest-even, saturating), and each code is
// mapped to its ordinal: its position among the format's finite values in
// value order, +0 and -0 sharing one position. Over the elements where both
// w and p are finite (NaN/Inf skipped):
//   ulp_distance_mean  = mean |ordinal(q(w)) - ordinal(q(p))|
//   ulp_distance_max   = the largest such distance
//   ulp_moved_fraction = the fraction with distance >= 1 (= 1 - bit_stall_rate
//                        when every element is finite)
// and over the finite elements of w, whatever `previous` is:
//   ulp_size_mean      = mean spacing at q(w): the distance from q(w) to its
//                        neighbour away from zero (the next larger magnitude;
//                        at +0, the smallest positive value), divided by s so
//                        it is in the units of w; at max finite or lowest
//                        finite, where there is none, the neighbour toward zero.
// Ordinals: formats of up to 16 bits decode every code and sort the finite
// values (no assumption about the code layout). Wider formats cannot be
// tabulated (fp32 has 2^32 codes); there the ordinal is arithmetic on the
// layout format.h defines: FLOAT is sign-magnitude with the sign in the top bit
// and magnitude codes ascending in value (ordinal = +-magnitude code),
// FIXED_POINT is two's complement (ordinal = the integer). A CODEBOOK wider than
// 16 bits has no ordinal here: NaN for all four.
// previous == NULL, or no element finite on both sides: NaN for the three
// distance values; no finite element of w: NaN ulp_size_mean.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

// A format's finite values in value order: code -> ordinal and back.
class value_order {
public:
    value_order(const altgrad_format_ref& f, const altgrad_format_info& info) : info_(info) {
        const uint32_t bits = info.total_bits;
        if (bits <= 16) {
            tabulate(f);
        } else if (info.family == ALTGRAD_FAMILY_FLOAT || info.family == ALTGRAD_FAMILY_FIXED_POINT) {
            arithmetic_ = true;
            // The ends of the finite range, found through the format itself.
            const float ends[2] = {static_cast<float>(info.lowest_finite),
                                   static_cast<float>(info.max_finite)};
            uint32_t codes[2] = {};
            sdk::encode_with(f, ends, codes, 2, 1.0f, ALTGRAD_ROUND_NEAREST_EVEN);
            lo_ = ordinal(sdk::code_at(codes, info.code_bytes, 0));
            hi_ = ordinal(sdk::code_at(codes, info.code_bytes, 1));
        } else {
            usable_ = false;
        }
    }

    bool usable() const { return usable_; }
    int64_t lowest() const { return lo_; }
    int64_t highest() const { return hi_; }

    // Codes here are encode's output for finite inputs, so always finite.
    int64_t ordinal(uint32_t code) const {
        if (!arithmetic_) return ordinal_of_code_[code];
        const uint32_t bits = info_.total_bits;
        if (info_.family == ALTGRAD_FAMILY_FIXED_POINT)  // two's complement: sign-extend
            return static_cast<int64_t>(code) - ((code >> (bits - 1)) & 1u ? (int64_t{1} << bits) : 0);
        if (!info_.is_signed) return code;
        const uint32_t magnitude = code & ((1u << (bits - 1)) - 1u);
        return (code >> (bits - 1)) ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    }

    uint32_t code(int64_t ordinal) const {
        if (!arithmetic_) return code_of_ordinal_[static_cast<size_t>(ordinal)];
        const uint32_t bits = info_.total_bits;
        const uint32_t mask = bits == 32 ? ~0u : (1u << bits) - 1u;
        if (info_.family == ALTGRAD_FAMILY_FIXED_POINT || !info_.is_signed)
            return static_cast<uint32_t>(ordinal) & mask;
        return ordinal >= 0 ? static_cast<uint32_t>(ordinal)
                            : (1u << (bits - 1)) | static_cast<uint32_t>(-ordinal);
    }

private:
    void tabulate(const altgrad_format_ref& f) {
        const size_t n = size_t{1} << info_.total_bits;
        std::vector<uint32_t> codes(n);
        for (size_t c = 0; c < n; ++c)
            sdk::put_code(codes.data(), info_.code_bytes, c, static_cast<uint32_t>(c));
        std::vector<float> values(n);
        sdk::decode_with(f, codes.data(), values.data(), n, 1.0f);
        std::vector<std::pair<float, uint32_t>> finite;
        for (size_t c = 0; c < n; ++c)
            if (std::isfinite(values[c])) finite.emplace_back(values[c], static_cast<uint32_t>(c));
        // Stable on codes ascending: of +0 and -0 (equal as floats) the lower code
        // comes first and stands for both.
        std::stable_sort(finite.begin(), finite.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        ordinal_of_code_.assign(n, -1);
        for (size_t k = 0; k < finite.size(); ++k) {
            if (k == 0 || finite[k].first != finite[k - 1].first)
                code_of_ordinal_.push_back(finite[k].second);
            ordinal_of_code_[finite[k].second] = static_cast<int64_t>(code_of_ordinal_.size()) - 1;
        }
        usable_ = !code_of_ordinal_.empty();
        lo_ = 0;
        hi_ = static_cast<int64_t>(code_of_ordinal_.size()) - 1;
    }

    altgrad_format_info info_;
    bool usable_ = true, arithmetic_ = false;
    int64_t lo_ = 0, hi_ = -1;
    std::vector<int64_t> ordinal_of_code_;
    std::vector<uint32_t> code_of_ordinal_;
};

class ulp_diagnostic {
public:
    // The values a report draws over training (ABI 1.3; docs/diagnostics.md).
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("ulp_distance_mean", "ulp.ulp_distance_mean")
            .title("ULP movement (mean over weight tensors of mean |ord(q(w)) - ord(q(previous))|)")
            .label("mean distance")
            .unit("ULP")
            .summary(ALTGRAD_HEADLINE_MEAN),
        sdk::headline("ulp_moved_fraction", "ulp.ulp_moved_fraction")
            .title("Weights moved on the grid (mean over weight tensors of the fraction moved >= 1 ULP)")
            .label("moved fraction")
            .summary(ALTGRAD_HEADLINE_MEAN),
    };

    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 4; }

    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        orders_.clear();  // a format_ref is valid for one call only: never reuse a table across calls
        for (size_t i = 0; i < n; ++i) {
            const altgrad_tensor_view& t = tensors[i];
            const double nan = std::numeric_limits<double>::quiet_NaN();
            double dist_mean = nan, dist_max = nan, moved = nan, size_mean = nan;
            const altgrad_format_info info = sdk::format_info_of(t.format);
            const value_order& order = order_of(t.format, info);
            gather(t);
            if (order.usable() && !x_.empty()) {
                cx_.resize(x_.size());
                sdk::encode_gathered(t, x_.data(), cx_.data(), x_.size(), xs_.data(),
                                     ALTGRAD_ROUND_NEAREST_EVEN);
                size_mean = mean_spacing(t, info, order);
                if (!p_.empty()) {
                    cp_.resize(p_.size());
                    sdk::encode_gathered(t, p_.data(), cp_.data(), p_.size(), ps_.data(),
                                         ALTGRAD_ROUND_NEAREST_EVEN);
                    double sum = 0, max = 0;
                    uint64_t moves = 0;
                    for (size_t k = 0; k < p_.size(); ++k) {
                        const int64_t d =
                            std::llabs(order.ordinal(sdk::code_at(cx_.data(), info.code_bytes, pair_[k])) -
                                       order.ordinal(sdk::code_at(cp_.data(), info.code_bytes, k)));
                        sum += static_cast<double>(d);
                        max = std::max(max, static_cast<double>(d));
                        moves += d >= 1;
                    }
                    dist_mean = sum / p_.size();
                    dist_max = max;
                    moved = static_cast<double>(moves) / p_.size();
                }
            }
            const uint32_t idx = static_cast<uint32_t>(i);
            out.add(idx, "ulp_distance_mean", dist_mean);
            out.add(idx, "ulp_distance_max", dist_max);
            out.add(idx, "ulp_moved_fraction", moved);
            out.add(idx, "ulp_size_mean", size_mean);
        }
    }

private:
    const value_order& order_of(const altgrad_format_ref& f, const altgrad_format_info& info) {
        const auto key =
            std::make_pair(static_cast<const void*>(f.vtable), static_cast<const void*>(f.instance));
        auto it = orders_.find(key);
        if (it == orders_.end()) it = orders_.emplace(key, value_order(f, info)).first;
        return it->second;
    }

    // x_: the finite elements of w; p_: the finite previous values where w is
    // finite too, pair_[k] the index into x_ of p_[k]'s element; xs_, ps_
    // their scales.
    void gather(const altgrad_tensor_view& t) {
        sdk::finite_elements(t, x_, xs_);
        p_.clear();
        ps_.clear();
        pair_.clear();
        if (t.previous == nullptr) return;
        for (size_t j = 0, k = 0; j < t.count; ++j) {
            if (!std::isfinite(t.data[j])) continue;
            if (std::isfinite(t.previous[j])) {
                p_.push_back(t.previous[j]);
                ps_.push_back(xs_[k]);
                pair_.push_back(k);
            }
            ++k;
        }
    }

    // Mean over x_ (encoded in cx_) of |neighbour away from zero - q|: the
    // format's own values (decoded at scale 1, exact) and the gap divided by
    // the element's scale in double, so a scale that is not a power of two
    // costs no float32 rounding.
    double mean_spacing(const altgrad_tensor_view& t, const altgrad_format_info& info,
                        const value_order& order) {
        if (order.lowest() == order.highest())
            return std::numeric_limits<double>::quiet_NaN();  // one value: no spacing
        const size_t m = x_.size();
        q_.resize(m);
        sdk::decode_with(t.format, cx_.data(), q_.data(), m, 1.0f);
        neighbour_.resize(m);
        for (size_t k = 0; k < m; ++k) {
            const int64_t o = order.ordinal(sdk::code_at(cx_.data(), info.code_bytes, k));
            const int64_t away = q_[k] < 0 ? o - 1 : o + 1;
            const int64_t next = away < order.lowest() || away > order.highest() ? 2 * o - away : away;
            sdk::put_code(neighbour_.data(), info.code_bytes, k, order.code(next));
        }
        nq_.resize(m);
        sdk::decode_with(t.format, neighbour_.data(), nq_.data(), m, 1.0f);
        double sum = 0;
        for (size_t k = 0; k < m; ++k)
            sum += std::fabs(static_cast<double>(nq_[k]) - static_cast<double>(q_[k])) / xs_[k];
        return sum / m;
    }

    std::map<std::pair<const void*, const void*>, value_order> orders_;
    std::vector<float> x_, p_, xs_, ps_, q_, nq_;
    std::vector<size_t> pair_;
    std::vector<uint32_t> cx_, cp_, neighbour_;  // codes, code_bytes each (read with code_at)
};

ulp_diagnostic make(const sdk::param_view&) { return ulp_diagnostic(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN(make)
