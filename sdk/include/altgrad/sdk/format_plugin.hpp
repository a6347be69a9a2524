// AltGrad SDK: turn a C++ format class into a format plugin.
//
// A format class (exmy_format, fixed_point_format, codebook_format, or your
// own with the same members) provides:
//   altgrad_format_info info() const;
//   uint32_t total_bits() const;
//   template <altgrad_rounding R, altgrad_overflow O>
//   uint32_t quantize_bits(uint32_t scaled_bits, uint32_t random, element_counts&) const;
//   template <altgrad_rounding R, altgrad_overflow O>
//   uint32_t encode_bits(uint32_t scaled_bits, uint32_t random, element_counts&,
//                        bool& unrepresentable) const;
//   float decode(uint32_t code) const;
// and a plugin is then a factory plus one macro:
//
//   altgrad::sdk::exmy_format make(const altgrad::sdk::param_view&) {
//       return altgrad::sdk::exmy_format({5, 2, 15, altgrad::sdk::exmy_specials::ieee});
//   }
//   ALTGRAD_FORMAT_PLUGIN("e5m2", 1, 0, 0, "OCP FP8 E5M2", make)
//
// The adapter below does what every plugin would otherwise repeat: checks the
// caller's structs (sizes, NULLs, scale, enum values, overlap), loops over the
// array with scaling, draws the stochastic-rounding bits per element from
// (seed, offset + i) (the top random_bits of them), tallies overflow and underflow,
// writes codes of the right
// width, and turns exceptions into status codes and messages. The loops and
// their per-CPU dispatch are quantize_loops.hpp's.
//
// CUDA: when nvcc compiles the plugin (altgrad_add_plugin's CUDA keyword) and
// the format class also provides
//   const K& kernel() const;   // K trivially copyable, element functions ALTGRAD_SDK_HD
// (exmy_format and fixed_point_format do), the adapter accepts
// ALTGRAD_MEMORY_CUDA buffers too and runs K's element functions in the
// kernels of cuda_kernels.cuh; info().memory_kinds says so.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/export.hpp>
#include <altgrad/sdk/philox.hpp>
#include <altgrad/sdk/quantize_loops.hpp>
#include <altgrad/sdk/raw_enum.hpp>
#include <altgrad/sdk/rounding.hpp>
#include <altgrad/sdk/scales.hpp>

namespace altgrad::sdk {

// Read-only access to the validated parameter list passed to create().
class param_view {
public:
    explicit param_view(const altgrad_param_list* list) : list_(list) {}

    int64_t get_int(const char* key) const { return find(key, ALTGRAD_PARAM_INT).int_value; }
    double get_float(const char* key) const { return find(key, ALTGRAD_PARAM_FLOAT).float_value; }
    bool get_bool(const char* key) const { return find(key, ALTGRAD_PARAM_BOOL).bool_value != 0; }
    std::string get_string(const char* key) const { return find(key, ALTGRAD_PARAM_STRING).string_value; }

private:
    const altgrad_param& find(const char* key, altgrad_param_type type) const {
        if (list_ != nullptr)
            for (size_t i = 0; i < list_->count; ++i) {
                const altgrad_param& p = *ALTGRAD_ARRAY_AT(const altgrad_param, list_->items, i);
                if (std::strcmp(p.key, key) != 0) continue;
                if (p.type != type)
                    throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                                       std::string("parameter '") + key + "' has the wrong type");
                return p;
            }
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           std::string("parameter '") + key + "' is missing");
    }
    const altgrad_param_list* list_;
};

namespace detail {

[[noreturn]] inline void invalid(const std::string& why) {
    throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, why);
}

// get_info of every adapter: the instance's info into the caller's struct,
// no further than its struct_size (a caller built against older headers has
// a shorter one), struct_size itself left as the caller set it.
template <class Info>
void copy_info(Info* info, const Info& have) {
    if (info == nullptr || info->struct_size < sizeof(size_t)) invalid("get_info: info is NULL");
    const size_t n = info->struct_size < sizeof have ? info->struct_size : sizeof have;
    std::memcpy(reinterpret_cast<char*>(info) + sizeof(size_t),
                reinterpret_cast<const char*>(&have) + sizeof(size_t), n - sizeof(size_t));
}

