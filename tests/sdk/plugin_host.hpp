// A minimal host for the tests: loads a bundled format plugin through the C
// ABI exactly as altgrad-host does (dlopen with RTLD_NOW | RTLD_LOCAL, dlsym of
// the one entry symbol, an ABI version check, create with a parameter list:
// empty, or every declared key as a host passes them after validation) and
// wraps get_info, quantize, encode and decode in vector-in, vector-out calls.
// Libraries stay loaded until the process exits, as in the host, and one
// instance per plugin (and parameter list) is shared by all tests (instances
// are immutable and thread-safe by contract).
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/call_args.hpp>

#ifndef ALTGRAD_TEST_PLUGIN_DIR
#error "ALTGRAD_TEST_PLUGIN_DIR must name the folder of the built plugins"
#endif

namespace agtest {

inline std::string plugin_library_path(const std::string& name) {
    return std::string(ALTGRAD_TEST_PLUGIN_DIR) + "/" + name + "/libaltgrad_" + name + ".so";
}

// The entry of the bundled plugin `name`, loaded as a host loads it (dlopen
// with RTLD_NOW | RTLD_LOCAL, the one entry symbol); the library stays loaded.
inline const altgrad_entry& plugin_entry(const std::string& name) {
    const std::string path = plugin_library_path(name);
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) throw std::runtime_error("dlopen " + path + ": " + dlerror());
    void* sym = dlsym(lib, ALTGRAD_ENTRY_SYMBOL);
    if (sym == nullptr) throw std::runtime_error("no entry symbol in " + path);
    altgrad_entry_fn fn;
    static_assert(sizeof fn == sizeof sym, "function and object pointers differ in size");
    std::memcpy(&fn, &sym, sizeof fn);
    const altgrad_entry* e = fn();
    if (e == nullptr || e->descriptor == nullptr) throw std::runtime_error(name + ": no entry or descriptor");
    return *e;
}

struct QuantizeResult {
    altgrad_status status = ALTGRAD_STATUS_INTERNAL;
    std::vector<float> out;
    uint64_t overflow = 0;
    uint64_t underflow = 0;
    std::string message;
};

struct EncodeResult {
    altgrad_status status = ALTGRAD_STATUS_INTERNAL;
    std::vector<uint32_t> codes;
    uint64_t overflow = 0;
    uint64_t underflow = 0;
    std::string message;
};

struct DecodeResult {
    altgrad_status status = ALTGRAD_STATUS_INTERNAL;
    std::vector<float> out;
    std::string message;
};

// Store an arbitrary int in a C enum field, as a C host may: C++ forbids
// static_cast-ing a value outside the enumeration's range, memcpy does not.
template <class E>
void set_raw_enum(E& field, int value) {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized on this ABI");
    std::memcpy(&field, &value, sizeof value);
}

// The args structs and error objects are built by the SDK's builder, the one
// the host and the diagnostic adapter use (tests reach plugins through their
// own loader, not the host's, but share what both legitimately include).
using Mode = altgrad::sdk::conversion_mode;  // everything a conversion call takes besides the data
using altgrad::sdk::blank_error;
using altgrad::sdk::decode_args;
using altgrad::sdk::encode_args;
using altgrad::sdk::quantize_args;

// One parameter of create, typed as the host passes it.
struct Param {
    std::string key;
    altgrad_param_type type = ALTGRAD_PARAM_INT;
    int64_t int_value = 0;
    bool bool_value = false;
    std::string string_value;

    static Param integer(const std::string& k, int64_t v) { return {k, ALTGRAD_PARAM_INT, v, false, ""}; }
    static Param boolean(const std::string& k, bool v) { return {k, ALTGRAD_PARAM_BOOL, 0, v, ""}; }
    static Param text(const std::string& k, const std::string& v) {
        return {k, ALTGRAD_PARAM_STRING, 0, false, v};
    }
};

// The C list over params (which must outlive it).
inline std::vector<altgrad_param> param_items(const std::vector<Param>& params) {
    std::vector<altgrad_param> items;
    for (const Param& p : params) {
        altgrad_param a;
        std::memset(&a, 0, sizeof a);
        a.struct_size = sizeof a;
        a.key = p.key.c_str();
        a.type = p.type;
        a.int_value = p.int_value;
        a.bool_value = p.bool_value ? 1 : 0;
        a.string_value = p.string_value.c_str();
        items.push_back(a);
    }
    return items;
}

