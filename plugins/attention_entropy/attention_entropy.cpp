// attention_entropy: how spread out each head's attention is; a head whose
// entropy collapses towards 0 attends to one key (attention-entropy collapse
// precedes loss spikes). A view is a softmax output [batch B, head H, query T,
// key K], each row p a distribution over keys (causal rows are zero after
// their own position). Per tensor, per head h:
//   entropy_head_<h> = the mean over batch and query rows of
//                      H(p) = -sum_j p_j ln p_j, in nats (0 ln 0 = 0; a row
//                      with a NaN/Inf element is skipped; a negative p_j makes
//                      the row NaN: it is not a distribution)
// and over heads: entropy_mean (their mean) and entropy_min (the lowest); a
// head with no row to measure (all skipped, B, T or K zero) is NaN, and so
// then are entropy_mean and entropy_min. A uniform row over k keys gives ln k,
// a one-hot row 0.
// Shapes: ndim 4 as above; any other ndim, a shape whose product is not
// count, or more heads than the max_heads parameter is INVALID_ARGUMENT.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

[[noreturn]] void invalid(const altgrad_tensor_view& t, const std::string& why) {
    throw sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                            "tensor '" + std::string(t.name ? t.name : "") + "': " + why);
}

class attention_entropy_diagnostic {
public:
    // The values a report draws over training (ABI 1.3; docs/diagnostics.md).
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("entropy_min", "attention_entropy.entropy_min")
            .title("Lowest head entropy (smallest over tensors and heads of mean -sum p ln p)")
            .label("entropy")
            .unit("nats")
            .summary(ALTGRAD_HEADLINE_MIN),
        sdk::headline("entropy_mean", "attention_entropy.entropy_mean")
            .title("Attention entropy (mean over tensors and heads of mean -sum p ln p)")
            .label("entropy")
            .unit("nats")
            .summary(ALTGRAD_HEADLINE_MEAN),
    };

    explicit attention_entropy_diagnostic(int64_t max_heads) : max_heads_(max_heads) {}

    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_ATTENTION_PROBS; }
    size_t max_values_per_tensor() const { return static_cast<size_t>(max_heads_) + 2; }

    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i) {
            const altgrad_tensor_view& t = tensors[i];
            int64_t dims[4] = {1, 1, 1, 1};  // B, H, T, K
            if (t.ndim == 4) std::copy(t.shape, t.shape + 4, dims);
            else
                invalid(t, "ndim is " + std::to_string(t.ndim) +
                               "; attention probabilities are 4-d [batch, head, query, key]");
            const int64_t batch = dims[0], heads = dims[1], rows = dims[2], keys = dims[3];
            if (batch < 0 || heads < 0 || rows < 0 || keys < 0 ||
                static_cast<double>(batch) * heads * rows * keys != static_cast<double>(t.count))
                invalid(t, "shape [" + std::to_string(batch) + ", " + std::to_string(heads) + ", " +
                               std::to_string(rows) + ", " + std::to_string(keys) + "] does not hold its " +
                               std::to_string(t.count) + " elements");
            if (heads > max_heads_)
                invalid(t, std::to_string(heads) + " heads, more than max_heads = " +
                               std::to_string(max_heads_) + " (raise the parameter)");
            sum_.assign(static_cast<size_t>(heads), 0.0);
            rows_.assign(static_cast<size_t>(heads), 0);
            const float* p = t.data;
            if (keys > 0)  // rows of no keys hold no distribution: every head NaN
                for (int64_t b = 0; b < batch; ++b)
                    for (int64_t h = 0; h < heads; ++h)
                        for (int64_t r = 0; r < rows; ++r, p += keys) {
                            if (!std::all_of(p, p + keys, [](float x) { return std::isfinite(x); })) continue;
                            double entropy = 0;
                            for (int64_t j = 0; j < keys; ++j)
                                if (p[j] != 0.0f) entropy -= p[j] * std::log(static_cast<double>(p[j]));
                            sum_[h] += entropy;
                            ++rows_[h];
                        }
            const double nan = std::numeric_limits<double>::quiet_NaN();
            double total = 0, lowest = heads > 0 ? std::numeric_limits<double>::infinity() : nan;
            const uint32_t idx = static_cast<uint32_t>(i);
            for (int64_t h = 0; h < heads; ++h) {
                const double e = rows_[h] > 0 ? sum_[h] / rows_[h] : nan;
                out.add(idx, ("entropy_head_" + std::to_string(h)).c_str(), e);
                total += e;  // a NaN head makes both aggregates NaN
                lowest = std::isnan(e) || std::isnan(lowest) ? nan : std::min(lowest, e);
            }
            out.add(idx, "entropy_mean", heads > 0 ? total / heads : nan);
            out.add(idx, "entropy_min", lowest);
        }
    }

private:
    int64_t max_heads_;
    std::vector<double> sum_;
    std::vector<uint64_t> rows_;
};

attention_entropy_diagnostic make(const sdk::param_view& p) {
    const int64_t max_heads = p.get_int("max_heads");
    if (max_heads < 1 || max_heads > 1024)
        throw sdk::plugin_error(
            ALTGRAD_STATUS_INVALID_ARGUMENT,
            "parameter 'max_heads' is " + std::to_string(max_heads) + "; it must be 1..1024");
    return attention_entropy_diagnostic(max_heads);
}

const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "max_heads", ALTGRAD_PARAM_INT, "the most heads a tensor may have"},
};
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN_WITH_PARAMS(make, kParams, sizeof kParams / sizeof kParams[0])