// Whether F offers its element arithmetic for the GPU (see the top).
template <class F, class = void>
struct has_device_kernel : std::false_type {};
template <class F>
struct has_device_kernel<F, std::void_t<decltype(std::declval<const F&>().kernel())>> : std::true_type {};

// Whether this build of the adapter runs F on CUDA buffers.
template <class F>
constexpr bool runs_on_cuda() {
#ifdef __CUDACC__
    return has_device_kernel<F>::value;
#else
    return false;
#endif
}

// The memory kind of a call (the raw field) must be one info.memory_kinds lists.
template <class E>
altgrad_memory_kind check_memory(const altgrad_format_info& info, const E& memory_field) {
    const int32_t memory = raw_enum(memory_field);
    if (memory != ALTGRAD_MEMORY_HOST && memory != ALTGRAD_MEMORY_CUDA)
        invalid("unknown memory kind " + std::to_string(memory));
    if ((info.memory_kinds & (1u << memory)) == 0)
        throw plugin_error(ALTGRAD_STATUS_UNSUPPORTED, "this format plugin has no CUDA implementation");
    return static_cast<altgrad_memory_kind>(memory);
}

// The modes and scales of a quantize or encode call, range-checked.
struct conversion_modes {
    altgrad_rounding rounding;
    altgrad_overflow overflow;
    altgrad_memory_kind memory;
    scale_source scales;
    uint32_t random_mask;  // random_bits_mask of the call's random_bits
};

// The mask of a call's random bits (ABI 1.4 random_bits), read only where the
// caller's struct has the field (an older host's ends before it: all 32).
template <class Args>
uint32_t random_mask_of(const Args& a) {
    if (!ALTGRAD_STRUCT_HAS(&a, Args, random_bits)) return ~0u;
    if (a.random_bits > 32) invalid("random_bits " + std::to_string(a.random_bits) + " is not 0..32");
    return random_bits_mask(a.random_bits);
}

// Checks common to quantize and encode (Args: their args structs, which share
// these fields; out: the output or codes buffer).
template <class Args>
conversion_modes check_conversion(const altgrad_format_info& info, const Args& a, const void* out) {
    if (a.count > 0 && (a.input == nullptr || out == nullptr))
        invalid("input or output is NULL with count > 0");
    const int32_t rounding = raw_enum(a.rounding), overflow = raw_enum(a.overflow);
    if (rounding != ALTGRAD_ROUND_NEAREST_EVEN && rounding != ALTGRAD_ROUND_STOCHASTIC &&
        rounding != ALTGRAD_ROUND_TOWARD_ZERO)
        invalid("unknown rounding mode " + std::to_string(rounding));
    if (overflow != ALTGRAD_OVERFLOW_SATURATE && overflow != ALTGRAD_OVERFLOW_NONFINITE)
        invalid("unknown overflow mode " + std::to_string(overflow));
    if ((info.rounding_modes & (1u << rounding)) == 0)
        throw plugin_error(ALTGRAD_STATUS_UNSUPPORTED, "this format does not implement that rounding mode");
    const altgrad_memory_kind memory = check_memory(info, a.memory);
    const scale_source scales = scales_of(a);
    check_scales(scales, a.count, memory == ALTGRAD_MEMORY_HOST, "");
    return {static_cast<altgrad_rounding>(rounding), static_cast<altgrad_overflow>(overflow), memory, scales,
            random_mask_of(a)};
}

// Run body, turning exceptions into a status and a message.
template <class Body>
altgrad_status guarded(altgrad_error* error, Body&& body) noexcept {
    try {
        body();
        return ALTGRAD_STATUS_OK;
    } catch (const plugin_error& e) {
        write_error(error, e.what());
        return e.status();
    } catch (const std::bad_alloc&) {
        write_error(error, "out of memory");
        return ALTGRAD_STATUS_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        write_error(error, e.what());
        return ALTGRAD_STATUS_INTERNAL;
    } catch (...) {
        write_error(error, "unknown exception");
        return ALTGRAD_STATUS_INTERNAL;
    }
}

}  // namespace detail

