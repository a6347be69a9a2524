#include "plugins/format_handle.hpp"

#include <algorithm>
#include <cmath>

#include "plugins/params.hpp"
#include "util/abi_names.hpp"
#include "util/error.hpp"

namespace altgrad::host {

format_handle::format_handle(std::shared_ptr<const loaded_plugin> plugin, const host::given_params& params,
                             const std::string& where)
    : plugin_instance(std::move(plugin), params, where) {
    info_.struct_size = sizeof info_;
    call("get_info", vtable().get_info, &info_);

    // Checks a host can rely on later; the enums first, before anything loads them.
    const altgrad_format_info& i = info_;
    auto check = [&](bool ok, const std::string& what) {
        if (!ok) bad("get_info", what);
    };
    check(plugin_enum(i.family, format_family_names()).has_value(),
          plugin_enum_error("family", i.family, format_family_names()));
    check(plugin_enum(i.zero, zero_kind_names()).has_value(),
          plugin_enum_error("zero", i.zero, zero_kind_names()));
    check(i.total_bits >= 1 && i.total_bits <= 32,
          "total_bits " + std::to_string(i.total_bits) + " is not 1..32");
    const uint32_t want_bytes = i.total_bits <= 8 ? 1u : i.total_bits <= 16 ? 2u : 4u;
    check(i.code_bytes == want_bytes, "code_bytes " + std::to_string(i.code_bytes) + " should be " +
                                          std::to_string(want_bytes) + " for " +
                                          std::to_string(i.total_bits) + " bits");
    check(std::isfinite(i.max_finite) && i.max_finite > 0, "max_finite must be finite and > 0");
    check(std::isfinite(i.lowest_finite) && i.lowest_finite <= i.max_finite, "lowest_finite is invalid");
    check(i.min_normal >= 0 && i.min_normal <= i.max_finite, "min_normal is invalid");
    check((i.rounding_modes & (1u << ALTGRAD_ROUND_NEAREST_EVEN)) != 0, "round-to-nearest-even is required");
    check((i.memory_kinds & (1u << ALTGRAD_MEMORY_HOST)) != 0, "host memory is required");
}

altgrad_format_ref format_handle::ref() const {
    return altgrad_format_ref{sizeof(altgrad_format_ref), &vtable(), instance(), name().c_str()};
}

bool format_handle::takes_block_scales() const {
    // 1.2 and 1.3 predate capabilities: for them the version implies block scales (format.h).
    const altgrad_version v = plugin().entry->abi_version;
    if (v.major == 1 && (v.minor == 2 || v.minor == 3)) return true;
    return (info_.capabilities & ALTGRAD_FORMAT_CAPABILITY_BLOCK_SCALES) != 0;
}

bool format_handle::takes_random_bits() const {
    return (info_.capabilities & ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS) != 0;
}

void format_handle::check_random_bits(const char* what, const quantize_options& o) const {
    if (o.rounding != ALTGRAD_ROUND_STOCHASTIC || o.random_bits == 0 || o.random_bits == 32) return;
    if (o.random_bits > 32) bad(what, "random_bits " + std::to_string(o.random_bits) + " is not 0..32");
    if (!takes_random_bits())
        bad(what, "stochastic rounding with " + std::to_string(o.random_bits) +
                      " random bits, but the plugin does not declare ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS "
                      "(it would use all 32)");
}

template <class Call>
quantize_counts format_handle::for_each_block(const char* what, size_t n, const quantize_options& o,
                                              Call&& call) const {
    if (o.block_size == 0) bad(what, "block_size is 0 with block scales set");
    if (o.memory != ALTGRAD_MEMORY_HOST)
        bad(what,
            "this plugin does not declare ALTGRAD_FORMAT_CAPABILITY_BLOCK_SCALES (ABI " +
                std::to_string(plugin().entry->abi_version.major) + "." +
                std::to_string(plugin().entry->abi_version.minor) +
                "); the host splits its calls per block, which needs the scales in host memory (declare "
                "the capability to use them on the GPU)");
    quantize_counts total;
    for (size_t first = 0, block = 0; first < n; ++block) {
        quantize_options one = o;
        one.block_scales = nullptr;
        one.block_size = 0;
        one.scale = o.block_scales[block];
        one.offset = o.offset + first;
        const size_t count = std::min(o.block_size, n - first);
        const quantize_counts c = call(first, count, one);
        total.overflow += c.overflow;
        total.underflow += c.underflow;
        first += count;
    }
    return total;
}

quantize_counts format_handle::quantize(const float* in, float* out, size_t n,
                                        const quantize_options& o) const {
    check_random_bits("quantize", o);
    if (o.block_scales != nullptr && !takes_block_scales())
        return for_each_block("quantize", n, o, [&](size_t first, size_t count, const quantize_options& one) {
            return quantize(in + first, out + first, count, one);
        });
    altgrad_quantize_args a = sdk::quantize_args(in, out, n, o);
    call("quantize", vtable().quantize, &a);
    return {a.overflow_count, a.underflow_count};
}

quantize_counts format_handle::encode(const float* in, void* codes, size_t n,
                                      const quantize_options& o) const {
    check_random_bits("encode", o);
    if (o.block_scales != nullptr && !takes_block_scales())
        return for_each_block("encode", n, o, [&](size_t first, size_t count, const quantize_options& one) {
            return encode(in + first, static_cast<char*>(codes) + first * info_.code_bytes, count, one);
        });
    altgrad_encode_args a = sdk::encode_args(in, codes, n, o);
    call("encode", vtable().encode, &a);
    return {a.overflow_count, a.underflow_count};
}

void format_handle::decode(const void* codes, float* out, size_t n, float scale, const float* block_scales,
                           size_t block_size) const {
    if (block_scales != nullptr && !takes_block_scales()) {
        quantize_options o;
        o.block_scales = block_scales;
        o.block_size = block_size;
        for_each_block("decode", n, o, [&](size_t first, size_t count, const quantize_options& one) {
            decode(static_cast<const char*>(codes) + first * info_.code_bytes, out + first, count, one.scale);
            return quantize_counts{};
        });
        return;
    }
    altgrad_decode_args a =
        sdk::decode_args(codes, out, n, scale, ALTGRAD_MEMORY_HOST, 0, block_scales, block_size);
    call("decode", vtable().decode, &a);
}

std::vector<float> format_handle::decode_all_codes() const {
    if (info_.total_bits > 16) bad("decode", "more than 16 bits: too many codes to list");
    const size_t n = size_t{1} << info_.total_bits;
    std::vector<uint8_t> codes(n * info_.code_bytes);
    for (size_t c = 0; c < n; ++c) {
        if (info_.code_bytes == 1) codes[c] = static_cast<uint8_t>(c);
        else reinterpret_cast<uint16_t*>(codes.data())[c] = static_cast<uint16_t>(c);
    }
    std::vector<float> values(n);
    decode(codes.data(), values.data(), n);
    return values;
}

}  // namespace altgrad::host
