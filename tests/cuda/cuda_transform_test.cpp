// The Hadamard transforms on GPU buffers (issue #48; hadamard_cuda.cuh): the
// bundled hadamard and random_hadamard plugins, built by nvcc, list CUDA
// memory, and their device path gives the host path's bits, through the C
// ABI as the trainer calls them: forward and inverse, per-call and fixed
// signs, in place and into another buffer, every block size they take, with
// NaN and Inf. Needs a GPU (label cuda); the per-thread code is checked on
// the CPU by altgrad_transform_tests' Fwht.ADeviceThreadsBlockIsTheHostPath.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "device_memory.hpp"
#include "plugin_host.hpp"

namespace {

using agtest::Param;
using cuda_test::CudaTest;
using cuda_test::device_buffer;

class Transform {
public:
    Transform(const std::string& name, const std::vector<Param>& params)
        : vt_(*agtest::plugin_entry(name).transform) {
        const std::vector<altgrad_param> items = agtest::param_items(params);
        const altgrad_param_list list{sizeof(altgrad_param_list), items.data(), items.size()};
        altgrad_error e = altgrad::sdk::blank_error();
        if (vt_.create(&list, &instance_, &e) != ALTGRAD_STATUS_OK)
            throw std::runtime_error(name + ": create failed: " + e.message);
        info_.struct_size = sizeof info_;
        if (vt_.get_info(instance_, &info_, &e) != ALTGRAD_STATUS_OK) throw std::runtime_error("get_info");
    }
    ~Transform() { vt_.destroy(instance_); }
    const altgrad_transform_info& info() const { return info_; }

    // One apply of rows x cols from `in` to `out` in `memory`; the status.
    altgrad_status apply(const float* in, float* out, size_t rows, size_t cols, uint64_t seed, bool inverse,
                         altgrad_memory_kind memory, std::string& message) const {
        altgrad_transform_args a{};
        a.struct_size = sizeof a;
        a.input = in;
        a.output = out;
        a.rows = rows;
        a.cols = cols;
        a.seed = seed;
        a.inverse = inverse ? 1 : 0;
        a.memory = memory;
        a.device_index = 0;
        altgrad_error e = altgrad::sdk::blank_error();
        const altgrad_status s = vt_.apply(instance_, &a, &e);
        message = e.message;
        return s;
    }

private:
    const altgrad_transform_vtable& vt_;
    altgrad_transform* instance_ = nullptr;
    altgrad_transform_info info_{};
};

std::vector<float> random_floats(std::mt19937_64& rng, size_t n) {
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// "" when a and b hold the same bits, a NaN matching any NaN (the GPU writes
// its canonical NaN where x86 keeps an operand's, or its negative "indefinite"
// for inf - inf); else the first element that differs, with both values.
std::string first_difference(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return "sizes differ";
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) && std::isnan(b[i])) continue;
        uint32_t ua, ub;
        std::memcpy(&ua, &a[i], 4);
        std::memcpy(&ub, &b[i], 4);
        if (ua != ub) {
            char text[96];
            std::snprintf(text, sizeof text, "element %zu: %a against %a", i, static_cast<double>(a[i]),
                          static_cast<double>(b[i]));
            return text;
        }
    }
    return "";
}

class CudaTransform : public CudaTest {};

TEST_F(CudaTransform, TheDevicePathIsTheHostsBits) {
    std::mt19937_64 rng(5);
    const size_t rows = 37;
    for (uint32_t d = 16; d <= 128; d *= 2)
        for (const std::vector<Param>& params :
             {std::vector<Param>{Param::integer("d", d)},
              std::vector<Param>{Param::integer("d", d), Param::text("signs", "per_call"),
                                 Param::integer("sign_seed", 0)},
              std::vector<Param>{Param::integer("d", d), Param::text("signs", "fixed"),
                                 Param::integer("sign_seed", 99)}}) {
            const std::string name = params.size() == 1 ? "hadamard" : "random_hadamard";
            SCOPED_TRACE(name + " d = " + std::to_string(d) +
                         (params.size() == 3 ? " " + params[1].string_value : ""));
            const Transform t(name, params);
            ASSERT_NE(t.info().memory_kinds & (1u << ALTGRAD_MEMORY_CUDA), 0u);
            const size_t cols = 3 * d;
            std::vector<float> x = random_floats(rng, rows * cols);
            x[5] = INFINITY;
            x[cols + 2] = NAN;
            for (const bool inverse : {false, true}) {
                std::string message;
                std::vector<float> host(x.size());
                ASSERT_EQ(
                    t.apply(x.data(), host.data(), rows, cols, 77, inverse, ALTGRAD_MEMORY_HOST, message),
                    ALTGRAD_STATUS_OK)
                    << message;
                const device_buffer<float> in(x);
                device_buffer<float> out(x.size());
                ASSERT_EQ(t.apply(in.get(), out.get(), rows, cols, 77, inverse, ALTGRAD_MEMORY_CUDA, message),
                          ALTGRAD_STATUS_OK)
                    << message;
                ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
                EXPECT_EQ(first_difference(out.download(), host), "") << (inverse ? "inverse" : "forward");
                EXPECT_TRUE(same_bits(in.download(), x)) << "the input was changed";
                device_buffer<float> in_place(x);
                ASSERT_EQ(t.apply(in_place.get(), in_place.get(), rows, cols, 77, inverse,
                                  ALTGRAD_MEMORY_CUDA, message),
                          ALTGRAD_STATUS_OK)
                    << message;
                ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
                EXPECT_EQ(first_difference(in_place.download(), host), "") << "in place";
            }
        }
}

}  // namespace
