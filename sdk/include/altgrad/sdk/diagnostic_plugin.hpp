// AltGrad SDK: turn a C++ diagnostic class into a diagnostic plugin.
//
// A diagnostic class D provides:
//   uint32_t interests() const;              // bit set of (1u << altgrad_tensor_role)
//   size_t max_values_per_tensor() const;    // see "Buffer size" below
//   void measure(uint64_t step, const altgrad_tensor_view* tensors, size_t n,
//                value_sink& out);
// and a plugin is then a factory plus one macro (the name, version and
// description are the manifest's: export.hpp):
//
//   my_diag make(const altgrad::sdk::param_view&) { return my_diag(); }
//   ALTGRAD_DIAGNOSTIC_PLUGIN(make)
//
// Headlines (ABI 1.3, abi/diagnostic.h): the few values a report draws over
// training. D declares them as a static constexpr array, each built by
// altgrad::sdk::headline(value, series) and named setters:
//
//   static constexpr altgrad_headline headlines[] = {
//       altgrad::sdk::headline("stiffness_mean", "stiffness")
//           .title("Stiffness (mean S = 2^(floor(log2|w|) - M))")
//           .label("mean stiffness")
//           .summary(ALTGRAD_HEADLINE_MEAN)   // the default; or _MAX, _MIN
//           .log_scale(),                     // unit("...") when it has one
//   };
//
// The adapter points the vtable at it and checks it when the plugin compiles
// (names, texts, summary, flags, unique series: a static_assert says which
// rule is broken). A class without `headlines` declares none: reports show
// every value it writes.
//
// The contract the adapter keeps for D:
//  - measure is called only with checked arguments: tensors is non-NULL when
//    n > 0, every view is at least ABI 1.0's size, lives in host memory
//    (device memory is refused with ALTGRAD_STATUS_UNSUPPORTED before D sees
//    it), has data != NULL when count > 0, and a format_ref of at least v1
//    size with non-NULL vtable and instance. Elements may still be NaN/Inf and
//    count may be 0: D handles both (the bundled diagnostics skip non-finite
//    elements and report NaN for what an empty tensor leaves undefined).
//  - Results go through value_sink::add(tensor_index, name, value), which
//    checks the name ([a-z0-9_.]+, shorter than ALTGRAD_VALUE_NAME_CAPACITY),
//    the index (< n or ALTGRAD_ALL_TENSORS) and the host buffer's capacity,
//    and throws plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT) otherwise.
//  - q(x) is computed by calling the tensor's own format, never private
//    arithmetic: quantize_with(view.format, ...), encode_with, decode_with
//    and format_info_of(...) call the format's vtable and turn a non-OK
//    status into plugin_error (with the format's message and name).
//    stiffness_of(info, w, scale) is the grid-spacing formula the stiffness
//    diagnostics share.
//  - A block-scaled view (ABI 1.2 block_scales, tensor.h) has one scale per
//    block: scale_at(view, i) is element i's, quantize_like and
//    quantize_gathered / encode_gathered quantize with the view's own scales.
//    The adapter checks the scales' count against the view's shape and that
//    each is finite and > 0 before D sees them.
//  - Exceptions never cross the boundary: measure and create report them as a
//    status and message (detail::guarded). interests and max_values_per_tensor
//    have no error channel in the ABI: an exception there yields 0.
//  - Arrays are strided by their elements' struct_size (status.h): the sink
//    writes value i at ALTGRAD_ARRAY_AT(items, i) with the host's struct_size
//    kept, and views of a size other than this SDK's are copied into a plain
//    array of this SDK's altgrad_tensor_view before D sees them.
//  - On failure the value buffer's count is set to 0 (no partial results).
//  - Buffer size: the host gives max_values_per_tensor() * (n + 1) entries for
//    a call with n tensors (one tensor's worth for ALTGRAD_ALL_TENSORS
//    entries), which is how the ABI's "plus one" is read here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/call_args.hpp>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/export.hpp>
#include <altgrad/sdk/format_plugin.hpp>  // param_view, detail::guarded
#include <altgrad/sdk/names.hpp>