// The CUDA side, defined in cuda_kernels.cuh, which only nvcc compiles; the
// adapter calls these only where detail::runs_on_cuda<F>().
namespace cuda {
template <class K>
void quantize(const K& kernel, altgrad_quantize_args& args);
template <class K>
void encode(const K& kernel, altgrad_encode_args& args, uint32_t code_bytes);
template <class K>
void decode(const K& kernel, altgrad_decode_args& args, uint32_t code_bytes, uint32_t total_bits);
}  // namespace cuda
}  // namespace altgrad::sdk

#ifdef __CUDACC__
#include <altgrad/sdk/cuda_kernels.cuh>
#endif

// The bundled format classes' loops compiled elsewhere, declared (format_loops.hpp).
#ifdef ALTGRAD_SDK_EXTERN_FORMAT_LOOPS
#include <altgrad/sdk/format_loops.hpp>
#endif

namespace altgrad::sdk {

// The vtable for format class F made by Factory(const param_view&).
template <class F, F (*Factory)(const param_view&)>
struct format_adapter {
    struct instance {
        F format;
        altgrad_format_info info;
    };

    static const instance& self(const altgrad_format* p) {
        if (p == nullptr) detail::invalid("format instance is NULL");
        return *reinterpret_cast<const instance*>(p);
    }

    static altgrad_status create(const altgrad_param_list* params, altgrad_format** out,
                                 altgrad_error* error) {
        return detail::guarded(error, [&] {
            if (out == nullptr) detail::invalid("create: out is NULL");
            F format = Factory(param_view(params));
            altgrad_format_info info = format.info();
            // The adapter owns the device path: CUDA is listed exactly when it can run F there.
            constexpr uint32_t cuda_bit = 1u << ALTGRAD_MEMORY_CUDA;
            info.memory_kinds = (info.memory_kinds & ~cuda_bit) | (detail::runs_on_cuda<F>() ? cuda_bit : 0u);
            // So are the block scales and random bits of a call: the adapter's loops honour both.
            info.capabilities =
                ALTGRAD_FORMAT_CAPABILITY_BLOCK_SCALES | ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS;
            *out = reinterpret_cast<altgrad_format*>(new instance{std::move(format), info});
        });
    }

    static void destroy(altgrad_format* p) { delete reinterpret_cast<instance*>(p); }

    static altgrad_status get_info(const altgrad_format* p, altgrad_format_info* info, altgrad_error* error) {
        return detail::guarded(error, [&] { detail::copy_info(info, self(p).info); });
    }

    static altgrad_status quantize(const altgrad_format* p, altgrad_quantize_args* a, altgrad_error* error) {
        return detail::guarded(error, [&] {
            const instance& s = self(p);
            if (a == nullptr || !ALTGRAD_STRUCT_HAS(a, altgrad_quantize_args, underflow_count))
                detail::invalid("quantize: args is NULL or smaller than the v1 struct");
            const detail::conversion_modes m = detail::check_conversion(s.info, *a, a->output);
            if (a->output != a->input && a->count > 0 && a->output < a->input + a->count &&
                a->input < a->output + a->count)
                detail::invalid("quantize: output overlaps input without being the same buffer");
            if (m.memory == ALTGRAD_MEMORY_CUDA) {
                if constexpr (detail::runs_on_cuda<F>()) cuda::quantize(s.format.kernel(), *a);
                return;
            }
            element_counts counts;
            detail::dispatch_modes(m.rounding, m.overflow, [&](auto r, auto o) {
                constexpr altgrad_rounding R = decltype(r)::value;
                constexpr altgrad_overflow O = decltype(o)::value;
                detail::quantize_dispatch_scale<F, R, O>(s.format, a->input, a->output, a->count, m.scales,
                                                         a->seed, a->offset, m.random_mask, counts);
            });
            a->overflow_count = counts.overflow;
            a->underflow_count = counts.underflow;
        });
    }

