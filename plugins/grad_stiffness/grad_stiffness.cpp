// grad_stiffness: whether gradients are large enough to move weights on their
// grid. The host passes each quantized weight as a WEIGHT view and its
// gradient as a GRADIENT view of the same name; they are paired by name (a
// view without its partner gives nothing). For a pair, S(w) is the stiffness
// of the SDK's stiffness_of (the stiffness diagnostic's S) in the weight view's
// format at its scale, and over the elements where w and g are finite, w != 0
// and S(w) is defined (not a CODEBOOK format, w*s not flushed to zero):
//   grad_stiffness_corr       = Pearson correlation of |g| and S(w) (NaN with
//                               fewer than 2 elements or zero variance in
//                               either)
//   grad_below_stiffness_frac = #{ |g| < S(w) } / #elements (NaN with none)
// Both are reported on the GRADIENT view's tensor_index. A pair whose counts
// differ, or two views of one role with the same name, is INVALID_ARGUMENT.
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

// Pearson correlation of x and y, two-pass in double.
double pearson(const std::vector<double>& x, const std::vector<double>& y) {
    const size_t n = x.size();
    if (n < 2) return std::numeric_limits<double>::quiet_NaN();
    double mx = 0, my = 0;
    for (size_t k = 0; k < n; ++k) {
        mx += x[k];
        my += y[k];
    }
    mx /= n;
    my /= n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t k = 0; k < n; ++k) {
        sxy += (x[k] - mx) * (y[k] - my);
        sxx += (x[k] - mx) * (x[k] - mx);
        syy += (y[k] - my) * (y[k] - my);
    }
    if (sxx == 0 || syy == 0) return std::numeric_limits<double>::quiet_NaN();
    return sxy / std::sqrt(sxx * syy);
}

class grad_stiffness_diagnostic {
public:
    // The values a report draws over training (ABI 1.3; docs/diagnostics.md).
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("grad_below_stiffness_frac", "grad_stiffness.grad_below_stiffness_frac")
            .title("Gradients below stiffness (mean over weights of the fraction with |g| < S(w))")
            .label("fraction with |g| < S(w)")
            .summary(ALTGRAD_HEADLINE_MEAN),
        sdk::headline("grad_stiffness_corr", "grad_stiffness.grad_stiffness_corr")
            .title("Gradient-stiffness correlation (mean over weights of Pearson r of |g| and S(w))")
            .label("Pearson r")
            .summary(ALTGRAD_HEADLINE_MEAN),
    };

    uint32_t interests() const { return (1u << ALTGRAD_TENSOR_WEIGHT) | (1u << ALTGRAD_TENSOR_GRADIENT); }
    size_t max_values_per_tensor() const { return 2; }

    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        std::map<std::string, size_t> weights, gradients;
        for (size_t i = 0; i < n; ++i) {
            const altgrad_tensor_view& t = tensors[i];
            if (t.role != ALTGRAD_TENSOR_WEIGHT && t.role != ALTGRAD_TENSOR_GRADIENT) continue;
            auto& by_name = t.role == ALTGRAD_TENSOR_WEIGHT ? weights : gradients;
            const std::string name = t.name ? t.name : "";
            if (!by_name.emplace(name, i).second)
                throw sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                                        "tensors " + std::to_string(by_name[name]) + " and " +
                                            std::to_string(i) + " are both " +
                                            (t.role == ALTGRAD_TENSOR_WEIGHT ? "weights" : "gradients") +
                                            " named '" + name + "'");
        }
        for (size_t gi = 0; gi < n; ++gi) {  // in the call's order
            if (tensors[gi].role != ALTGRAD_TENSOR_GRADIENT) continue;
            const std::string name = tensors[gi].name ? tensors[gi].name : "";
            const auto wi = weights.find(name);
            if (wi == weights.end()) continue;
            const altgrad_tensor_view& w = tensors[wi->second];
            const altgrad_tensor_view& g = tensors[gi];
            if (w.count != g.count)
                throw sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                                        "'" + name + "': the weight has " + std::to_string(w.count) +
                                            " elements, its gradient " + std::to_string(g.count));
            const altgrad_format_info info = sdk::format_info_of(w.format);
            abs_g_.clear();
            s_.clear();
            uint64_t below = 0;
            for (size_t j = 0; j < w.count; ++j) {
                if (w.data[j] == 0.0f || !std::isfinite(w.data[j]) || !std::isfinite(g.data[j])) continue;
                const double s = sdk::stiffness_of(info, w.data[j], sdk::scale_at(w, j));
                if (std::isnan(s)) continue;
                abs_g_.push_back(std::fabs(static_cast<double>(g.data[j])));
                s_.push_back(s);
                below += abs_g_.back() < s;
            }
            const uint32_t idx = static_cast<uint32_t>(gi);
            out.add(idx, "grad_stiffness_corr", pearson(abs_g_, s_));
            out.add(idx, "grad_below_stiffness_frac",
                    s_.empty() ? std::numeric_limits<double>::quiet_NaN()
                               : static_cast<double>(below) / s_.size());
        }
    }

private:
    std::vector<double> abs_g_, s_;
};

grad_stiffness_diagnostic make(const sdk::param_view&) { return grad_stiffness_diagnostic(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN(make)
