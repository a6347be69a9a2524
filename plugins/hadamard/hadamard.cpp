// hadamard: y = H_d x / sqrt(d) on consecutive blocks of d elements of each
// row (Sylvester's H_d, altgrad/sdk/hadamard.hpp), orthonormal and its own
// inverse, the same for every block, row and call. docs/transforms.md.
#include <altgrad/sdk/hadamard.hpp>
#include <altgrad/sdk/transform_plugin.hpp>
#ifdef __CUDACC__
#include <altgrad/sdk/hadamard_cuda.cuh>
#endif

namespace {

// The descriptor's half of the parameter; the manifest declares the same.
const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "d", ALTGRAD_PARAM_INT, "Block size, 16..128, a power of two"},
};

class hadamard_transform {
public:
    explicit hadamard_transform(uint32_t d) : d_(d) {}

    altgrad_transform_info info() const {
        altgrad_transform_info i{};
        i.block_size = d_;
        i.self_inverse = 1;
        i.uses_seed = 0;
        return i;
    }

    // H_d is symmetric and orthonormal: the inverse is the transform itself.
    void apply(float* data, size_t rows, size_t cols, uint64_t, bool) const {
        altgrad::sdk::fwht(data, rows * (cols / d_), d_);
    }
#ifdef __CUDACC__
    void apply_cuda(float* data, size_t rows, size_t cols, uint64_t, bool, int32_t device,
                    void* stream) const {
        altgrad::sdk::cuda::hadamard(data, rows * (cols / d_), d_, nullptr, false, device, stream);
    }
#endif

private:
    uint32_t d_;
};

hadamard_transform make_hadamard(const altgrad::sdk::param_view& p) {
    return hadamard_transform(altgrad::sdk::power_of_two_param(p, "d", 16, 128));
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_TRANSFORM_PLUGIN_WITH_PARAMS(make_hadamard, kParams, sizeof kParams / sizeof kParams[0])