namespace altgrad::sdk {

// Appends named scalars to the host's value buffer.
class value_sink {
public:
    // items: the host's array, strided by its elements' struct_size (status.h);
    // every element's struct_size is set by the host and at least v1's size.
    value_sink(altgrad_diagnostic_value* items, size_t capacity, size_t tensor_count)
        : items_(items), capacity_(capacity), tensor_count_(tensor_count) {
        if (capacity_ > 0) {
            if (items_ == nullptr)
                throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "value buffer items is NULL");
            stride_ = items_->struct_size;
            if (!ALTGRAD_STRUCT_HAS(items_, altgrad_diagnostic_value, value))
                throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                                   "value buffer items are smaller than ABI 1.0's (struct_size " +
                                       std::to_string(stride_) + ")");
        }
    }

    void add(uint32_t tensor_index, const char* name, double value) {
        if (!is_value_name(name))
            throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                               std::string("value name '") + (name ? name : "(null)") +
                                   "' is not [a-z0-9_.]+ of fewer than 64 characters");
        if (tensor_index != ALTGRAD_ALL_TENSORS && tensor_index >= tensor_count_)
            throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                               "value '" + std::string(name) + "' names tensor " +
                                   std::to_string(tensor_index) + " of " + std::to_string(tensor_count_));
        if (count_ >= capacity_)
            throw plugin_error(
                ALTGRAD_STATUS_INVALID_ARGUMENT,
                "value buffer is full (capacity " + std::to_string(capacity_) + ") at '" + name + "'");
        altgrad_diagnostic_value& v = *ALTGRAD_ARRAY_AT(altgrad_diagnostic_value, items_, count_++);
        const size_t size = stride_;  // the host's element size: keep it, zero what we do not know
        std::memset(&v, 0, size);
        v.struct_size = size;
        v.tensor_index = tensor_index;
        std::memcpy(v.name, name, std::strlen(name) + 1);
        v.value = value;
    }

    size_t count() const { return count_; }
    size_t capacity() const { return capacity_; }

private:
    altgrad_diagnostic_value* items_;
    size_t capacity_;
    size_t tensor_count_;
    size_t stride_ = sizeof(altgrad_diagnostic_value);
    size_t count_ = 0;
};

struct quantize_result {
    uint64_t overflow = 0;   // altgrad_quantize_args.overflow_count
    uint64_t underflow = 0;  // altgrad_quantize_args.underflow_count
};

namespace detail {
inline void check_format_ref(const altgrad_format_ref& f) {
    if (!ALTGRAD_STRUCT_HAS(&f, altgrad_format_ref, name) || f.vtable == nullptr || f.instance == nullptr)
        invalid("format_ref is smaller than ABI 1.0's or has a NULL vtable or instance");
}
inline std::string format_name(const altgrad_format_ref& f) { return f.name ? f.name : "(unnamed)"; }
// fn(f.instance, args..., &error): a status other than OK becomes
// plugin_error with the format's name and message.
template <class Fn, class... Args>
void call_format(const altgrad_format_ref& f, const char* call, Fn fn, Args... args) {
    altgrad_error e = blank_error();
    const altgrad_status s = fn(f.instance, args..., &e);
    if (s != ALTGRAD_STATUS_OK)
        throw plugin_error(s, "format '" + format_name(f) + "': " + call + " failed: " + error_message(e));
}
// A format call's mode: host memory, seed and offset 0.
inline conversion_mode host_mode(float scale, altgrad_rounding rounding, altgrad_overflow overflow) {
    conversion_mode m;
    m.scale = scale;
    m.rounding = rounding;
    m.overflow = overflow;
    return m;
}
}  // namespace detail

