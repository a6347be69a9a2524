// AltGrad SDK: turn a C++ transform class into a transform plugin (ABI 1.4).
//
// Contract of a transform class T:
//   altgrad_transform_info info() const;   // block_size, self_inverse, uses_seed
//   void apply(float* data, size_t rows, size_t cols, uint64_t seed, bool inverse) const;
// apply transforms each of `rows` rows of `cols` elements (row-major) in
// place, under the rules of abi/transform.h (orthogonal, row-local,
// deterministic); it may be called from many threads at once, so it keeps no
// mutable state. A plugin is then a factory plus one macro:
//
//   my_transform make(const altgrad::sdk::param_view& p) {
//       return my_transform(altgrad::sdk::power_of_two_param(p, "d", 16, 128));
//   }
//   ALTGRAD_TRANSFORM_PLUGIN_WITH_PARAMS(make, kParams, 1)
//
// (or ALTGRAD_TRANSFORM_PLUGIN(make) without parameters; both also take the
// identity first, as the other kinds' macros do, export.hpp).
//
// A class may also run on CUDA buffers, where nvcc compiles the plugin (the
// CUDA keyword of altgrad_add_plugin):
//   void apply_cuda(float* data, size_t rows, size_t cols, uint64_t seed, bool inverse,
//                   int32_t device, void* stream) const;   // defined under __CUDACC__
// enqueues the same transform of device memory on `stream` of `device`, with
// the host path's bits (hadamard_cuda.cuh does it for the Hadamard
// transforms). info().memory_kinds then lists CUDA; otherwise host only.
//
// What the adapter guarantees to T before apply() or apply_cuda() runs:
//   - the args struct is non-NULL and at least its ABI 1.4 size, inverse is 0
//     or 1, the memory is a kind memory_kinds lists (host for apply, CUDA for
//     apply_cuda), cols is a multiple of info().block_size,
//     rows * cols fits size_t, the buffers are non-NULL when it is > 0 and do
//     not overlap unless they are the same;
//   - `data` is the output buffer, already holding a copy of the input (on
//     CUDA: a copy enqueued on the call's stream before apply_cuda's work);
//   - nothing about the values: NaN and Inf reach apply.
// Exceptions never cross the boundary: plugin_error becomes its status,
// std::bad_alloc OUT_OF_MEMORY, anything else INTERNAL (detail::guarded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/export.hpp>
#include <altgrad/sdk/format_plugin.hpp>  // param_view, detail::guarded, detail::invalid
#include <altgrad/sdk/raw_enum.hpp>

