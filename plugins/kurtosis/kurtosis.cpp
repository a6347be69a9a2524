// kurtosis: how heavy-tailed a quantized layer's input is (outlier features
// are what overflow an 8-bit activation format). Per activation tensor, over
// its finite elements x (NaN/Inf skipped, counted in nonfinite_count), in
// double, two-pass (the mean first, then central moments m_k = mean((x-mean)^k)):
//   kurtosis = m4 / m2^2, Pearson's kurtosis, NOT the excess kurtosis: a normal
//              distribution gives 3, a symmetric two-point one 1. The seeds'
//              alarm threshold (10) is on this scale.
//   mean, std = sqrt(m2) (population), absmax = max |x|.
// No finite element: NaN for all four. One finite element, or all equal (zero
// variance): kurtosis NaN (mean, std 0 and absmax still reported).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class kurtosis_diagnostic {
public:
    // The values a report draws over training (ABI 1.3; docs/diagnostics.md).
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("kurtosis", "kurtosis.kurtosis")
            .title("Activation kurtosis (largest m4/m2^2 over tensors; 3 for a normal distribution)")
            .label("kurtosis")
            .summary(ALTGRAD_HEADLINE_MAX)
            .log_scale(),
    };

    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_ACTIVATION; }
    size_t max_values_per_tensor() const { return 5; }

    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i) {
            const altgrad_tensor_view& t = tensors[i];
            const uint64_t nonfinite = sdk::finite_elements(t, x_);
            const double nan = std::numeric_limits<double>::quiet_NaN();
            double kurtosis = nan, mean = nan, std_dev = nan, absmax = nan;
            if (!x_.empty()) {
                double sum = 0;
                absmax = 0;
                for (const float v : x_) {
                    sum += v;
                    absmax = std::max(absmax, std::fabs(static_cast<double>(v)));
                }
                mean = sum / x_.size();
                double m2 = 0, m4 = 0;
                for (const float v : x_) {
                    const double d2 = (v - mean) * (v - mean);
                    m2 += d2;
                    m4 += d2 * d2;
                }
                m2 /= x_.size();
                m4 /= x_.size();
                std_dev = std::sqrt(m2);
                if (x_.size() >= 2 && m2 > 0) kurtosis = m4 / (m2 * m2);
            }
            const uint32_t idx = static_cast<uint32_t>(i);
            out.add(idx, "kurtosis", kurtosis);
            out.add(idx, "mean", mean);
            out.add(idx, "std", std_dev);
            out.add(idx, "absmax", absmax);
            out.add(idx, "nonfinite_count", static_cast<double>(nonfinite));
        }
    }

private:
    std::vector<float> x_;
};

kurtosis_diagnostic make(const sdk::param_view&) { return kurtosis_diagnostic(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN(make)