// The format's info, through its vtable.
inline altgrad_format_info format_info_of(const altgrad_format_ref& f) {
    detail::check_format_ref(f);
    altgrad_format_info info{};
    info.struct_size = sizeof info;
    detail::call_format(f, "get_info", f.vtable->get_info, &info);
    return info;
}

// q(in * scale) / scale into out, through the format's vtable (host memory).
inline quantize_result quantize_with(const altgrad_format_ref& f, const float* in, float* out, size_t n,
                                     float scale, altgrad_rounding rounding,
                                     altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE) {
    detail::check_format_ref(f);
    altgrad_quantize_args a = quantize_args(in, out, n, detail::host_mode(scale, rounding, overflow));
    detail::call_format(f, "quantize", f.vtable->quantize, &a);
    return {a.overflow_count, a.underflow_count};
}

// Codes of q(in * scale) into `codes` (n codes of format_info_of(f).code_bytes
// bytes each: read them with code_at), through the format's vtable (host
// memory). A NaN input into a format without a NaN code is refused by the
// format (ALTGRAD_STATUS_NOT_REPRESENTABLE): pass finite inputs only.
inline quantize_result encode_with(const altgrad_format_ref& f, const float* in, void* codes, size_t n,
                                   float scale, altgrad_rounding rounding,
                                   altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE) {
    detail::check_format_ref(f);
    altgrad_encode_args a = encode_args(in, codes, n, detail::host_mode(scale, rounding, overflow));
    detail::call_format(f, "encode", f.vtable->encode, &a);
    return {a.overflow_count, a.underflow_count};
}

// value(code) / scale of n codes into out, through the format's vtable.
inline void decode_with(const altgrad_format_ref& f, const void* codes, float* out, size_t n, float scale) {
    detail::check_format_ref(f);
    altgrad_decode_args a = decode_args(codes, out, n, scale);
    detail::call_format(f, "decode", f.vtable->decode, &a);
}

// Code i of an encode/decode buffer whose codes are code_bytes (1, 2 or 4)
// bytes wide, native endian (format.h), and the reverse.
inline uint32_t code_at(const void* codes, uint32_t code_bytes, size_t i) {
    if (code_bytes == 1) return static_cast<const uint8_t*>(codes)[i];
    if (code_bytes == 2) return static_cast<const uint16_t*>(codes)[i];
    return static_cast<const uint32_t*>(codes)[i];
}
inline void put_code(void* codes, uint32_t code_bytes, size_t i, uint32_t code) {
    if (code_bytes == 1) static_cast<uint8_t*>(codes)[i] = static_cast<uint8_t>(code);
    else if (code_bytes == 2) static_cast<uint16_t*>(codes)[i] = static_cast<uint16_t>(code);
    else static_cast<uint32_t*>(codes)[i] = code;
}

// Stiffness: the grid spacing a weight w sits on, in the units of w, for a
// format described by `info` at per-tensor scale s (q(w*s)/s):
//   FLOAT:       S = 2^(floor(log2|y|) - M) / s, y = fl(w*s) the float32
//                product the format sees, M = mantissa_bits. Subnormal-range
//                values follow the formula, not the (constant) subnormal
//                spacing.
//   FIXED_POINT: S = 2^-fraction_bits / s, one constant spacing (1/128 for E0M7).
//   CODEBOOK:    NaN (no M; its spacing is a table's, not a formula's).
// NaN where y is zero or not finite (log2 0 is undefined; callers skip those
// elements). Shared by the stiffness and grad_stiffness diagnostics so both
// measure the same S.
inline double stiffness_of(const altgrad_format_info& info, float w, float scale) {
    const float y = w * scale;
    if (y == 0.0f || !std::isfinite(y)) return std::numeric_limits<double>::quiet_NaN();
    const int m = static_cast<int>(info.mantissa_bits);
    if (info.family == ALTGRAD_FAMILY_FLOAT) {
        int e = 0;
        std::frexp(static_cast<double>(y), &e);  // |y| = f * 2^e, f in [0.5, 1): floor(log2|y|) = e - 1
        return std::ldexp(1.0, e - 1 - m) / scale;
    }
    if (info.family == ALTGRAD_FAMILY_FIXED_POINT) return std::ldexp(1.0, -m) / scale;
    return std::numeric_limits<double>::quiet_NaN();
}

