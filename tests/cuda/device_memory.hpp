// What the GPU suites share: device memory that frees itself, and the fixture
// that fails a test at once, saying so, where there is no GPU.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <vector>

namespace cuda_test {

// n elements of T in device memory (and one spare byte, so that a view can
// start past an aligned address), freed at scope exit.
template <class T>
class device_buffer {
public:
    explicit device_buffer(size_t n) : n_(n) {
        if (cudaMalloc(&p_, n * sizeof(T) + 1) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
    }
    explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) { upload(host); }
    ~device_buffer() { cudaFree(p_); }
    device_buffer(const device_buffer&) = delete;
    device_buffer& operator=(const device_buffer&) = delete;
    T* get() const { return static_cast<T*>(p_); }
    void upload(const std::vector<T>& host) {
        if (cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
            throw std::runtime_error("cudaMemcpy to device failed");
    }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        if (cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
            throw std::runtime_error("cudaMemcpy to host failed");
        return host;
    }

private:
    void* p_ = nullptr;
    size_t n_;
};

// Every test of a GPU suite needs a GPU; without one each fails at once, saying so.
class CudaTest : public ::testing::Test {
protected:
    void SetUp() override {
        int devices = 0;
        ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess)
            << "no usable CUDA device: these tests need a GPU";
        ASSERT_GT(devices, 0);
    }
};

}  // namespace cuda_test