    static altgrad_status encode(const altgrad_format* p, altgrad_encode_args* a, altgrad_error* error) {
        return detail::guarded(error, [&] {
            const instance& s = self(p);
            if (a == nullptr || !ALTGRAD_STRUCT_HAS(a, altgrad_encode_args, underflow_count))
                detail::invalid("encode: args is NULL or smaller than the v1 struct");
            const detail::conversion_modes m = detail::check_conversion(s.info, *a, a->codes);
            if (m.memory == ALTGRAD_MEMORY_CUDA) {
                if constexpr (detail::runs_on_cuda<F>())
                    cuda::encode(s.format.kernel(), *a, s.info.code_bytes);
                return;
            }
            element_counts counts;
            size_t first_bad = SIZE_MAX;
            const uint32_t width = s.info.code_bytes;
            detail::dispatch_modes(m.rounding, m.overflow, [&](auto r, auto o) {
                constexpr altgrad_rounding R = decltype(r)::value;
                constexpr altgrad_overflow O = decltype(o)::value;
                auto store = [&](size_t i, uint32_t bits, uint32_t random) {
                    bool bad = false;
                    const uint32_t code = s.format.template encode_bits<R, O>(bits, random, counts, bad);
                    if (bad && first_bad == SIZE_MAX) first_bad = i;
                    if (width == 1) static_cast<uint8_t*>(a->codes)[i] = static_cast<uint8_t>(code);
                    else if (width == 2) static_cast<uint16_t*>(a->codes)[i] = static_cast<uint16_t>(code);
                    else static_cast<uint32_t*>(a->codes)[i] = code;
                };
                if (m.scales.per_block()) {
                    // One run_loop per block, as the block scaling rule reads (see quantize_blocks_body).
                    for (size_t b0 = 0, b = 0; b0 < a->count; ++b) {
                        const size_t n =
                            a->count - b0 < m.scales.block_size ? a->count - b0 : m.scales.block_size;
                        detail::run_loop<R, O, detail::scaling::general>(
                            a->input + b0, n, m.scales.block_scales[b], a->seed, a->offset + b0,
                            m.random_mask,
                            [&](size_t i, uint32_t bits, uint32_t random) { store(b0 + i, bits, random); });
                        b0 += n;
                    }
                } else if (detail::classify_scale(a->scale) == detail::scaling::unit) {
                    detail::run_loop<R, O, detail::scaling::unit>(a->input, a->count, a->scale, a->seed,
                                                                  a->offset, m.random_mask, store);
                } else {
                    detail::run_loop<R, O, detail::scaling::general>(a->input, a->count, a->scale, a->seed,
                                                                     a->offset, m.random_mask, store);
                }
            });
            a->overflow_count = counts.overflow;
            a->underflow_count = counts.underflow;
            if (first_bad != SIZE_MAX)
                throw plugin_error(ALTGRAD_STATUS_NOT_REPRESENTABLE,
                                   "encode: element " + std::to_string(first_bad) +
                                       " is NaN and this format has no NaN code");
        });
    }