// The finite elements of a view, in order, into `out`; returns how many were
// NaN or +-Inf (skipped).
inline uint64_t finite_elements(const altgrad_tensor_view& t, std::vector<float>& out) {
    out.clear();
    out.reserve(t.count);
    uint64_t skipped = 0;
    for (size_t i = 0; i < t.count; ++i) {
        const float x = t.data[i];
        if (std::isfinite(x)) out.push_back(x);
        else ++skipped;
    }
    return skipped;
}

// ---- The scale of each element (ABI 1.2 block scales, tensor.h).
//
// A view is scaled per tensor (`scale`) or, when block_scales is set, per
// block along its rows. Diagnostics ask for element i's scale with scale_at,
// and quantize through the format with the view's own scales with
// quantize_like (a whole buffer laid out like the view) or quantize_gathered /
// encode_gathered (elements picked out of it, with the scales finite_elements
// picked with them): both use the format call's block-scale path, never
// private arithmetic.

// Whether view t carries block scales (a view of ABI 1.0/1.1 size never does).
inline bool has_block_scales(const altgrad_tensor_view& t) {
    return ALTGRAD_STRUCT_HAS(&t, altgrad_tensor_view, block_count) && t.block_scales != nullptr;
}

// Elements per row of a view: its last dimension (count for a 0-d view).
inline size_t row_length(const altgrad_tensor_view& t) {
    return t.ndim > 0 ? static_cast<size_t>(t.shape[t.ndim - 1]) : t.count;
}

// The scale element i of view t was quantized at: its block's, or `scale`.
inline float scale_at(const altgrad_tensor_view& t, size_t i) {
    if (!has_block_scales(t)) return t.scale;
    const size_t k = row_length(t), per_row = (k + t.block_size - 1) / t.block_size;
    return t.block_scales[i / k * per_row + i % k / t.block_size];
}

// The finite elements of a view, in order, into `out`, and the scale of each
// into `scales`; returns how many were NaN or +-Inf (skipped).
inline uint64_t finite_elements(const altgrad_tensor_view& t, std::vector<float>& out,
                                std::vector<float>& scales) {
    const uint64_t skipped = finite_elements(t, out);
    scales.clear();
    scales.reserve(out.size());
    for (size_t i = 0; i < t.count; ++i)
        if (std::isfinite(t.data[i])) scales.push_back(scale_at(t, i));
    return skipped;
}

namespace detail {
// The mode of a call over n elements picked from view t, each at scales[k]:
// the view's one scale, or one-element blocks (the format's block path).
inline conversion_mode gathered_mode(const altgrad_tensor_view& t, const float* scales,
                                     altgrad_rounding rounding, altgrad_overflow overflow) {
    conversion_mode m = host_mode(t.scale, rounding, overflow);
    if (has_block_scales(t)) m.scale = 1.0f, m.block_scales = scales, m.block_size = 1;
    return m;
}
}  // namespace detail

// q(in[k] * scales[k]) / scales[k] of n elements picked from view t (scales as
// finite_elements gives them), through t's format.
inline quantize_result quantize_gathered(const altgrad_tensor_view& t, const float* in, float* out, size_t n,
                                         const float* scales, altgrad_rounding rounding,
                                         altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE) {
    detail::check_format_ref(t.format);
    altgrad_quantize_args a = quantize_args(in, out, n, detail::gathered_mode(t, scales, rounding, overflow));
    detail::call_format(t.format, "quantize", t.format.vtable->quantize, &a);
    return {a.overflow_count, a.underflow_count};
}