// "key=value key=value", for names and messages.
inline std::string params_text(const std::vector<Param>& params) {
    std::string s;
    for (const Param& p : params) {
        s += (s.empty() ? "" : " ") + p.key + "=";
        if (p.type == ALTGRAD_PARAM_INT) s += std::to_string(p.int_value);
        else if (p.type == ALTGRAD_PARAM_BOOL) s += p.bool_value ? "true" : "false";
        else s += p.string_value;
    }
    return s;
}

class FormatPlugin {
public:
    explicit FormatPlugin(const std::string& name, const std::vector<Param>& params = {}) : name_(name) {
        const std::string path = plugin_library_path(name);
        handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle_ == nullptr) throw std::runtime_error("dlopen " + path + ": " + dlerror());
        void* sym = dlsym(handle_, ALTGRAD_ENTRY_SYMBOL);
        if (sym == nullptr) throw std::runtime_error("dlsym " ALTGRAD_ENTRY_SYMBOL " in " + path);
        altgrad_entry_fn fn;
        static_assert(sizeof fn == sizeof sym, "function and object pointers differ in size");
        std::memcpy(&fn, &sym, sizeof fn);
        entry_ = fn();
        if (entry_ == nullptr) throw std::runtime_error(name + ": entry returned NULL");
        if (entry_->abi_version.major != ALTGRAD_ABI_VERSION_MAJOR ||
            entry_->abi_version.minor > ALTGRAD_ABI_VERSION_MINOR)
            throw std::runtime_error(name + ": incompatible ABI version");
        if (entry_->descriptor == nullptr || entry_->descriptor->kind != ALTGRAD_KIND_FORMAT ||
            entry_->format == nullptr)
            throw std::runtime_error(name + ": not a format plugin");
        vt_ = entry_->format;
        altgrad_error err = blank_error();
        if (create_raw(params, &instance_, &err) != ALTGRAD_STATUS_OK)
            throw std::runtime_error(name + ": create failed: " + err.message);
        std::memset(&info_, 0, sizeof info_);
        info_.struct_size = sizeof info_;
        err = blank_error();
        if (vt_->get_info(instance_, &info_, &err) != ALTGRAD_STATUS_OK)
            throw std::runtime_error(name + ": get_info failed: " + err.message);
    }
    FormatPlugin(const FormatPlugin&) = delete;
    FormatPlugin& operator=(const FormatPlugin&) = delete;
    // The instance is destroyed; the library stays loaded (as in the host).
    ~FormatPlugin() { vt_->destroy(instance_); }

    const std::string& name() const { return name_; }
    const altgrad_entry* entry() const { return entry_; }
    const altgrad_format_vtable* vtable() const { return vt_; }
    const altgrad_format* instance() const { return instance_; }
    const altgrad_format_info& info() const { return info_; }

    // create with these parameters; for tests of what create refuses.
    altgrad_status create_raw(const std::vector<Param>& params, altgrad_format** out,
                              altgrad_error* err) const {
        const std::vector<altgrad_param> items = param_items(params);
        altgrad_param_list list;
        std::memset(&list, 0, sizeof list);
        list.struct_size = sizeof list;
        list.items = items.empty() ? nullptr : items.data();
        list.count = items.size();
        return vt_->create(&list, out, err);
    }

    // Raw calls, for argument-checking tests.
    altgrad_status quantize_raw(altgrad_quantize_args* a, std::string* message = nullptr) const {
        altgrad_error err = blank_error();
        const altgrad_status st = vt_->quantize(instance_, a, &err);
        if (message != nullptr) *message = err.message;
        return st;
    }
    altgrad_status encode_raw(altgrad_encode_args* a, std::string* message = nullptr) const {
        altgrad_error err = blank_error();
        const altgrad_status st = vt_->encode(instance_, a, &err);
        if (message != nullptr) *message = err.message;
        return st;
    }
    altgrad_status decode_raw(altgrad_decode_args* a, std::string* message = nullptr) const {
        altgrad_error err = blank_error();
        const altgrad_status st = vt_->decode(instance_, a, &err);
        if (message != nullptr) *message = err.message;
        return st;
    }

    QuantizeResult quantize(const std::vector<float>& in, const Mode& m = Mode{}) const {
        QuantizeResult r;
        r.out.assign(in.size(), 0.0f);
        altgrad_quantize_args a = quantize_args(in.data(), r.out.data(), in.size(), m);
        r.status = quantize_raw(&a, &r.message);
        r.overflow = a.overflow_count;
        r.underflow = a.underflow_count;
        return r;
    }

    // Quantize one value; convenient for the named edge-case tests.
    float quantize_one(float x, const Mode& m = Mode{}, uint64_t* overflow = nullptr,
                       uint64_t* underflow = nullptr) const {
        const QuantizeResult r = quantize({x}, m);
        if (r.status != ALTGRAD_STATUS_OK)
            throw std::runtime_error(name_ + ": quantize failed: " + r.message);
        if (overflow != nullptr) *overflow = r.overflow;
        if (underflow != nullptr) *underflow = r.underflow;
        return r.out[0];
    }

    EncodeResult encode(const std::vector<float>& in, const Mode& m = Mode{}) const {
        EncodeResult r;
        const size_t w = info_.code_bytes;
        std::vector<unsigned char> raw(in.size() * w + 1, 0);
        altgrad_encode_args a = encode_args(in.data(), raw.data(), in.size(), m);
        r.status = encode_raw(&a, &r.message);
        r.overflow = a.overflow_count;
        r.underflow = a.underflow_count;
        r.codes.resize(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
            if (w == 1) {
                r.codes[i] = raw[i];
            } else if (w == 2) {
                uint16_t c;
                std::memcpy(&c, raw.data() + 2 * i, 2);
                r.codes[i] = c;
            } else {
                uint32_t c;
                std::memcpy(&c, raw.data() + 4 * i, 4);
                r.codes[i] = c;
            }
        }
        return r;
    }

    // block_scales (ABI 1.2): one scale per block_size codes, instead of scale.
    DecodeResult decode(const std::vector<uint32_t>& codes, float scale = 1.0f,
                        const float* block_scales = nullptr, size_t block_size = 0) const {
        DecodeResult r;
        const size_t w = info_.code_bytes;
        std::vector<unsigned char> raw(codes.size() * w + 1, 0);
        for (size_t i = 0; i < codes.size(); ++i) {
            if (w == 1) {
                raw[i] = static_cast<unsigned char>(codes[i]);
            } else if (w == 2) {
                const uint16_t c = static_cast<uint16_t>(codes[i]);
                std::memcpy(raw.data() + 2 * i, &c, 2);
            } else {
                std::memcpy(raw.data() + 4 * i, &codes[i], 4);
            }
        }
        r.out.assign(codes.size(), 0.0f);
        altgrad_decode_args a = decode_args(raw.data(), r.out.data(), codes.size(), scale,
                                            ALTGRAD_MEMORY_HOST, 0, block_scales, block_size);
        r.status = decode_raw(&a, &r.message);
        return r;
    }

private:
    std::string name_;
    void* handle_ = nullptr;
    const altgrad_entry* entry_ = nullptr;
    const altgrad_format_vtable* vt_ = nullptr;
    altgrad_format* instance_ = nullptr;
    altgrad_format_info info_{};
};

// The shared instance of a bundled plugin (with these parameters), created on
// first use.
inline const FormatPlugin& plugin(const std::string& name, const std::vector<Param>& params = {}) {
    static std::mutex mu;
    static std::map<std::string, std::unique_ptr<FormatPlugin>> loaded;
    std::lock_guard<std::mutex> lock(mu);
    const std::string key = name + " " + params_text(params);
    auto it = loaded.find(key);
    if (it == loaded.end()) it = loaded.emplace(key, std::make_unique<FormatPlugin>(name, params)).first;
    return *it->second;
}

inline const std::vector<std::string>& bundled_plugin_names() {
    static const std::vector<std::string> names = {"e5m2", "e4m3", "e3m4", "e1m6", "e7m0",
                                                   "e0m7", "bf16", "fp16", "fp32"};
    return names;
}

}  // namespace agtest