    static altgrad_status decode(const altgrad_format* p, altgrad_decode_args* a, altgrad_error* error) {
        return detail::guarded(error, [&] {
            const instance& s = self(p);
            if (a == nullptr || !ALTGRAD_STRUCT_HAS(a, altgrad_decode_args, cuda_stream))
                detail::invalid("decode: args is NULL or smaller than the v1 struct");
            if (a->count > 0 && (a->codes == nullptr || a->output == nullptr))
                detail::invalid("decode: codes or output is NULL with count > 0");
            const altgrad_memory_kind memory = detail::check_memory(s.info, a->memory);
            const scale_source scales = scales_of(*a);
            check_scales(scales, a->count, memory == ALTGRAD_MEMORY_HOST, "decode: ");
            if (memory == ALTGRAD_MEMORY_CUDA) {
                if constexpr (detail::runs_on_cuda<F>())
                    cuda::decode(s.format.kernel(), *a, s.info.code_bytes, s.format.total_bits());
                return;
            }
            const uint32_t width = s.info.code_bytes;
            const uint64_t limit = uint64_t{1} << s.format.total_bits();
            for (size_t i = 0; i < a->count; ++i) {
                const uint32_t code = width == 1   ? static_cast<const uint8_t*>(a->codes)[i]
                                      : width == 2 ? static_cast<const uint16_t*>(a->codes)[i]
                                                   : static_cast<const uint32_t*>(a->codes)[i];
                if (code >= limit)
                    detail::invalid("decode: code " + std::to_string(code) + " at element " +
                                    std::to_string(i) + " has bits above total_bits");
                const float scale = scales.at(i);
                a->output[i] = scale == 1.0f ? s.format.decode(code) : s.format.decode(code) / scale;
            }
        });
    }

    static const altgrad_format_vtable* vtable() {
        static const altgrad_format_vtable table = {
            sizeof(altgrad_format_vtable), &create, &destroy, &get_info, &quantize, &encode, &decode};
        return &table;
    }
};

}  // namespace altgrad::sdk

// Export the one entry symbol of a format plugin library (export.hpp: the
// identity comes from the manifest, or is given first):
//   ALTGRAD_FORMAT_PLUGIN(FACTORY)
//   ALTGRAD_FORMAT_PLUGIN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY)
// and with parameters (PARAM_SPECS: an array of altgrad_param_spec with static
// storage, matching the manifest's [parameters]):
//   ALTGRAD_FORMAT_PLUGIN_WITH_PARAMS(FACTORY, PARAM_SPECS, PARAM_COUNT)
//   ALTGRAD_FORMAT_PLUGIN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY,
//       PARAM_SPECS, PARAM_COUNT)
// The four tables of a format plugin's entry.
#define ALTGRAD_SDK_FORMAT_TABLES(FACTORY)                                                                 \
    (::altgrad::sdk::format_adapter<ALTGRAD_SDK_CLASS_OF(FACTORY), &FACTORY>::vtable()), nullptr, nullptr, \
        nullptr

#define ALTGRAD_SDK_FORMAT_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, SPECS, COUNT) \
    ALTGRAD_SDK_ENTRY_EXPANDED(ALTGRAD_KIND_FORMAT, NAME, MAJOR, MINOR, PATCH, DESCRIPTION, SPECS, COUNT,   \
                               ALTGRAD_SDK_FORMAT_TABLES(FACTORY))
#define ALTGRAD_SDK_FORMAT_MANIFEST_WITH_PARAMS(FACTORY, SPECS, COUNT) \
    ALTGRAD_SDK_ENTRY_FROM_MANIFEST(ALTGRAD_KIND_FORMAT, SPECS, COUNT, ALTGRAD_SDK_FORMAT_TABLES(FACTORY))
#define ALTGRAD_SDK_FORMAT_GIVEN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY) \
    ALTGRAD_SDK_FORMAT_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, nullptr, 0)
#define ALTGRAD_SDK_FORMAT_MANIFEST(FACTORY) ALTGRAD_SDK_FORMAT_MANIFEST_WITH_PARAMS(FACTORY, nullptr, 0)

#define ALTGRAD_FORMAT_PLUGIN_WITH_PARAMS(...)                                                              \
    ALTGRAD_SDK_DISPATCH_3_8(ALTGRAD_SDK_FORMAT_GIVEN_WITH_PARAMS, ALTGRAD_SDK_FORMAT_MANIFEST_WITH_PARAMS, \
                             __VA_ARGS__)
#define ALTGRAD_FORMAT_PLUGIN(...) \
    ALTGRAD_SDK_DISPATCH_1_6(ALTGRAD_SDK_FORMAT_GIVEN, ALTGRAD_SDK_FORMAT_MANIFEST, __VA_ARGS__)