// Codes of q(in[k] * scales[k]) as encode_with, for elements picked from view t.
inline quantize_result encode_gathered(const altgrad_tensor_view& t, const float* in, void* codes, size_t n,
                                       const float* scales, altgrad_rounding rounding,
                                       altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE) {
    detail::check_format_ref(t.format);
    altgrad_encode_args a = encode_args(in, codes, n, detail::gathered_mode(t, scales, rounding, overflow));
    detail::call_format(t.format, "encode", t.format.vtable->encode, &a);
    return {a.overflow_count, a.underflow_count};
}

// q(x*s)/s of t.count elements laid out like view t (its data, its previous,
// or any buffer of its shape) at t's scales, into out. The format's blocks
// run on across rows (format.h), so a view whose rows end in a short block is
// quantized one row per call; otherwise in one call.
inline quantize_result quantize_like(const altgrad_tensor_view& t, const float* in, float* out,
                                     altgrad_rounding rounding,
                                     altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE) {
    if (!has_block_scales(t)) return quantize_with(t.format, in, out, t.count, t.scale, rounding, overflow);
    detail::check_format_ref(t.format);
    const size_t k = row_length(t), per_row = (k + t.block_size - 1) / t.block_size;
    const size_t segment = k % t.block_size == 0 ? t.count : k;
    conversion_mode m = detail::host_mode(1.0f, rounding, overflow);
    m.block_size = t.block_size;
    quantize_result total;
    for (size_t first = 0; first < t.count; first += segment) {
        m.block_scales = t.block_scales + first / k * per_row;
        m.offset = first;
        altgrad_quantize_args a = quantize_args(in + first, out + first, segment, m);
        detail::call_format(t.format, "quantize", t.format.vtable->quantize, &a);
        total.overflow += a.overflow_count;
        total.underflow += a.underflow_count;
    }
    return total;
}

// ---- Headlines (ABI 1.3): what a diagnostic class declares in `headlines`.

// One headline, built with named setters and converted to the ABI's struct
// (struct_size set). Defaults: unit "", ALTGRAD_HEADLINE_MEAN, linear axis;
// title and label have none (a headline without them does not compile).
class headline {
public:
    constexpr headline(const char* value, const char* series)
        : h_{sizeof(altgrad_headline), value, series, nullptr, nullptr, "", ALTGRAD_HEADLINE_MEAN, 0u} {}
    constexpr headline title(const char* text) const { return with(&altgrad_headline::title, text); }
    constexpr headline label(const char* text) const { return with(&altgrad_headline::label, text); }
    constexpr headline unit(const char* text) const { return with(&altgrad_headline::unit, text); }
    constexpr headline summary(altgrad_headline_summary how) const {
        headline h = *this;
        h.h_.summary = how;
        return h;
    }
    constexpr headline log_scale() const {
        headline h = *this;
        h.h_.flags |= ALTGRAD_HEADLINE_LOG_SCALE;
        return h;
    }
    constexpr operator altgrad_headline() const { return h_; }  // NOLINT: the point of the builder

private:
    constexpr headline with(const char* altgrad_headline::*field, const char* text) const {
        headline h = *this;
        h.h_.*field = text;
        return h;
    }
    altgrad_headline h_;
};