namespace altgrad::sdk {

// The int parameter `key`, which must be a power of two in [lo, hi]; a
// create-time refusal (INVALID_ARGUMENT) naming the key otherwise.
inline uint32_t power_of_two_param(const param_view& p, const char* key, uint32_t lo, uint32_t hi) {
    const int64_t v = p.get_int(key);
    if (v < static_cast<int64_t>(lo) || v > static_cast<int64_t>(hi) || (v & (v - 1)) != 0)
        detail::invalid(std::string("parameter '") + key + "' must be a power of two in [" +
                        std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
    return static_cast<uint32_t>(v);
}

namespace detail {

// Whether this build of the adapter runs T on CUDA buffers (see the top).
template <class T, class = void>
struct has_cuda_apply : std::false_type {};
template <class T>
struct has_cuda_apply<T, std::void_t<decltype(std::declval<const T&>().apply_cuda(
                             std::declval<float*>(), size_t{}, size_t{}, uint64_t{}, bool{}, int32_t{},
                             std::declval<void*>()))>> : std::true_type {};
template <class T>
constexpr bool transform_runs_on_cuda() {
#ifdef __CUDACC__
    return has_cuda_apply<T>::value;
#else
    return false;
#endif
}

// The checks of an apply call (see the top), given the instance's info.
inline void check_transform_args(const altgrad_transform_args* a, const altgrad_transform_info& info) {
    const uint32_t block_size = info.block_size;
    if (a == nullptr || !ALTGRAD_STRUCT_HAS(a, altgrad_transform_args, cuda_stream))
        invalid("apply: args is NULL or smaller than the v1.4 struct");
    if (a->inverse > 1) invalid("apply: inverse must be 0 or 1, got " + std::to_string(a->inverse));
    const int32_t memory = raw_enum(a->memory);
    if (memory != ALTGRAD_MEMORY_HOST && memory != ALTGRAD_MEMORY_CUDA)
        invalid("apply: unknown memory kind " + std::to_string(memory));
    if ((info.memory_kinds & (1u << memory)) == 0)
        throw plugin_error(ALTGRAD_STATUS_UNSUPPORTED, "apply: this transform plugin takes host memory only");
    if (a->cols % block_size != 0)
        invalid("apply: cols " + std::to_string(a->cols) + " is not a multiple of the block size " +
                std::to_string(block_size));
    if (a->cols != 0 && a->rows > SIZE_MAX / sizeof(float) / a->cols)
        invalid("apply: rows * cols (" + std::to_string(a->rows) + " x " + std::to_string(a->cols) +
                ") is too large");
    const size_t n = a->rows * a->cols;
    if (n > 0 && (a->input == nullptr || a->output == nullptr))
        invalid("apply: input or output is NULL with rows * cols > 0");
    if (n > 0 && a->output != a->input && a->output < a->input + n && a->input < a->output + n)
        invalid("apply: output overlaps input without being the same buffer");
}

}  // namespace detail

// The vtable for transform class T made by Factory(const param_view&).
template <class T, T (*Factory)(const param_view&)>
struct transform_adapter {
    struct instance {
        T transform;
        altgrad_transform_info info;
    };

    static const instance& self(const altgrad_transform* p, const char* call) {
        if (p == nullptr) detail::invalid(std::string(call) + ": transform instance is NULL");
        return *reinterpret_cast<const instance*>(p);
    }

    static altgrad_status create(const altgrad_param_list* params, altgrad_transform** out,
                                 altgrad_error* error) {
        return detail::guarded(error, [&] {
            if (out == nullptr) detail::invalid("create: out is NULL");
            *out = nullptr;
            T transform = Factory(param_view(params));
            altgrad_transform_info info = transform.info();
            info.struct_size = sizeof info;
            info.memory_kinds = (1u << ALTGRAD_MEMORY_HOST) |
                                (detail::transform_runs_on_cuda<T>() ? 1u << ALTGRAD_MEMORY_CUDA : 0u);
            if (info.block_size == 0) throw plugin_error(ALTGRAD_STATUS_INTERNAL, "create: block_size is 0");
            *out = reinterpret_cast<altgrad_transform*>(new instance{std::move(transform), info});
        });
    }

    static void destroy(altgrad_transform* p) { delete reinterpret_cast<instance*>(p); }

    static altgrad_status get_info(const altgrad_transform* p, altgrad_transform_info* info,
                                   altgrad_error* error) {
        return detail::guarded(error, [&] { detail::copy_info(info, self(p, "get_info").info); });
    }

    static altgrad_status apply(const altgrad_transform* p, const altgrad_transform_args* a,
                                altgrad_error* error) {
        return detail::guarded(error, [&] {
            const instance& s = self(p, "apply");
            detail::check_transform_args(a, s.info);
            const size_t n = a->rows * a->cols;
            if (n == 0) return;
#ifdef __CUDACC__
            if constexpr (detail::has_cuda_apply<T>::value) {
                if (a->memory == ALTGRAD_MEMORY_CUDA) return apply_on_cuda(s.transform, *a);
            }
#endif
            if (a->output != a->input) std::memcpy(a->output, a->input, n * sizeof(float));
            s.transform.apply(a->output, a->rows, a->cols, a->seed, a->inverse != 0);
        });
    }

#ifdef __CUDACC__
    // The output takes a copy of the input on the call's stream, then T's work.
    static void apply_on_cuda(const T& t, const altgrad_transform_args& a) {
        const cuda::device_scope on(a.device_index);
        const auto stream = static_cast<cudaStream_t>(a.cuda_stream);
        if (a.output != a.input)
            cuda::check(cudaMemcpyAsync(a.output, a.input, a.rows * a.cols * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream),
                        "cudaMemcpyAsync");
        t.apply_cuda(a.output, a.rows, a.cols, a.seed, a.inverse != 0, a.device_index, a.cuda_stream);
    }
#endif

    static const altgrad_transform_vtable* vtable() {
        static const altgrad_transform_vtable table = {sizeof(altgrad_transform_vtable), &create, &destroy,
                                                       &get_info, &apply};
        return &table;
    }
};

}  // namespace altgrad::sdk

// Export the one entry symbol of a transform plugin library (export.hpp: the
// identity comes from the manifest, or is given first):
//   ALTGRAD_TRANSFORM_PLUGIN(FACTORY)
//   ALTGRAD_TRANSFORM_PLUGIN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY)
//   ALTGRAD_TRANSFORM_PLUGIN_WITH_PARAMS(FACTORY, PARAM_SPECS, PARAM_COUNT)
//   ALTGRAD_TRANSFORM_PLUGIN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY,
//       PARAM_SPECS, PARAM_COUNT)
// The four tables of a transform plugin's entry.
#define ALTGRAD_SDK_TRANSFORM_TABLES(FACTORY) \
    nullptr, nullptr, nullptr,                \
        (::altgrad::sdk::transform_adapter<ALTGRAD_SDK_CLASS_OF(FACTORY), &FACTORY>::vtable())

#define ALTGRAD_SDK_TRANSFORM_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, SPECS,      \
                                                COUNT)                                                       \
    ALTGRAD_SDK_ENTRY_EXPANDED(ALTGRAD_KIND_TRANSFORM, NAME, MAJOR, MINOR, PATCH, DESCRIPTION, SPECS, COUNT, \
                               ALTGRAD_SDK_TRANSFORM_TABLES(FACTORY))
#define ALTGRAD_SDK_TRANSFORM_MANIFEST_WITH_PARAMS(FACTORY, SPECS, COUNT) \
    ALTGRAD_SDK_ENTRY_FROM_MANIFEST(ALTGRAD_KIND_TRANSFORM, SPECS, COUNT, \
                                    ALTGRAD_SDK_TRANSFORM_TABLES(FACTORY))
#define ALTGRAD_SDK_TRANSFORM_GIVEN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY) \
    ALTGRAD_SDK_TRANSFORM_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, nullptr, 0)
#define ALTGRAD_SDK_TRANSFORM_MANIFEST(FACTORY) \
    ALTGRAD_SDK_TRANSFORM_MANIFEST_WITH_PARAMS(FACTORY, nullptr, 0)

#define ALTGRAD_TRANSFORM_PLUGIN_WITH_PARAMS(...)                     \
    ALTGRAD_SDK_DISPATCH_3_8(ALTGRAD_SDK_TRANSFORM_GIVEN_WITH_PARAMS, \
                             ALTGRAD_SDK_TRANSFORM_MANIFEST_WITH_PARAMS, __VA_ARGS__)
#define ALTGRAD_TRANSFORM_PLUGIN(...) \
    ALTGRAD_SDK_DISPATCH_1_6(ALTGRAD_SDK_TRANSFORM_GIVEN, ALTGRAD_SDK_TRANSFORM_MANIFEST, __VA_ARGS__)
