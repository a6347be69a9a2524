#include "plugins/format_handle.hpp"

#include <cmath>

#include "plugins/params.hpp"
#include "util/error.hpp"

namespace altgrad::host {

const char* status_name(altgrad_status s) {
    switch (s) {
        case ALTGRAD_STATUS_OK: return "ok";
        case ALTGRAD_STATUS_INVALID_ARGUMENT: return "invalid argument";
        case ALTGRAD_STATUS_UNSUPPORTED: return "unsupported";
        case ALTGRAD_STATUS_NOT_REPRESENTABLE: return "not representable";
        case ALTGRAD_STATUS_OUT_OF_MEMORY: return "out of memory";
        case ALTGRAD_STATUS_INTERNAL: return "internal error";
    }
    return "unknown status";
}

namespace {
altgrad_error empty_error() {
    altgrad_error e{};
    e.struct_size = sizeof e;
    return e;
}
}  // namespace

void format_handle::fail(const char* call, altgrad_status s, const altgrad_error& e) const {
    throw error("plugin '" + name() + "': " + call + " failed (" + status_name(s) + "): " +
                (e.message[0] != '\0' ? e.message : "no message"));
}

std::shared_ptr<format_handle> format_handle::create(std::shared_ptr<const loaded_plugin> plugin,
                                                     const std::map<std::string, std::string>& params,
                                                     const std::string& where) {
    if (plugin->info.kind != ALTGRAD_KIND_FORMAT)
        throw error("plugin '" + plugin->info.name + "' is a " + kind_name(plugin->info.kind) +
                    " plugin, not a format");
    const param_values values = resolve_params(plugin->info, params, where);
    std::shared_ptr<format_handle> h(new format_handle());
    h->plugin_ = std::move(plugin);
    h->vtable_ = h->plugin_->entry->format;
    altgrad_error e = empty_error();
    altgrad_status s = h->vtable_->create(values.list(), &h->instance_, &e);
    if (s != ALTGRAD_STATUS_OK) h->fail("create", s, e);
    if (h->instance_ == nullptr) h->fail("create", ALTGRAD_STATUS_INTERNAL, e);
    h->info_.struct_size = sizeof h->info_;
    s = h->vtable_->get_info(h->instance_, &h->info_, &e);
    if (s != ALTGRAD_STATUS_OK) h->fail("get_info", s, e);

    // Checks a host can rely on later.
    const altgrad_format_info& i = h->info_;
    auto bad = [&](const std::string& what) { throw error("plugin '" + h->name() + "': get_info: " + what); };
    if (i.total_bits < 1 || i.total_bits > 32) bad("total_bits " + std::to_string(i.total_bits) + " is not 1..32");
    const uint32_t want_bytes = i.total_bits <= 8 ? 1u : i.total_bits <= 16 ? 2u : 4u;
    if (i.code_bytes != want_bytes)
        bad("code_bytes " + std::to_string(i.code_bytes) + " should be " + std::to_string(want_bytes) + " for " +
            std::to_string(i.total_bits) + " bits");
    if (!(std::isfinite(i.max_finite) && i.max_finite > 0)) bad("max_finite must be finite and > 0");
    if (!(std::isfinite(i.lowest_finite) && i.lowest_finite <= i.max_finite)) bad("lowest_finite is invalid");
    if (!(i.min_normal >= 0 && i.min_normal <= i.max_finite)) bad("min_normal is invalid");
    if ((i.rounding_modes & (1u << ALTGRAD_ROUND_NEAREST_EVEN)) == 0) bad("round-to-nearest-even is required");
    if ((i.memory_kinds & (1u << ALTGRAD_MEMORY_HOST)) == 0) bad("host memory is required");
    return h;
}

format_handle::~format_handle() {
    if (instance_ != nullptr) vtable_->destroy(instance_);
}

altgrad_format_ref format_handle::ref() const {
    return altgrad_format_ref{sizeof(altgrad_format_ref), vtable_, instance_, name().c_str()};
}

namespace {
// The fields quantize and encode share (their args structs differ only in
// the output buffer).
template <class Args>
Args conversion_args(const float* in, size_t n, const quantize_options& o) {
    Args a{};
    a.struct_size = sizeof a;
    a.input = in;
    a.count = n;
    a.scale = o.scale;
    a.rounding = o.rounding;
    a.overflow = o.overflow;
    a.seed = o.seed;
    a.offset = o.offset;
    a.memory = o.memory;
    a.device_index = o.device_index;
    return a;
}
}  // namespace

quantize_counts format_handle::quantize(const float* in, float* out, size_t n, const quantize_options& o) const {
    auto a = conversion_args<altgrad_quantize_args>(in, n, o);
    a.output = out;
    altgrad_error e = empty_error();
    const altgrad_status s = vtable_->quantize(instance_, &a, &e);
    if (s != ALTGRAD_STATUS_OK) fail("quantize", s, e);
    return {a.overflow_count, a.underflow_count};
}

quantize_counts format_handle::encode(const float* in, void* codes, size_t n, const quantize_options& o) const {
    auto a = conversion_args<altgrad_encode_args>(in, n, o);
    a.codes = codes;
    altgrad_error e = empty_error();
    const altgrad_status s = vtable_->encode(instance_, &a, &e);
    if (s != ALTGRAD_STATUS_OK) fail("encode", s, e);
    return {a.overflow_count, a.underflow_count};
}

void format_handle::decode(const void* codes, float* out, size_t n, float scale) const {
    altgrad_decode_args a{};
    a.struct_size = sizeof a;
    a.codes = codes;
    a.output = out;
    a.count = n;
    a.scale = scale;
    a.memory = ALTGRAD_MEMORY_HOST;
    altgrad_error e = empty_error();
    const altgrad_status s = vtable_->decode(instance_, &a, &e);
    if (s != ALTGRAD_STATUS_OK) fail("decode", s, e);
}

std::vector<float> format_handle::decode_all_codes() const {
    if (info_.total_bits > 16) throw error("plugin '" + name() + "': more than 16 bits: too many codes to list");
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