namespace detail {

// D::headlines, or none.
template <class D, class = void>
struct declared_headlines {
    static constexpr const altgrad_headline* data() { return nullptr; }
    static constexpr size_t count = 0;
};
template <class D>
struct declared_headlines<D, std::void_t<decltype(D::headlines)>> {
    using array = std::remove_reference_t<decltype(D::headlines)>;
    static_assert(std::is_array_v<array> &&
                      std::is_same_v<std::remove_cv_t<std::remove_extent_t<array>>, altgrad_headline>,
                  "a diagnostic's headlines are `static constexpr altgrad_headline headlines[] = {...}`");
    static constexpr const altgrad_headline* data() { return D::headlines; }
    static constexpr size_t count = std::extent_v<array>;
};

// The rules of abi/diagnostic.h, at compile time (names.hpp's functions).
constexpr bool headline_names_ok(const altgrad_headline* h, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!is_value_name(h[i].value) || !is_value_name(h[i].series)) return false;
    return true;
}
constexpr bool headline_series_free(const altgrad_headline* h, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (is_host_series_name(h[i].series)) return false;
    return true;
}
constexpr bool headline_series_unique(const altgrad_headline* h, size_t n) {
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < i; ++j)
            if (same_text(h[i].series, h[j].series)) return false;
    return true;
}
constexpr bool headline_texts_ok(const altgrad_headline* h, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!is_headline_text(h[i].title, false) || !is_headline_text(h[i].label, false) ||
            !is_headline_text(h[i].unit, true))
            return false;
    return true;
}
constexpr bool headline_kinds_ok(const altgrad_headline* h, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const int summary = static_cast<int>(h[i].summary);
        if (summary < ALTGRAD_HEADLINE_MEAN || summary > ALTGRAD_HEADLINE_MIN) return false;
        if ((h[i].flags & ~ALTGRAD_HEADLINE_LOG_SCALE) != 0 || h[i].struct_size != sizeof(altgrad_headline))
            return false;
    }
    return true;
}

// D's headlines, checked: the vtable's headlines and headline_count.
template <class D>
struct checked_headlines {
    using declared = declared_headlines<D>;
    static constexpr const altgrad_headline* h = declared::data();
    static constexpr size_t n = declared::count;
    static_assert(n <= ALTGRAD_HEADLINE_MAX_COUNT, "more headlines than ALTGRAD_HEADLINE_MAX_COUNT");
    static_assert(headline_names_ok(h, n),
                  "a headline's value or series is not [a-z0-9_.]+ of fewer than 64 characters");
    static_assert(headline_series_free(h, n),
                  "a headline's series is one of the host's own (altgrad::sdk::kHostSeriesNames): prefix it "
                  "with the plugin's name");
    static_assert(headline_series_unique(h, n), "two headlines have the same series");
    static_assert(headline_texts_ok(h, n),
                  "a headline has no title or label, or a title, label or unit of 128 bytes or more or "
                  "with a control character (one line each)");
    static_assert(headline_kinds_ok(h, n),
                  "a headline's summary is not ALTGRAD_HEADLINE_MEAN, _MAX or _MIN, its flags hold bits "
                  "other than ALTGRAD_HEADLINE_LOG_SCALE, or its struct_size is not "
                  "sizeof(altgrad_headline)");
};

}  // namespace detail

// The vtable for diagnostic class D made by Factory(const param_view&).
template <class D, D (*Factory)(const param_view&)>
struct diagnostic_adapter {
    static D& self(altgrad_diagnostic* p) {
        if (p == nullptr) detail::invalid("diagnostic instance is NULL");
        return *reinterpret_cast<D*>(p);
    }

    static altgrad_status create(const altgrad_param_list* params, altgrad_diagnostic** out,
                                 altgrad_error* error) {
        return detail::guarded(error, [&] {
            if (out == nullptr) detail::invalid("create: out is NULL");
            *out = reinterpret_cast<altgrad_diagnostic*>(new D(Factory(param_view(params))));
        });
    }

    static void destroy(altgrad_diagnostic* p) { delete reinterpret_cast<D*>(p); }

    static uint32_t interests(const altgrad_diagnostic* p) {
        if (p == nullptr) return 0;
        try {
            return reinterpret_cast<const D*>(p)->interests();
        } catch (...) {
            return 0;
        }
    }

    static size_t max_values_per_tensor(const altgrad_diagnostic* p) {
        if (p == nullptr) return 0;
        try {
            return reinterpret_cast<const D*>(p)->max_values_per_tensor();
        } catch (...) {
            return 0;
        }
    }

