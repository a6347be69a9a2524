// random_hadamard: T = H_d diag(s) / sqrt(d) on consecutive blocks of d
// elements of each row, s a vector of d random signs (altgrad/sdk/hadamard.hpp,
// hadamard_signs: one vector for every block and row, as Transformer Engine
// does), drawn from each call's seed (signs = "per_call") or once from
// sign_seed (signs = "fixed"). T^-1 = T^T = diag(s) H_d / sqrt(d): the signs
// after the butterflies instead of before. docs/transforms.md.
#include <string>
#include <vector>

#include <altgrad/sdk/hadamard.hpp>
#include <altgrad/sdk/transform_plugin.hpp>
#ifdef __CUDACC__
#include <altgrad/sdk/hadamard_cuda.cuh>
#endif

namespace {

// The descriptor's half of each parameter; the manifest declares the same.
const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "d", ALTGRAD_PARAM_INT, "Block size, 16..128, a power of two"},
    {sizeof(altgrad_param_spec), "signs", ALTGRAD_PARAM_STRING, "per_call or fixed"},
    {sizeof(altgrad_param_spec), "sign_seed", ALTGRAD_PARAM_INT, "Key of the fixed sign vector"},
};

class random_hadamard_transform {
public:
    // fixed_signs: the vector for every call (uses_seed 0); empty: per call.
    random_hadamard_transform(uint32_t d, std::vector<float> fixed_signs)
        : d_(d), fixed_(std::move(fixed_signs)) {}

    altgrad_transform_info info() const {
        altgrad_transform_info i{};
        i.block_size = d_;
        i.self_inverse = 0;
        i.uses_seed = fixed_.empty() ? 1 : 0;
        return i;
    }

    void apply(float* data, size_t rows, size_t cols, uint64_t seed, bool inverse) const {
        float drawn[128];  // d <= 128 (make_random_hadamard)
        const float* signs = signs_for(seed, drawn);
        const size_t blocks = rows * (cols / d_);
        if (!inverse) altgrad::sdk::apply_signs(data, blocks, d_, signs);
        altgrad::sdk::fwht(data, blocks, d_);
        if (inverse) altgrad::sdk::apply_signs(data, blocks, d_, signs);
    }
#ifdef __CUDACC__
    void apply_cuda(float* data, size_t rows, size_t cols, uint64_t seed, bool inverse, int32_t device,
                    void* stream) const {
        float drawn[128];
        altgrad::sdk::cuda::hadamard(data, rows * (cols / d_), d_, signs_for(seed, drawn), inverse, device,
                                     stream);
    }
#endif

private:
    // The call's signs: the fixed vector, or drawn from the seed into `drawn`.
    const float* signs_for(uint64_t seed, float* drawn) const {
        if (!fixed_.empty()) return fixed_.data();
        altgrad::sdk::hadamard_signs(seed, d_, drawn);
        return drawn;
    }

    uint32_t d_;
    std::vector<float> fixed_;
};

random_hadamard_transform make_random_hadamard(const altgrad::sdk::param_view& p) {
    const uint32_t d = altgrad::sdk::power_of_two_param(p, "d", 16, 128);
    const std::string signs = p.get_string("signs");
    const int64_t sign_seed = p.get_int("sign_seed");
    if (signs != "per_call" && signs != "fixed")
        throw altgrad::sdk::plugin_error(
            ALTGRAD_STATUS_INVALID_ARGUMENT,
            "parameter 'signs' must be \"per_call\" or \"fixed\", got \"" + signs + "\"");
    if (sign_seed < 0)
        throw altgrad::sdk::plugin_error(
            ALTGRAD_STATUS_INVALID_ARGUMENT,
            "parameter 'sign_seed' must be >= 0, got " + std::to_string(sign_seed));
    std::vector<float> fixed;
    if (signs == "fixed") {
        fixed.resize(d);
        altgrad::sdk::hadamard_signs(static_cast<uint64_t>(sign_seed), d, fixed.data());
    }
    return random_hadamard_transform(d, std::move(fixed));
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_TRANSFORM_PLUGIN_WITH_PARAMS(make_random_hadamard, kParams, sizeof kParams / sizeof kParams[0])