    static void check_view(const altgrad_tensor_view* t, size_t i) {
        const std::string where = "tensor " + std::to_string(i);
        if (!ALTGRAD_STRUCT_HAS(t, altgrad_tensor_view, scale))
            detail::invalid(where + ": view is smaller than ABI 1.0's");
        const int32_t memory = detail::raw_enum(t->memory);  // range-checked before any enum load
        if (memory == ALTGRAD_MEMORY_CUDA)
            throw plugin_error(ALTGRAD_STATUS_UNSUPPORTED,
                               where + ": this diagnostic reads host memory only");
        if (memory != ALTGRAD_MEMORY_HOST) detail::invalid(where + ": unknown memory kind");
        if (t->count > 0 && t->data == nullptr) detail::invalid(where + ": data is NULL with count > 0");
        detail::check_format_ref(t->format);
        if (has_block_scales(*t)) check_block_scales(*t, where);
    }

    // Block scales as tensor.h lays them out: so scale_at reads only inside
    // them, and every scale is one a format call accepts.
    static void check_block_scales(const altgrad_tensor_view& t, const std::string& where) {
        if (t.ndim > ALTGRAD_TENSOR_MAX_DIMS)
            detail::invalid(where + ": ndim is over ALTGRAD_TENSOR_MAX_DIMS");
        const size_t k = row_length(t);
        if (t.block_size == 0 || k == 0 || t.count % k != 0)
            detail::invalid(where + ": block_size is 0, or count is not a whole number of rows");
        const size_t expected = t.count / k * ((k + t.block_size - 1) / t.block_size);
        if (t.block_count != expected)
            detail::invalid(where + ": block_count is " + std::to_string(t.block_count) +
                            ", its shape needs " + std::to_string(expected));
        for (size_t b = 0; b < t.block_count; ++b)
            if (!(std::isfinite(t.block_scales[b]) && t.block_scales[b] > 0.0f))
                detail::invalid(where + ": block scale " + std::to_string(b) + " is not finite and > 0");
    }

    static altgrad_status measure(altgrad_diagnostic* p, uint64_t step, const altgrad_tensor_view* tensors,
                                  size_t n, altgrad_value_buffer* values, altgrad_error* error) {
        if (values != nullptr && ALTGRAD_STRUCT_HAS(values, altgrad_value_buffer, count)) values->count = 0;
        return detail::guarded(error, [&] {
            D& d = self(p);
            if (values == nullptr || !ALTGRAD_STRUCT_HAS(values, altgrad_value_buffer, count))
                detail::invalid("measure: values is NULL or smaller than ABI 1.0's");
            if (values->capacity > 0 && values->items == nullptr)
                detail::invalid("measure: values->items is NULL");
            if (n > 0 && tensors == nullptr)
                detail::invalid("measure: tensors is NULL with tensor_count > 0");
            if (n >= ALTGRAD_ALL_TENSORS) detail::invalid("measure: too many tensors");
            // The views are strided by their struct_size (status.h); D indexes
            // them as a plain array, so views of another size are copied into
            // ours (fields we do not know dropped, fields they lack zeroed).
            std::vector<altgrad_tensor_view> copies;
            if (n > 0 && tensors[0].struct_size != sizeof(altgrad_tensor_view)) {
                if (!ALTGRAD_STRUCT_HAS(&tensors[0], altgrad_tensor_view, scale))
                    detail::invalid("tensor 0: view is smaller than ABI 1.0's");
                copies.resize(n);
                const size_t size = std::min(tensors[0].struct_size, sizeof(altgrad_tensor_view));
                for (size_t i = 0; i < n; ++i) {
                    std::memset(&copies[i], 0, sizeof copies[i]);
                    std::memcpy(&copies[i], ALTGRAD_ARRAY_AT(const altgrad_tensor_view, tensors, i), size);
                    copies[i].struct_size = sizeof copies[i];
                }
                tensors = copies.data();
            }
            for (size_t i = 0; i < n; ++i) check_view(&tensors[i], i);
            value_sink sink(values->items, values->capacity, n);
            d.measure(step, tensors, n, sink);
            values->count = sink.count();
        });
    }

    static const altgrad_diagnostic_vtable* vtable() {
        using headlines = detail::checked_headlines<D>;
        static const altgrad_diagnostic_vtable table = {sizeof(altgrad_diagnostic_vtable),
                                                        &create,
                                                        &destroy,
                                                        &interests,
                                                        &max_values_per_tensor,
                                                        &measure,
                                                        headlines::h,
                                                        headlines::n};
        return &table;
    }
};

}  // namespace altgrad::sdk

// Export the one entry symbol of a diagnostic plugin library (export.hpp: the
// identity comes from the manifest, or is given first):
//   ALTGRAD_DIAGNOSTIC_PLUGIN(FACTORY)
//   ALTGRAD_DIAGNOSTIC_PLUGIN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY)
// and with parameters (PARAM_SPECS: an array of altgrad_param_spec with static
// storage, matching the manifest's [parameters]):
//   ALTGRAD_DIAGNOSTIC_PLUGIN_WITH_PARAMS(FACTORY, PARAM_SPECS, PARAM_COUNT)
//   ALTGRAD_DIAGNOSTIC_PLUGIN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY,
//       PARAM_SPECS, PARAM_COUNT)
// The four tables of a diagnostic plugin's entry.
#define ALTGRAD_SDK_DIAGNOSTIC_TABLES(FACTORY) \
    nullptr, nullptr,                          \
        (::altgrad::sdk::diagnostic_adapter<ALTGRAD_SDK_CLASS_OF(FACTORY), &FACTORY>::vtable()), nullptr

#define ALTGRAD_SDK_DIAGNOSTIC_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, SPECS, \
                                                 COUNT)                                                  \
    ALTGRAD_SDK_ENTRY_EXPANDED(ALTGRAD_KIND_DIAGNOSTIC, NAME, MAJOR, MINOR, PATCH, DESCRIPTION, SPECS,   \
                               COUNT, ALTGRAD_SDK_DIAGNOSTIC_TABLES(FACTORY))
#define ALTGRAD_SDK_DIAGNOSTIC_MANIFEST_WITH_PARAMS(FACTORY, SPECS, COUNT) \
    ALTGRAD_SDK_ENTRY_FROM_MANIFEST(ALTGRAD_KIND_DIAGNOSTIC, SPECS, COUNT, \
                                    ALTGRAD_SDK_DIAGNOSTIC_TABLES(FACTORY))
#define ALTGRAD_SDK_DIAGNOSTIC_GIVEN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY) \
    ALTGRAD_SDK_DIAGNOSTIC_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, nullptr, 0)
#define ALTGRAD_SDK_DIAGNOSTIC_MANIFEST(FACTORY) \
    ALTGRAD_SDK_DIAGNOSTIC_MANIFEST_WITH_PARAMS(FACTORY, nullptr, 0)

#define ALTGRAD_DIAGNOSTIC_PLUGIN_WITH_PARAMS(...)                     \
    ALTGRAD_SDK_DISPATCH_3_8(ALTGRAD_SDK_DIAGNOSTIC_GIVEN_WITH_PARAMS, \
                             ALTGRAD_SDK_DIAGNOSTIC_MANIFEST_WITH_PARAMS, __VA_ARGS__)
#define ALTGRAD_DIAGNOSTIC_PLUGIN(...) \
    ALTGRAD_SDK_DISPATCH_1_6(ALTGRAD_SDK_DIAGNOSTIC_GIVEN, ALTGRAD_SDK_DIAGNOSTIC_MANIFEST, __VA_ARGS__)
