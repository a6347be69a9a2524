#include "conformance/kit.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
// ASan's allocator statistics (sanitizer/allocator_interface.h, which GCC
// does not install; libasan exports the function).
extern "C" size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "conformance/elf_exports.hpp"
#include "conformance/format_reference.hpp"
#include "conformance/headline_checks.hpp"
#include "sandbox/guarded_memory.hpp"
#include "sandbox/isolate.hpp"
#include "plugins/diagnostic_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/intervention_handle.hpp"
#include "plugins/loader.hpp"
#include "plugins/registry.hpp"
#include "plugins/params.hpp"
#include "util/error.hpp"

namespace altgrad::host::conformance {
namespace fs = std::filesystem;
// The kit hands plugins guarded buffers and runs each check in a child (the sandbox room).
using sandbox::call_note;
using sandbox::crash_note;
using sandbox::guarded_array;
using sandbox::guarded_buffer;
using sandbox::run_isolated;

// ---------------------------------------------------------------- targets

namespace {

plugin_target target_from_manifest(const std::string& label, const fs::path& manifest_path) {
    plugin_target t;
    t.label = label;
    t.manifest_path = manifest_path;
    try {
        t.info = read_manifest(manifest_path);
    } catch (const std::exception& e) {
        t.manifest_error = e.what();
    }
    return t;
}

}  // namespace

plugin_target target_by_name(const fs::path& plugins_dir, const std::string& name) {
    for (plugin_target& t : all_targets(plugins_dir))
        if ((t.info && t.info->name == name) || t.manifest_path.parent_path().filename() == name) return t;
    throw error("conformance: no plugin named '" + name + "' in " + plugins_dir.string());
}

plugin_target target_by_path(const fs::path& path) {
    std::error_code ec;
    const fs::path folder = fs::is_directory(path, ec) ? path : path.parent_path();
    const fs::path m = folder / "manifest.toml";
    if (!fs::exists(path, ec)) throw error("conformance: " + path.string() + " does not exist");
    if (!fs::exists(m, ec))
        throw error("conformance: " + path.string() + ": no manifest.toml beside the library (a plugin is a folder "
                    "holding its manifest and its library)");
    return target_from_manifest(path.string(), m);
}

std::vector<plugin_target> all_targets(const fs::path& plugins_dir) {
    std::vector<plugin_target> out;
    for (const fs::path& m : find_manifests(plugins_dir))
        out.push_back(target_from_manifest(m.parent_path().filename().string(), m));
    return out;
}


// ---------------------------------------------------------------- checks

namespace {

// What a check body gets. Everything here lives in the check's own child
// process, so a plugin that corrupts memory corrupts only that check.
struct env {
    const plugin_target& target;
    const options& opts;
    std::string check;
    std::mt19937_64 rng;
    std::shared_ptr<const loaded_plugin> plugin;
    std::shared_ptr<format_handle> format;
    std::optional<format_table> table;
    bool drew_random = false;  // the result depends on the seed: say which
};

result pass(const std::string& reason) { return {"", outcome::passed, reason, "", "", 0}; }
result fail(const std::string& reason, const std::string& input, const std::string& hint) {
    return {"", outcome::failed, reason, input, hint, 0};
}
result skip(const std::string& reason) { return {"", outcome::skipped, reason, "", "", 0}; }

bool same(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y;
}

std::string mode_text(const quantize_options& o) {
    char buf[160];
    if (o.block_scales != nullptr)
        std::snprintf(buf, sizeof buf, "rounding %s, overflow %s, block scales, blocks of %zu",
                      rounding_name(o.rounding), overflow_name(o.overflow), o.block_size);
    else
        std::snprintf(buf, sizeof buf, "rounding %s, overflow %s, scale %s", rounding_name(o.rounding),
                      overflow_name(o.overflow), hex_float(o.scale).c_str());
    return buf;
}

// A finding made inside a plugin call's wrapper (below), deep in a check;
// check_plugin makes it the check's result.
struct finding : std::exception {
    result found;
    explicit finding(result r) : found(std::move(r)) {}
    const char* what() const noexcept override { return found.reason.c_str(); }
};

// The plugin calls of the format checks. Each hands the plugin guarded copies
// of its buffers (sandbox/guarded_memory.hpp): inputs read-only, every buffer between
// inaccessible pages, so touching outside a buffer kills the check's process
// with a report naming the call, the buffer and the element. A write just
// before element 0 does not fault; the pattern there shows it.
void expect_front_intact(const guarded_buffer& b, const std::string& call, const char* buffer) {
    if (!b.front_intact())
        throw finding(fail(call + " wrote before element 0 of its " + buffer + " buffer", call,
                           "write only elements 0 .. count-1 of each buffer"));
}

std::string quantize_call(size_t n, const quantize_options& o) {
    return "quantize of " + std::to_string(n) + " elements (" + mode_text(o) + ")";
}

// Without a call note: for threads calling at once.
std::vector<float> quantize_unnoted(const env& e, const std::vector<float>& in, const quantize_options& o,
                                    quantize_counts* counts = nullptr) {
    guarded_array<float> input(in, "input");
    input.seal();
    guarded_array<float> output(in.size(), "output");
    const quantize_counts c = e.format->quantize(input.data(), output.data(), in.size(), o);
    expect_front_intact(output.buffer(), quantize_call(in.size(), o), "output");
    if (counts) *counts = c;
    return output.to_vector();
}

std::vector<float> quantize(const env& e, const std::vector<float>& in, const quantize_options& o,
                            quantize_counts* counts = nullptr) {
    const call_note note(quantize_call(in.size(), o));
    return quantize_unnoted(e, in, o, counts);
}

// Codes of info().code_bytes each, native endian, as a byte vector.
std::vector<uint8_t> encode(const env& e, const std::vector<float>& in, const quantize_options& o) {
    const std::string call = "encode of " + std::to_string(in.size()) + " elements (" + mode_text(o) + ")";
    const call_note note(call);
    const size_t width = e.format->info().code_bytes;
    guarded_array<float> input(in, "input");
    input.seal();
    guarded_buffer codes(in.size() * width, width, "codes");
    e.format->encode(input.data(), codes.data(), in.size(), o);
    expect_front_intact(codes, call, "codes");
    const uint8_t* c = static_cast<const uint8_t*>(codes.data());
    return std::vector<uint8_t>(c, c + in.size() * width);
}

// block_scales: ABI 1.2 block scaling (one scale per block_size codes).
std::vector<float> decode(const env& e, const std::vector<uint8_t>& codes, float scale = 1.0f,
                          const float* block_scales = nullptr, size_t block_size = 0) {
    const size_t width = e.format->info().code_bytes, n = codes.size() / width;
    const std::string call = "decode of " + std::to_string(n) + " codes (" +
                             (block_scales ? "block scales, blocks of " + std::to_string(block_size)
                                           : "scale " + hex_float(scale)) +
                             ")";
    const call_note note(call);
    guarded_buffer input(codes.size(), width, "codes");
    if (!codes.empty()) std::memcpy(input.data(), codes.data(), codes.size());
    input.seal();
    guarded_array<float> output(n, "output");
    e.format->decode(input.data(), output.data(), n, scale, block_scales, block_size);
    expect_front_intact(output.buffer(), call, "output");
    return output.to_vector();
}

quantize_options mode(altgrad_rounding r, altgrad_overflow o = ALTGRAD_OVERFLOW_SATURATE, float scale = 1.0f) {
    quantize_options q;
    q.rounding = r;
    q.overflow = o;
    q.scale = scale;
    return q;
}

// The values where format code goes wrong: every grid value, every midpoint
// and its float neighbours, the ends of the range and beyond.
std::vector<float> grid_probes(const format_table& t) {
    std::vector<float> p;
    const auto& f = t.finite();
    for (size_t i = 0; i < f.size(); ++i) {
        p.push_back(f[i].value);
        if (i + 1 < f.size()) {
            const double mid = (static_cast<double>(f[i].value) + f[i + 1].value) / 2;
            const float m = static_cast<float>(mid);
            p.push_back(m);
            p.push_back(std::nextafter(m, -INFINITY));
            p.push_back(std::nextafter(m, INFINITY));
        }
    }
    for (float edge : {t.max(), t.lowest()}) {
        const float out = edge > 0 ? INFINITY : -INFINITY;
        for (double k : {1.0001, 1.01, 1.1, 1.5, 2.0, 16.0, 1e6})
            if (std::isfinite(edge * k)) p.push_back(static_cast<float>(edge * k));
        p.push_back(std::nextafter(edge, out));
        p.push_back(out > 0 ? FLT_MAX : -FLT_MAX);
    }
    return p;
}

bool representable_scaled(float x) { return std::isfinite(x); }

// Log-uniform magnitudes from well below the smallest value to well above
// the largest, both signs, plus uniform values inside the range.
std::vector<float> random_probes(env& e, size_t n) {
    e.drew_random = true;
    const altgrad_format_info& i = e.format->info();
    const double lo_mag = std::max(i.min_subnormal > 0 ? i.min_subnormal : i.min_normal, 1e-38) / 8;
    const double hi_mag = std::min(i.max_finite * 8, static_cast<double>(FLT_MAX));
    std::uniform_real_distribution<double> log_mag(std::log2(lo_mag), std::log2(hi_mag));
    std::uniform_real_distribution<double> inside(i.lowest_finite, i.max_finite);
    std::bernoulli_distribution coin(0.5);
    std::vector<float> p;
    p.reserve(n);
    for (size_t k = 0; k < n; ++k) {
        const double v = (k % 4 == 3) ? inside(e.rng) : std::exp2(log_mag(e.rng)) * (coin(e.rng) ? -1 : 1);
        if (representable_scaled(static_cast<float>(v))) p.push_back(static_cast<float>(v));
    }
    return p;
}

std::vector<float> all_probes(env& e, size_t random_count = 20000) {
    std::vector<float> p = e.table ? grid_probes(*e.table) : std::vector<float>{};
    const std::vector<float> r = random_probes(e, random_count);
    p.insert(p.end(), r.begin(), r.end());
    return p;
}

// Compare quantize against the reference model on `inputs`.
result against_reference(env& e, const std::vector<float>& inputs, const quantize_options& o, const char* hint) {
    const std::vector<float> got = quantize(e, inputs, o);
    for (size_t k = 0; k < inputs.size(); ++k) {
        const float scaled = inputs[k] * o.scale;
        const format_table::expectation want = e.table->expect(scaled, o.rounding, o.overflow);
        const float want_value = want.value / o.scale;
        if (!same(got[k], want_value))
            return fail("got " + hex_float(got[k]) + ", expected " + hex_float(want_value) + ": " + want.why,
                        "x = " + hex_float(inputs[k]) + " (" + mode_text(o) + ")", hint);
    }
    return pass(std::to_string(inputs.size()) + " inputs match the model built from the format's own codes");
}

result needs_table(const env& e) {
    return skip("needs a code table; the format has " + std::to_string(e.format->info().total_bits) +
                " bits (at most 16 are tabulated)");
}

// -------- load.*

result check_manifest(env& e) {
    if (!e.target.info) return fail(e.target.manifest_error, e.target.manifest_path.string(),
                                    "fix the manifest key named in the message (docs/writing-a-plugin.md)");
    return pass("manifest " + e.target.manifest_path.string() + " is valid");
}

void* raw_open(const env& e, std::string& why) {
    void* h = ::dlopen(e.target.info->library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) why = ::dlerror();
    return h;
}

result check_library(env& e) {
    std::string why;
    void* h = raw_open(e, why);
    if (h == nullptr) return fail("dlopen with RTLD_NOW | RTLD_LOCAL failed: " + why, e.target.info->library.string(),
                                  "every symbol the library uses must resolve at load time; link with "
                                  "-Wl,--no-undefined to find out at build time");
    ::dlclose(h);
    return pass("loads with RTLD_NOW | RTLD_LOCAL");
}

result check_exports(env& e) {
    const std::vector<std::string> names = exported_symbols(e.target.info->library);
    bool entry = false;
    std::vector<std::string> extra;
    for (const std::string& n : names) {
        if (n == ALTGRAD_ENTRY_SYMBOL) entry = true;
        else extra.push_back(n);
    }
    if (!entry) return fail("the library does not export " ALTGRAD_ENTRY_SYMBOL, e.target.info->library.string(),
                            "define it with ALTGRAD_FORMAT_PLUGIN (altgrad/sdk/format_plugin.hpp)");
    if (!extra.empty()) {
        std::string list;
        for (size_t k = 0; k < extra.size() && k < 5; ++k) list += (k ? ", " : "") + extra[k];
        if (extra.size() > 5) list += ", ... (" + std::to_string(extra.size()) + " in all)";
        return {"", outcome::warning, "exports more than the entry symbol: " + list, e.target.info->library.string(),
                "build with altgrad_add_plugin(): its linker version script exports only " ALTGRAD_ENTRY_SYMBOL
                " (hidden visibility alone still leaks std:: template instances)", 0};
    }
    return pass("exports only " ALTGRAD_ENTRY_SYMBOL);
}

// `returned_null`: the entry function exists and returned NULL (a finding of
// load.abi_version; a library or symbol missing is another check's).
const altgrad_entry* raw_entry(const env& e, void*& handle, std::string& why, bool* returned_null = nullptr) {
    handle = raw_open(e, why);
    if (handle == nullptr) return nullptr;
    auto fn = reinterpret_cast<altgrad_entry_fn>(::dlsym(handle, ALTGRAD_ENTRY_SYMBOL));
    if (fn == nullptr) {
        why = "no " ALTGRAD_ENTRY_SYMBOL;
        return nullptr;
    }
    const altgrad_entry* entry = fn();
    if (entry == nullptr) why = ALTGRAD_ENTRY_SYMBOL "() returned NULL";
    if (returned_null) *returned_null = entry == nullptr;
    return entry;
}

result check_abi_version(env& e) {
    void* h = nullptr;
    std::string why;
    bool returned_null = false;
    const altgrad_entry* entry = raw_entry(e, h, why, &returned_null);
    if (returned_null)
        return fail(why + ": the plugin describes nothing and the host cannot load it", ALTGRAD_ENTRY_SYMBOL "()",
                    "return a pointer to a static altgrad_entry (ALTGRAD_FORMAT_PLUGIN and the other SDK macros "
                    "define one)");
    if (entry == nullptr) return skip("no entry to ask: " + why);
    if (entry->struct_size < offsetof(altgrad_entry, abi_version) + sizeof(altgrad_version))
        return fail("entry struct_size " + std::to_string(entry->struct_size) + " cannot hold a version", "",
                    "return a static altgrad_entry with struct_size = sizeof(altgrad_entry)");
    if (auto bad = abi_incompatibility(entry->abi_version))
        return fail("the library is " + *bad, "abi_version = " + version_string(entry->abi_version, false),
                    "rebuild the plugin against this host's SDK headers (ALTGRAD_ABI_VERSION_INIT)");
    return pass("ABI " + version_string(entry->abi_version, false) + " is accepted by this host (ABI " +
                version_string(host_abi_version(), false) + ")");
}

result check_descriptor(env& e) {
    void* h = nullptr;
    std::string why;
    const altgrad_entry* entry = raw_entry(e, h, why);
    if (entry == nullptr) return skip("no entry to ask: " + why);
    if (abi_incompatibility(entry->abi_version)) return skip("the ABI version is refused (see load.abi_version)");
    try {
        load_plugin(*e.target.info);
    } catch (const std::exception& x) {
        return fail(x.what(), e.target.manifest_path.string(),
                    "the descriptor's kind, name, version and parameters must equal the manifest's");
    }
    return pass("descriptor and tables are valid and match the manifest");
}

result check_repeat_load(env& e) {
    for (int round = 0; round < 20; ++round) {
        void* h = nullptr;
        std::string why;
        if (raw_entry(e, h, why) == nullptr) return skip("cannot load: " + why);
        if (::dlclose(h) != 0) return fail(std::string("dlclose failed: ") + ::dlerror(), "", "");
    }
    // And through the host's loader, creating and destroying an instance each
    // time; the library is unloaded when the last instance goes.
    for (int round = 0; round < 5; ++round) {
        std::shared_ptr<const loaded_plugin> p;
        try {
            p = load_plugin(*e.target.info);
        } catch (const std::exception& x) {
            return skip(std::string("the host refuses the plugin (see load.abi_version, load.descriptor): ") + x.what());
        }
        if (p->info.kind == ALTGRAD_KIND_FORMAT) format_handle::create(p);
    }
    return pass("loaded and unloaded 20 times; loaded, created and destroyed an instance 5 times");
}

// -------- codes.*

result check_code_roundtrip(env& e) {
    if (!e.table) return needs_table(e);
    const format_table& t = *e.table;
    const altgrad_format_info& info = e.format->info();
    const std::vector<float>& values = t.by_code();
    std::vector<float> in;
    std::vector<uint32_t> which;
    for (uint32_t c = 0; c < values.size(); ++c) {
        if (std::isnan(values[c]) && info.nan_code_count == 0) continue;
        in.push_back(values[c]);
        which.push_back(c);
    }
    // Non-finite mode, so Inf codes encode as Inf rather than saturating.
    const std::vector<uint8_t> out = encode(e, in, mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_NONFINITE));
    for (size_t k = 0; k < in.size(); ++k) {
        const uint32_t got = info.code_bytes == 1 ? out[k] : reinterpret_cast<const uint16_t*>(out.data())[k];
        uint32_t want = which[k];
        if (std::isnan(values[which[k]])) want = info.canonical_nan_code;
        // Two codes for one value (only +0 and -0 are allowed that) encode to one.
        if (!std::isnan(values[which[k]]) && got != want && same(values[got], values[want]))
            continue;
        if (got != want)
            return fail("code " + std::to_string(want) + " decodes to " + hex_float(values[which[k]]) +
                            " which encodes to code " + std::to_string(got),
                        "code " + std::to_string(which[k]),
                        std::isnan(values[which[k]]) ? "NaN must encode to the canonical NaN code the info declares"
                                                     : "encode must invert decode on every code");
    }
    return pass("all " + std::to_string(values.size()) + " codes decode and encode back");
}

result check_declared_range(env& e) {
    if (!e.table) return needs_table(e);
    const format_table& t = *e.table;
    const altgrad_format_info& i = e.format->info();
    const char* hint = "the format info must describe what the codes actually decode to";
    if (i.max_finite != t.max())
        return fail("declares max_finite " + hex_float(i.max_finite) + " but the largest finite code value is " +
                        hex_float(t.max()), "get_info().max_finite", hint);
    if (i.lowest_finite != t.lowest())
        return fail("declares lowest_finite " + hex_float(i.lowest_finite) + " but the lowest finite code value is " +
                        hex_float(t.lowest()), "get_info().lowest_finite", hint);
    double smallest = 0;
    for (const table_entry& x : t.finite())
        if (x.value > 0) {
            smallest = x.value;
            break;
        }
    const double declared_smallest = i.min_subnormal > 0 ? i.min_subnormal : i.min_normal;
    if (declared_smallest != smallest)
        return fail("declares the smallest positive value as " + hex_float(declared_smallest) + " but the codes give " +
                        hex_float(smallest), "get_info().min_subnormal / min_normal", hint);
    if ((i.has_inf != 0) != (t.has_pos_inf() || t.has_neg_inf()))
        return fail(std::string("declares has_inf = ") + (i.has_inf ? "1" : "0") + " but the codes " +
                        (i.has_inf ? "have no Inf" : "include Inf"), "get_info().has_inf", hint);
    if (i.nan_code_count != t.nan_codes())
        return fail("declares " + std::to_string(i.nan_code_count) + " NaN codes but " +
                        std::to_string(t.nan_codes()) + " codes decode to NaN", "get_info().nan_code_count", hint);
    if (i.nan_code_count > 0 && !std::isnan(t.by_code()[i.canonical_nan_code]))
        return fail("the canonical NaN code " + std::to_string(i.canonical_nan_code) + " decodes to " +
                        hex_float(t.by_code()[i.canonical_nan_code]), "get_info().canonical_nan_code", hint);
    return pass("max " + hex_float(i.max_finite) + ", lowest " + hex_float(i.lowest_finite) + ", smallest positive " +
                hex_float(smallest) + " match the codes");
}

// -------- quantize.*

result check_nearest(env& e) {
    if (!e.table) return needs_table(e);
    return against_reference(e, all_probes(e), mode(ALTGRAD_ROUND_NEAREST_EVEN),
                             "round to the nearest representable value (altgrad/sdk/exmy.hpp does this for ExMy)");
}

result check_ties(env& e) {
    if (!e.table) return needs_table(e);
    std::vector<float> ties;
    const auto& f = e.table->finite();
    for (size_t k = 0; k + 1 < f.size(); ++k) {
        const double mid = (static_cast<double>(f[k].value) + f[k + 1].value) / 2;
        if (static_cast<double>(static_cast<float>(mid)) == mid) ties.push_back(static_cast<float>(mid));
    }
    if (ties.empty()) return skip("no midpoint between two codes is a float32");
    return against_reference(e, ties, mode(ALTGRAD_ROUND_NEAREST_EVEN),
                             "at an exact tie pick the neighbour whose code is even (not the one away from zero)");
}

result check_toward_zero(env& e) {
    if (!e.table) return needs_table(e);
    if (!(e.format->info().rounding_modes & (1u << ALTGRAD_ROUND_TOWARD_ZERO)))
        return skip("the format does not implement toward-zero");
    return against_reference(e, all_probes(e), mode(ALTGRAD_ROUND_TOWARD_ZERO),
                             "truncate: the neighbour nearer zero; never Inf for a finite input");
}

result check_idempotent(env& e) {
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO, ALTGRAD_ROUND_STOCHASTIC}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        const quantize_options o = mode(r);
        const std::vector<float> in = all_probes(e);
        const std::vector<float> once = quantize(e, in, o);
        const std::vector<float> twice = quantize(e, once, o);
        for (size_t k = 0; k < in.size(); ++k)
            if (!same(once[k], twice[k]))
                return fail("q(x) = " + hex_float(once[k]) + " but q(q(x)) = " + hex_float(twice[k]),
                            "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                            "a representable value must come back unchanged");
    }
    return pass("q(q(x)) = q(x) under every implemented rounding mode");
}

result check_monotone(env& e) {
    std::vector<float> in = all_probes(e);
    std::sort(in.begin(), in.end());
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        const quantize_options o = mode(r);
        const std::vector<float> out = quantize(e, in, o);
        for (size_t k = 1; k < in.size(); ++k)
            if (out[k] < out[k - 1])
                return fail("x1 = " + hex_float(in[k - 1]) + " < x2 = " + hex_float(in[k]) + " but q(x1) = " + hex_float(out[k - 1]) +
                                " > q(x2) = " + hex_float(out[k]),
                            "x1 = " + hex_float(in[k - 1]) + ", x2 = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                            "quantize must never reorder values");
    }
    return pass("x1 <= x2 implies q(x1) <= q(x2) on " + std::to_string(in.size()) + " sorted inputs");
}

result check_sign_symmetric(env& e) {
    const altgrad_format_info& i = e.format->info();
    if (!i.is_signed) return skip("the format is unsigned");
    const double bound = std::min(i.max_finite, -i.lowest_finite);
    std::vector<float> in;
    for (float x : all_probes(e))
        if (std::fabs(x) <= bound && x != 0) in.push_back(std::fabs(x));
    std::vector<float> neg(in.size());
    std::transform(in.begin(), in.end(), neg.begin(), [](float x) { return -x; });
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(i.rounding_modes & (1u << r))) continue;
        const quantize_options o = mode(r);
        const std::vector<float> p = quantize(e, in, o), n = quantize(e, neg, o);
        for (size_t k = 0; k < in.size(); ++k)
            if (p[k] != -n[k])
                return fail("q(x) = " + hex_float(p[k]) + " but q(-x) = " + hex_float(n[k]),
                            "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                            "round the magnitude, then apply the sign");
    }
    return pass("q(-x) = -q(x) for |x| <= " + hex_float(bound));
}

std::vector<float> beyond_range(const format_table& t) {
    std::vector<float> p;
    for (float x : grid_probes(t))
        if (x > t.max() || x < t.lowest()) p.push_back(x);
    p.push_back(INFINITY);
    p.push_back(-INFINITY);
    p.push_back(t.max());
    p.push_back(t.lowest());
    return p;
}

result check_overflow_saturate(env& e) {
    if (!e.table) return needs_table(e);
    return against_reference(e, beyond_range(*e.table), mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE),
                             "saturate mode sends finite overflow and +-Inf to the extreme finite values, after "
                             "rounding (the tie just above max may round down to max)");
}

result check_overflow_nonfinite(env& e) {
    if (!e.table) return needs_table(e);
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        result res = against_reference(e, beyond_range(*e.table), mode(r, ALTGRAD_OVERFLOW_NONFINITE),
                                       "non-finite mode sends overflow to +-Inf where the format has Inf, else NaN, "
                                       "else saturates; toward-zero never turns a finite input into Inf");
        if (res.status != outcome::passed) return res;
    }
    return pass("overflow goes where the rules say under non-finite mode");
}

result check_specials(env& e) {
    const altgrad_format_info& i = e.format->info();
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(i.rounding_modes & (1u << r))) continue;
        for (altgrad_overflow ov : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            const quantize_options o = mode(r, ov);
            const std::vector<float> in = {NAN, -NAN, 0.0f, -0.0f};
            const std::vector<float> out = quantize(e, in, o);
            for (int k = 0; k < 2; ++k)
                if (!std::isnan(out[k]))
                    return fail("NaN gave " + hex_float(out[k]), "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                                "quantize must keep NaN visible: NaN in, NaN out, in every format");
            if (i.zero == ALTGRAD_ZERO_NONE) continue;  // 0 lies beyond its lowest value: checked below
            if (!same(out[2], 0.0f))
                return fail("+0 gave " + hex_float(out[2]), "x = 0x0p+0 (" + mode_text(o) + ")", "zero is exact");
            const bool signed_zero = i.zero == ALTGRAD_ZERO_SIGNED;
            if (!(same(out[3], -0.0f) || (!signed_zero && same(out[3], 0.0f))))
                return fail("-0 gave " + hex_float(out[3]), "x = -0x0p+0 (" + mode_text(o) + ")",
                            "-0 stays -0 where the format has a negative zero, else becomes +0");
        }
    }
    if (!e.table) return pass("NaN and +-0 behave (Inf needs a code table)");
    result saturate = against_reference(e, {INFINITY, -INFINITY},
                                        mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE),
                                        "+-Inf saturate to the extreme finite values");
    if (saturate.status != outcome::passed) return saturate;
    result nonfinite = against_reference(e, {INFINITY, -INFINITY},
                                         mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_NONFINITE),
                                         "+-Inf stay +-Inf where the format has Inf, else NaN, else saturate");
    if (nonfinite.status != outcome::passed) return nonfinite;
    if (i.zero == ALTGRAD_ZERO_NONE)
        for (altgrad_overflow ov : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            result zero = against_reference(e, {0.0f, -0.0f}, mode(ALTGRAD_ROUND_NEAREST_EVEN, ov),
                                            "a format without zero has nothing at 0: it lies beyond the lowest "
                                            "value, an overflow (saturate: the lowest value; non-finite: NaN)");
            if (zero.status != outcome::passed) return zero;
        }
    return pass("NaN, +-Inf and +-0 behave under every mode");
}

result check_subnormal_boundary(env& e) {
    if (!e.table) return needs_table(e);
    const auto& f = e.table->finite();
    std::vector<float> in;
    for (size_t k = 0; k < f.size(); ++k) {
        if (f[k].value <= 0) continue;
        // The smallest positive values and the gap below them.
        for (size_t j = k; j < f.size() && j < k + 3; ++j) {
            const float v = f[j].value;
            for (float x : {v, v / 2, v / 4, std::nextafter(v / 2, 0.0f), std::nextafter(v / 2, INFINITY),
                            std::nextafter(v, 0.0f), v * 0.75f})
                if (x != 0) {
                    in.push_back(x);
                    in.push_back(-x);
                }
        }
        break;
    }
    const double min_normal = e.format->info().min_normal;
    for (double k : {0.5, 0.99, 1.0, 1.01, 1.5})
        if (min_normal * k > 0) {
            in.push_back(static_cast<float>(min_normal * k));
            in.push_back(static_cast<float>(-min_normal * k));
        }
    in.push_back(std::nextafter(0.0f, 1.0f));  // the smallest float32 subnormal
    in.push_back(-std::nextafter(0.0f, 1.0f));
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        result res = against_reference(e, in, mode(r), "values below the smallest code round to 0 or to it; "
                                                       "half the smallest value is a tie with zero (code 0, even)");
        if (res.status != outcome::passed) return res;
    }
    return pass("the smallest values, the normal boundary and the gap to zero round as the codes say");
}

// Whether quantize disagrees with decode(encode(x, o), o.scale) on `in`.
std::optional<result> quantize_differs_from_codes(const env& e, const std::vector<float>& in,
                                                  const quantize_options& o) {
    const std::vector<float> q = quantize(e, in, o);
    const std::vector<float> d = decode(e, encode(e, in, o), o.scale);
    for (size_t k = 0; k < in.size(); ++k)
        if (!same(q[k], d[k]))
            return fail("quantize gave " + hex_float(q[k]) + " but decode(encode(x)) gave " + hex_float(d[k]),
                        "x = " + hex_float(in[k]) + " (" + mode_text(o) + ", seed " + std::to_string(o.seed) + ")",
                        o.scale == 1.0f ? "quantize, encode and decode must share one rounding"
                                        : "encode rounds x*scale; decode must return the code's value / scale");
    return std::nullopt;
}

result check_encode_decode(env& e) {
    e.drew_random = true;
    const altgrad_format_info& i = e.format->info();
    std::vector<float> in = all_probes(e);
    in.push_back(INFINITY);
    in.push_back(-INFINITY);
    if (i.nan_code_count > 0) in.push_back(NAN);
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(i.rounding_modes & (1u << r))) continue;
        for (altgrad_overflow ov : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            quantize_options o = mode(r, ov);
            o.seed = e.opts.seed;
            if (auto bad = quantize_differs_from_codes(e, in, o)) return *bad;
        }
    }
    // Scales other than 1: decode must divide by the scale, as quantize does.
    for (float s : {0.125f, 3.0f, 0.1f}) {
        quantize_options o = mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE, s);
        o.seed = e.opts.seed;
        if (auto bad = quantize_differs_from_codes(e, in, o)) return *bad;
    }
    if (i.nan_code_count == 0) {
        try {
            encode(e, {NAN}, mode(ALTGRAD_ROUND_NEAREST_EVEN));
            return fail("encoding NaN into a format without NaN succeeded", "x = nan",
                        "return ALTGRAD_STATUS_NOT_REPRESENTABLE naming the element");
        } catch (const error& x) {
            if (std::string(x.what()).find("not representable") == std::string::npos)
                return fail(std::string("encoding NaN failed with the wrong status: ") + x.what(), "x = nan",
                            "return ALTGRAD_STATUS_NOT_REPRESENTABLE");
        }
    }
    return pass("quantize(x) = decode(encode(x)) under every mode, and with scales 1/8, 3 and 0.1");
}

result check_scaling(env& e) {
    if (!e.table) return needs_table(e);
    for (float s : {0.125f, 32.0f, 3.0f, 0.1f}) {
        result r = against_reference(e, all_probes(e, 5000), mode(ALTGRAD_ROUND_NEAREST_EVEN,
                                                                    ALTGRAD_OVERFLOW_SATURATE, s),
                                     "the result must be q(fl(x*s)) / s in float32");
        if (r.status != outcome::passed) return r;
    }
    return pass("q(x*s)/s for s = 1/8, 32, 3, 0.1");
}

result check_counts(env& e) {
    if (!e.table) return needs_table(e);
    std::vector<float> in = all_probes(e);
    in.push_back(INFINITY);
    in.push_back(-INFINITY);
    in.push_back(NAN);
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        for (altgrad_overflow ov : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            const quantize_options o = mode(r, ov);
            quantize_counts got;
            const std::vector<float> out = quantize(e, in, o, &got);
            // Underflow is visible in the outputs themselves; overflow is not
            // (a saturated max looks like a rounded one), so it comes from the
            // model of the codes.
            uint64_t over = 0, under = 0;
            for (size_t k = 0; k < in.size(); ++k) {
                over += e.table->expect(in[k], r, ov).overflow;
                under += std::isfinite(in[k]) && in[k] != 0 && out[k] == 0;
            }
            if (got.overflow != over || got.underflow != under)
                return fail("reported overflow " + std::to_string(got.overflow) + ", underflow " +
                                std::to_string(got.underflow) + "; the outputs hold " + std::to_string(under) +
                                " finite non-zero inputs that came out zero, and the model of the codes gives " +
                                std::to_string(over) + " overflows",
                            std::to_string(in.size()) + " grid and random inputs plus +-Inf and NaN (" +
                                mode_text(o) + ")",
                            "overflow: +-Inf or finite inputs rounded beyond the range; underflow: finite non-zero "
                            "inputs that came out zero");
        }
    }
    return pass("overflow and underflow counts equal a count over the outputs");
}

// -------- stochastic.*

bool has_stochastic(const env& e) {
    return (e.format->info().rounding_modes & (1u << ALTGRAD_ROUND_STOCHASTIC)) != 0;
}

result check_sr_neighbours(env& e) {
    e.drew_random = true;
    if (!has_stochastic(e)) return skip("the format does not implement stochastic rounding");
    if (!e.table) return needs_table(e);
    std::vector<float> in;
    for (float x : all_probes(e))
        if (x <= e.table->max() && x >= e.table->lowest()) in.push_back(x);
    quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
    o.seed = e.opts.seed;
    const std::vector<float> out = quantize(e, in, o);
    for (size_t k = 0; k < in.size(); ++k) {
        const auto n = e.table->neighbours(in[k]);
        if (!(out[k] == n->first.value || out[k] == n->second.value))
            return fail("got " + hex_float(out[k]) + ", not one of the neighbours " + hex_float(n->first.value) + " and " +
                            hex_float(n->second.value),
                        "x = " + hex_float(in[k]) + " (stochastic, seed " + std::to_string(o.seed) + ", offset " +
                            std::to_string(k) + ")",
                        "stochastic rounding picks one of the two neighbouring values");
    }
    return pass(std::to_string(in.size()) + " inputs each went to one of their two neighbours");
}

result check_sr_unbiased(env& e) {
    e.drew_random = true;
    if (!has_stochastic(e)) return skip("the format does not implement stochastic rounding");
    if (!e.table) return needs_table(e);
    const auto& f = e.table->finite();
    // Intervals: the first positive one (subnormal range), one near 1 (or
    // the middle), and the last below max.
    std::vector<size_t> starts;
    for (size_t k = 0; k + 1 < f.size(); ++k)
        if (f[k].value >= 0) {
            starts.push_back(k);
            break;
        }
    size_t near_one = 0;
    for (size_t k = 0; k + 1 < f.size(); ++k)
        if (f[k].value <= 1.0f) near_one = k;
    starts.push_back(near_one);
    starts.push_back(f.size() - 2);
    const size_t draws = 20000;
    for (size_t k : starts) {
        const double lo = f[k].value, hi = f[k + 1].value;
        for (double frac : {0.125, 1.0 / 3, 0.5, 0.9}) {
            const float x = static_cast<float>(lo + frac * (hi - lo));
            const double p = (static_cast<double>(x) - lo) / (hi - lo);
            if (p <= 0 || p >= 1) continue;
            quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
            o.seed = e.opts.seed + k;
            const std::vector<float> out = quantize(e, std::vector<float>(draws, x), o);
            double sum = 0;
            for (float y : out) sum += y;
            const double mean = sum / draws;
            const double bound = 5 * (hi - lo) * std::sqrt(p * (1 - p) / draws);
            if (std::fabs(mean - x) > bound)
                return fail("mean of " + std::to_string(draws) + " draws is " + hex_float(mean) + ", " +
                                std::to_string((mean - x) / (hi - lo)) + " steps from x; the 5-sigma bound is " +
                                std::to_string(bound / (hi - lo)) + " steps",
                            "x = " + hex_float(x) + " between " + hex_float(lo) + " and " + hex_float(hi) + " (seed " +
                                std::to_string(o.seed) + ")",
                            "round away from zero with probability equal to the distance from the lower neighbour "
                            "divided by the gap");
        }
    }
    return pass("the mean error at 4 points in each of " + std::to_string(starts.size()) +
                " intervals is within 5 sigma of zero (20000 draws each)");
}

result check_sr_reproducible(env& e) {
    e.drew_random = true;
    if (!has_stochastic(e)) return skip("the format does not implement stochastic rounding");
    // Only inputs that are not representable leave the generator a choice.
    std::vector<float> in;
    {
        const std::vector<float> probes = random_probes(e, 20000);
        const std::vector<float> nearest = quantize(e, probes, mode(ALTGRAD_ROUND_NEAREST_EVEN));
        for (size_t k = 0; k < probes.size() && in.size() < 4096; ++k)
            if (!same(nearest[k], probes[k]) && std::isfinite(nearest[k])) in.push_back(probes[k]);
    }
    if (in.size() < 64) return skip("almost every input is representable: nothing for rounding to choose");
    quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
    o.seed = e.opts.seed;
    o.offset = 12345;
    const std::vector<float> a = quantize(e, in, o), b = quantize(e, in, o);
    for (size_t k = 0; k < in.size(); ++k)
        if (!same(a[k], b[k]))
            return fail("two calls with the same seed and offset differ: " + hex_float(a[k]) + " vs " + hex_float(b[k]),
                        "x = " + hex_float(in[k]) + " (seed " + std::to_string(o.seed) + ", offset " +
                            std::to_string(o.offset + k) + ")",
                        "draw the random bits from (seed, offset + i) only");
    o.seed += 1;
    const std::vector<float> c = quantize(e, in, o);
    if (std::equal(a.begin(), a.end(), c.begin(), same))
        return fail("a different seed gave identical results on " + std::to_string(in.size()) + " inputs", "seeds " + std::to_string(o.seed - 1) +
                                                                                  " and " + std::to_string(o.seed),
                    "the seed must key the generator");
    return pass("same seed and offset give the same bits; another seed gives others");
}

result check_sr_chunking(env& e) {
    e.drew_random = true;
    if (!has_stochastic(e)) return skip("the format does not implement stochastic rounding");
    const std::vector<float> in = random_probes(e, 5000);
    quantize_options o = mode(ALTGRAD_ROUND_STOCHASTIC);
    o.seed = e.opts.seed;
    o.offset = 7;
    const std::vector<float> whole = quantize(e, in, o);
    for (size_t piece : {size_t{1}, size_t{3}, size_t{511}, size_t{513}}) {
        std::vector<float> out;
        for (size_t start = 0; start < in.size(); start += piece) {
            const size_t n = std::min(piece, in.size() - start);
            quantize_options p = o;
            p.offset = o.offset + start;
            const std::vector<float> part = quantize(e, std::vector<float>(in.begin() + start, in.begin() + start + n), p);
            out.insert(out.end(), part.begin(), part.end());
        }
        for (size_t k = 0; k < in.size(); ++k)
            if (!same(out[k], whole[k]))
                return fail("in pieces of " + std::to_string(piece) + " element " + std::to_string(k) + " gave " +
                                hex_float(out[k]) + ", in one call " + hex_float(whole[k]),
                            "x = " + hex_float(in[k]) + " (seed " + std::to_string(o.seed) + ", offset " +
                                std::to_string(o.offset + k) + ")",
                            "element i must draw from (seed, offset + i), whatever the call's length");
    }
    return pass("one call equals pieces of 1, 3, 511 and 513 elements with matching offsets");
}

// -------- quantize.block_scales (ABI 1.2)

// Scales as block-scaling hosts make them: powers of two over a wide range
// (OCP MX) and general values (amax / max).
std::vector<float> kit_block_scales(size_t blocks) {
    std::vector<float> s;
    for (size_t b = 0; b < blocks; ++b)
        s.push_back(b % 3 == 2 ? 0.37f * static_cast<float>(b + 1) : std::ldexp(1.0f, static_cast<int>(b % 23) - 11));
    return s;
}

const char* const kBlockScaleHint =
    "element i must use block_scales[i / block_size] in place of scale, and draw its random bits from (seed, "
    "offset + i): exactly one call per block";

// Quantize of `in` with block scales against one call per block (the
// definition in abi/format.h): values and summed counts.
std::optional<result> block_quantize_differs(env& e, const std::vector<float>& in, const std::vector<float>& scales,
                                             const float* guarded_scales, size_t block, altgrad_rounding r) {
    quantize_options o = mode(r);
    o.seed = e.opts.seed;
    o.offset = 5;
    std::vector<float> want;
    quantize_counts want_counts;
    for (size_t first = 0; first < in.size(); first += block) {
        quantize_options one = o;
        one.scale = scales[first / block];
        one.offset = o.offset + first;
        quantize_counts c;
        const std::vector<float> part = quantize(
            e, std::vector<float>(in.begin() + first, in.begin() + std::min(in.size(), first + block)), one, &c);
        want.insert(want.end(), part.begin(), part.end());
        want_counts.overflow += c.overflow;
        want_counts.underflow += c.underflow;
    }
    o.block_scales = guarded_scales;
    o.block_size = block;
    quantize_counts got_counts;
    const std::vector<float> got = quantize(e, in, o, &got_counts);
    for (size_t k = 0; k < in.size(); ++k)
        if (!same(got[k], want[k]))
            return fail("element " + std::to_string(k) + " (block " + std::to_string(k / block) + ", scale " +
                            hex_float(scales[k / block]) + ") gave " + hex_float(got[k]) +
                            "; as a call of its own the block gives " + hex_float(want[k]),
                        "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")", kBlockScaleHint);
    if (got_counts.overflow != want_counts.overflow || got_counts.underflow != want_counts.underflow)
        return fail("reported overflow " + std::to_string(got_counts.overflow) + ", underflow " +
                        std::to_string(got_counts.underflow) + "; the calls per block report " +
                        std::to_string(want_counts.overflow) + " and " + std::to_string(want_counts.underflow),
                    mode_text(o), "the counts of a block-scaled call are the sums over its blocks");
    return std::nullopt;
}

// decode(encode(x)) with block scales against quantize with them.
std::optional<result> block_codes_differ(env& e, std::vector<float> in, const float* guarded_scales, size_t block) {
    if (e.format->info().nan_code_count == 0)
        std::replace_if(in.begin(), in.end(), [](float x) { return std::isnan(x); }, 0.5f);
    quantize_options o = mode(ALTGRAD_ROUND_NEAREST_EVEN);
    o.block_scales = guarded_scales;
    o.block_size = block;
    const std::vector<float> decoded = decode(e, encode(e, in, o), 1.0f, guarded_scales, block);
    const std::vector<float> quantized = quantize(e, in, o);
    for (size_t k = 0; k < in.size(); ++k)
        if (!same(decoded[k], quantized[k]))
            return fail("decode(encode(x)) with block scales gave " + hex_float(decoded[k]) + ", quantize " +
                            hex_float(quantized[k]),
                        "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                        "encode and decode take the block scales as quantize does");
    return std::nullopt;
}

// A block scale that is zero, negative, NaN or Inf (in the short last block) is refused.
std::optional<result> bad_block_scale_accepted(env& e) {
    for (float bad : {0.0f, -1.0f, NAN, INFINITY}) {
        guarded_array<float> scale_buffer(std::vector<float>{1.0f, 2.0f, bad}, "block_scales");
        scale_buffer.seal();
        quantize_options o = mode(ALTGRAD_ROUND_NEAREST_EVEN);
        o.block_scales = scale_buffer.data();
        o.block_size = 4;
        try {
            quantize(e, std::vector<float>(10, 1.0f), o);
        } catch (const error&) {
            continue;
        }
        return fail("a block scale of " + hex_float(bad) + " was accepted",
                    "10 elements in blocks of 4, scales 1, 2, " + hex_float(bad),
                    "every block scale must be finite and > 0 (ALTGRAD_STATUS_INVALID_ARGUMENT otherwise)");
    }
    return std::nullopt;
}

// A block-scaled call must equal one call per block with its scale and
// offset (abi/format.h), for quantize, encode and decode; a bad block scale
// must be refused.
result check_block_scales(env& e) {
    e.drew_random = true;
    if (!e.format->takes_block_scales())
        return skip("built for ABI " + version_string(e.format->plugin().entry->abi_version, false) +
                    ", before block scales: the host calls it once per block");
    // Grid and random probes, thinned to about 5000 (one call per block of 7
    // over a 16-bit format's full grid would take minutes).
    const std::vector<float> probes = all_probes(e, 3000);
    std::vector<float> in;
    const size_t stride = probes.size() / 5000 + 1;
    for (size_t k = 0; k < probes.size(); k += stride) in.push_back(probes[k]);
    for (size_t block : {size_t{32}, size_t{7}}) {  // 7 leaves a short last block
        const std::vector<float> scales = kit_block_scales((in.size() + block - 1) / block);
        guarded_array<float> scale_buffer(scales, "block_scales");
        scale_buffer.seal();
        for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC})
            if (e.format->info().rounding_modes & (1u << r))
                if (auto bad = block_quantize_differs(e, in, scales, scale_buffer.data(), block, r)) return *bad;
        if (auto bad = block_codes_differ(e, in, scale_buffer.data(), block)) return *bad;
    }
    if (auto bad = bad_block_scale_accepted(e)) return *bad;
    return pass("calls with block scales (blocks of 32 and of 7, a short last block) equal one call per block; "
                "zero, negative, NaN and Inf block scales are refused");
}

// -------- concurrency.*

result check_threads(env& e) {
    e.drew_random = true;
    const altgrad_format_info& i = e.format->info();
    constexpr int kThreads = 8, kRepeats = 10;
    std::vector<std::vector<float>> inputs, serial;
    std::vector<quantize_options> modes;
    for (int t = 0; t < kThreads; ++t) {
        inputs.push_back(random_probes(e, 20000));
        altgrad_rounding r = (t % 2 == 1 && (i.rounding_modes & (1u << ALTGRAD_ROUND_STOCHASTIC)))
                                 ? ALTGRAD_ROUND_STOCHASTIC
                                 : ALTGRAD_ROUND_NEAREST_EVEN;
        quantize_options o = mode(r);
        o.seed = e.opts.seed + static_cast<uint64_t>(t);
        modes.push_back(o);
        serial.push_back(quantize(e, inputs.back(), o));
    }
    std::vector<std::string> problems(kThreads);
    const call_note note("quantize from " + std::to_string(kThreads) + " threads at once (" +
                         std::to_string(inputs[0].size()) + " elements each)");
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t)
        pool.emplace_back([&, t] {
            try {
                for (int rep = 0; rep < kRepeats && problems[t].empty(); ++rep) {
                    const std::vector<float> out = quantize_unnoted(e, inputs[t], modes[t]);
                    for (size_t k = 0; k < out.size(); ++k)
                        if (!same(out[k], serial[t][k])) {
                            problems[t] = "thread " + std::to_string(t) + " element " + std::to_string(k) + ": " +
                                          hex_float(out[k]) + " concurrently, " + hex_float(serial[t][k]) + " alone|x = " +
                                          hex_float(inputs[t][k]) + " (" + mode_text(modes[t]) + ")";
                            break;
                        }
                }
            } catch (const std::exception& x) {
                problems[t] = std::string(x.what()) + "|";
            }
        });
    for (std::thread& th : pool) th.join();
    for (const std::string& p : problems)
        if (!p.empty()) {
            const size_t bar = p.find('|');
            return fail(p.substr(0, bar), p.substr(bar + 1),
                        "quantize must not write shared state: no global or instance buffers");
        }
    return pass(std::to_string(kThreads) + " threads calling quantize at once match the serial results");
}

// ---------------------------------------------------------------- intervention and diagnostic checks

// Load the plugin through the host; a refusal is load.*'s finding, so skip.
bool load_for_check(env& e, result& why) {
    try {
        e.plugin = load_plugin(*e.target.info);
        return true;
    } catch (const std::exception& x) {
        why = skip(std::string("the plugin does not load (see load.abi_version, load.descriptor): ") + x.what());
        return false;
    }
}

std::string params_text(const std::map<std::string, std::string>& p) {
    std::string s;
    for (const auto& [k, v] : p) s += (s.empty() ? "" : ", ") + k + " = \"" + v + "\"";
    return s.empty() ? "(defaults)" : s;
}

// Create an instance of the target's kind; throws what the handle throws.
void create_instance(const env& e, const std::map<std::string, std::string>& params) {
    if (e.plugin->info.kind == ALTGRAD_KIND_INTERVENTION) intervention_handle::create(e.plugin, params, "conformance");
    else if (e.plugin->info.kind == ALTGRAD_KIND_DIAGNOSTIC) diagnostic_handle::create(e.plugin, params, "conformance");
    else format_handle::create(e.plugin, params, "conformance");
}

result check_params_defaults(env& e) {
    result r;
    if (!load_for_check(e, r)) return r;
    try {
        create_instance(e, {});
    } catch (const std::exception& x) {
        return fail(std::string("create with the manifest's defaults failed: ") + x.what(), "(defaults)",
                    "the manifest's defaults must be values the plugin's create accepts");
    }
    return pass("create with the manifest's defaults (" + std::to_string(e.target.info->params.size()) +
                " parameters) succeeds");
}

std::string number_text(double x, bool integer) {
    if (integer) return std::to_string(static_cast<long long>(x));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return buf;
}

result check_params_refused(env& e) {
    result r;
    if (!load_for_check(e, r)) return r;
    const manifest& m = *e.target.info;
    size_t outside = 0, edges = 0, plugin_refusals = 0;
    // A value the host must refuse before create ever sees it.
    auto must_refuse = [&](const std::string& key, const std::string& value) -> std::optional<result> {
        ++outside;
        try {
            resolve_params(m, {{key, value}}, "conformance");
        } catch (const std::exception& x) {
            if (std::string(x.what()).empty())
                return fail("the refusal has no message", key + " = \"" + value + "\"", "");
            return std::nullopt;
        }
        return fail("the host accepted a value outside the declared range", key + " = \"" + value + "\"",
                    "the host's parameter validation must enforce the manifest's min, max and choices");
    };
    // A value inside the declared range (its edge): create may refuse it, but
    // only as an error with a message, never a crash.
    auto edge = [&](const std::string& key, const std::string& value) -> std::optional<result> {
        ++edges;
        try {
            create_instance(e, {{key, value}});
        } catch (const std::exception& x) {
            const std::string what = x.what();
            ++plugin_refusals;
            if (what.empty() || what.find("): no message") != std::string::npos)
                return fail("create refused a value in the manifest's range without a message: " + what,
                            key + " = \"" + value + "\"",
                            "fill altgrad_error.message (throw plugin_error with a message saying what is "
                            "accepted), or narrow the manifest's min/max to what create accepts");
        }
        return std::nullopt;
    };
    for (const param_decl& d : m.params) {
        const bool integer = d.type == ALTGRAD_PARAM_INT;
        if (d.type == ALTGRAD_PARAM_INT || d.type == ALTGRAD_PARAM_FLOAT) {
            if (d.min) {
                const double below = integer ? *d.min - 1 : (*d.min == 0 ? -1e-6 : *d.min - std::fabs(*d.min) * 1e-6);
                if (auto f = must_refuse(d.key, number_text(below, integer))) return *f;
                if (auto f = edge(d.key, number_text(*d.min, integer))) return *f;
            }
            if (d.max) {
                const double above = integer ? *d.max + 1 : (*d.max == 0 ? 1e-6 : *d.max + std::fabs(*d.max) * 1e-6);
                if (auto f = must_refuse(d.key, number_text(above, integer))) return *f;
                if (auto f = edge(d.key, number_text(*d.max, integer))) return *f;
            }
        } else if (d.type == ALTGRAD_PARAM_STRING && !d.choices.empty()) {
            std::string other = "not_a_choice";
            while (std::find(d.choices.begin(), d.choices.end(), other) != d.choices.end()) other += "_";
            if (auto f = must_refuse(d.key, other)) return *f;
            for (const std::string& c : d.choices)
                if (auto f = edge(d.key, c)) return *f;
        }
    }
    if (outside == 0) return skip("no parameter declares a min, max or choices");
    return pass(std::to_string(outside) + " values outside the declared ranges are refused by the host; " +
                std::to_string(edges) + " values at the edges create or are refused with a message (" +
                std::to_string(plugin_refusals) + " refused)");
}

// -------- intervention inputs and answers

const char* const kFormats[] = {"e7m0", "e5m2", "e4m3", "e3m4", "e1m6", "e0m7"};
const double kFormatMax[] = {4.611686018427388e18, 57344.0, 448.0, 15.5, 1.96875, 0.9921875};

// A plausible, varied step: a few tensors of each role, rates often high
// enough to make the bundled interventions act, now and then a non-finite
// loss.
observation random_observation(env& e, uint64_t step, uint32_t& nonfinite_run) {
    e.drew_random = true;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    observation o;
    o.step = step;
    const bool bad = u(e.rng) < 0.15;
    nonfinite_run = bad ? nonfinite_run + 1 : 0;
    o.loss = bad ? (u(e.rng) < 0.5 ? NAN : INFINITY) : 1.0 + 4.0 * u(e.rng);
    o.grad_norm = bad ? INFINITY : std::exp2(20.0 * u(e.rng) - 10.0);
    o.learning_rate = 1e-3 * u(e.rng);
    o.consecutive_nonfinite_steps = nonfinite_run;
    const altgrad_tensor_role roles[] = {ALTGRAD_TENSOR_WEIGHT, ALTGRAD_TENSOR_GRADIENT, ALTGRAD_TENSOR_ACTIVATION,
                                         ALTGRAD_TENSOR_OUTPUT_GRADIENT};
    for (int layer = 0; layer < 2; ++layer)
        for (altgrad_tensor_role role : roles) {
            tensor_observation t;
            t.name = "blocks." + std::to_string(layer) + ".fc." + std::to_string(static_cast<int>(role));
            t.role = role;
            const size_t f = static_cast<size_t>(u(e.rng) * 6) % 6;
            t.format = kFormats[f];
            t.format_max = kFormatMax[f];
            t.overflow_rate = u(e.rng) < 0.1 ? NAN : 0.05 * u(e.rng) * u(e.rng);
            t.underflow_rate = u(e.rng) < 0.1 ? NAN : u(e.rng);
            t.bit_stall_rate = role != ALTGRAD_TENSOR_WEIGHT || u(e.rng) < 0.2 ? NAN : u(e.rng);
            o.tensors.push_back(std::move(t));
        }
    return o;
}

std::vector<observation> random_history(env& e, size_t n) {
    std::vector<observation> h;
    uint32_t run = 0;
    for (size_t k = 0; k < n; ++k) h.push_back(random_observation(e, k, run));
    return h;
}

std::string answer_text(const std::vector<action>& acts) {
    std::string s;
    for (const action& a : acts)
        s += std::string("[") + action_kind_name(a.kind) + " " + hex_float(a.value) + " '" + a.tensor + "' '" + a.format +
             "' " + a.reason + "]";
    return s.empty() ? "(no actions)" : s;
}

std::string observation_text(const observation& o) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "step %llu: loss %s, grad_norm %s, %u non-finite in a row, %zu tensors",
                  static_cast<unsigned long long>(o.step), hex_float(o.loss).c_str(), hex_float(o.grad_norm).c_str(),
                  o.consecutive_nonfinite_steps, o.tensors.size());
    return buf;
}

// -------- diagnostic inputs and answers

// A format instance for the tensors' format_ref: a bundled format from the
// target's own plugins folder.
bool load_reference_format(env& e, result& why) {
    const fs::path dir = e.target.manifest_path.parent_path().parent_path();
    std::string tried;
    for (const char* name : {"e5m2", "e3m4", "e4m3"}) {
        const fs::path m = dir / name / "manifest.toml";
        std::error_code ec;
        if (!fs::exists(m, ec)) {
            tried += std::string(tried.empty() ? "" : ", ") + name;
            continue;
        }
        try {
            e.format = format_handle::create(load_plugin(read_manifest(m)));
            return true;
        } catch (const std::exception& x) {
            tried += std::string(tried.empty() ? "" : ", ") + name + " (" + x.what() + ")";
        }
    }
    why = skip("needs a format for the tensors' format_ref and found none usable in " + dir.string() + ": " + tried);
    return false;
}

// Tensors with owned storage; views point into it.
struct tensor_set {
    std::vector<std::string> names;
    std::vector<std::vector<float>> data, previous;
    std::vector<altgrad_tensor_view> views;
};

altgrad_tensor_view view_of(const env& e, const std::string& name, altgrad_tensor_role role, const float* data,
                            const float* previous, size_t count) {
    altgrad_tensor_view v{};
    v.struct_size = sizeof v;
    v.name = name.c_str();
    v.role = role;
    v.data = count ? data : nullptr;
    v.previous = previous;
    v.count = count;
    v.ndim = 1;
    v.shape[0] = static_cast<int64_t>(count);
    v.memory = ALTGRAD_MEMORY_HOST;
    v.format = e.format->ref();
    v.scale = 1.0f;
    return v;
}

// One tensor of each role the diagnostic is interested in (all roles when it
// declares none), `count` elements each, random magnitudes; `special`
// sprinkles NaN and +-Inf.
tensor_set make_tensors(env& e, const diagnostic_handle& d, size_t count, bool special = false) {
    e.drew_random = true;
    tensor_set s;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<altgrad_tensor_role> roles;
    for (int r = ALTGRAD_TENSOR_WEIGHT; r <= ALTGRAD_TENSOR_OUTPUT_GRADIENT; ++r)
        if (d.interests() == 0 || d.interested_in(static_cast<altgrad_tensor_role>(r)))
            roles.push_back(static_cast<altgrad_tensor_role>(r));
    for (size_t k = 0; k < roles.size(); ++k) {
        // A gradient is named like its weight, as the trainer does, so diagnostics that pair them can.
        s.names.push_back(roles[k] == ALTGRAD_TENSOR_GRADIENT && k > 0 && roles[0] == ALTGRAD_TENSOR_WEIGHT
                              ? s.names[0]
                              : "blocks.0.t" + std::to_string(k));
        std::vector<float> x(count), p(count);
        for (size_t i = 0; i < count; ++i) {
            const double mag = std::exp2(40.0 * u(e.rng) - 24.0);
            x[i] = static_cast<float>(u(e.rng) < 0.5 ? -mag : mag);
            p[i] = x[i] * static_cast<float>(1.0 + 0.01 * (u(e.rng) - 0.5));
            if (u(e.rng) < 0.05) x[i] = 0.0f;
            if (special) {
                const double c = u(e.rng);
                if (c < 0.1) x[i] = NAN;
                else if (c < 0.2) x[i] = c < 0.15 ? INFINITY : -INFINITY;
                else if (c < 0.25) p[i] = NAN;
            }
        }
        s.data.push_back(std::move(x));
        s.previous.push_back(std::move(p));
    }
    for (size_t k = 0; k < roles.size(); ++k)
        s.views.push_back(view_of(e, s.names[k], roles[k], s.data[k].data(),
                                  roles[k] == ALTGRAD_TENSOR_WEIGHT && count ? s.previous[k].data() : nullptr,
                                  count));
    // Attention probabilities are [batch, head, query, key], as the trainer hands them.
    for (size_t k = 0; k < roles.size(); ++k)
        if (roles[k] == ALTGRAD_TENSOR_ATTENTION_PROBS) {
            s.views[k].ndim = 4;
            const int64_t shape[4] = {1, 1, 1, static_cast<int64_t>(count)};
            for (int d = 0; d < 4; ++d) s.views[k].shape[d] = shape[d];
        }
    return s;
}

std::string values_text(const std::vector<diagnostic_value>& vals) {
    std::string s;
    for (const diagnostic_value& v : vals)
        s += "[" + (v.tensor_index == ALTGRAD_ALL_TENSORS ? std::string("all") : std::to_string(v.tensor_index)) +
             " " + v.name + " " + hex_float(v.value) + "]";
    return s.empty() ? "(no values)" : s;
}

bool same_double(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::memcmp(&a, &b, sizeof a) == 0;
}

bool same_values(const std::vector<diagnostic_value>& a, const std::vector<diagnostic_value>& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
        if (a[k].tensor_index != b[k].tensor_index || a[k].name != b[k].name || !same_double(a[k].value, b[k].value))
            return false;
    return true;
}

// The intervention and diagnostic calls, guarded as the format calls are:
// the inputs (the tensors array, each tensor's elements) read-only, every
// buffer between inaccessible pages, and a call note, so a plugin touching
// outside a buffer kills the check's process with a report naming the call.
std::vector<action> observe(intervention_handle& h, const observation& o) {
    const std::string call =
        "observe of step " + std::to_string(o.step) + " (tensor count " + std::to_string(o.tensors.size()) + ")";
    const call_note note(call);
    guarded_array<altgrad_tensor_observation> tensors(intervention_handle::abi_tensors(o), "tensors");
    tensors.seal();
    guarded_array<altgrad_action> actions(intervention_handle::action_capacity(o.tensors.size()), "actions");
    std::vector<action> answer =
        h.observe(intervention_handle::abi_observation(o, tensors.data()), actions.data(), actions.size());
    expect_front_intact(actions.buffer(), call, "actions");
    return answer;
}

std::vector<diagnostic_value> measure(diagnostic_handle& d, uint64_t step,
                                      const std::vector<altgrad_tensor_view>& views) {
    const std::string call =
        "measure of step " + std::to_string(step) + " (tensor count " + std::to_string(views.size()) + ")";
    const call_note note(call);
    std::vector<guarded_array<float>> elements;
    elements.reserve(3 * views.size());
    auto sealed_copy = [&](const float* from, size_t n, const std::string& name) -> const float* {
        if (from == nullptr) return nullptr;
        elements.emplace_back(std::vector<float>(from, from + n), name.c_str());
        elements.back().seal();
        return elements.back().data();
    };
    std::vector<altgrad_tensor_view> copies = views;
    for (size_t k = 0; k < copies.size(); ++k) {
        copies[k].data = sealed_copy(copies[k].data, copies[k].count, "data of tensor " + std::to_string(k));
        copies[k].previous = sealed_copy(copies[k].previous, copies[k].count, "previous of tensor " + std::to_string(k));
        copies[k].block_scales =
            sealed_copy(copies[k].block_scales, copies[k].block_count, "block_scales of tensor " + std::to_string(k));
    }
    guarded_array<altgrad_tensor_view> tensors(copies, "tensors");
    tensors.seal();
    guarded_array<altgrad_diagnostic_value> values(d.value_capacity(views.size()), "values");
    std::vector<diagnostic_value> answer = d.measure(step, views.empty() ? nullptr : tensors.data(), views.size(),
                                                     values.data(), values.size());
    expect_front_intact(values.buffer(), call, "values");
    return answer;
}

// The same kind of check for both kinds: a history of inputs, the answer to
// each as text.
struct history_runner {
    virtual ~history_runner() = default;
    virtual size_t length() const = 0;
    virtual std::string input(size_t k) const = 0;
    // A fresh instance; answer(i, k) feeds input k of history `which` to instance i.
    virtual size_t fresh() = 0;
    virtual std::string answer(size_t instance, int which, size_t k) = 0;
    virtual void drop(size_t instance) = 0;
};

struct intervention_runner : history_runner {
    env& e;
    std::vector<observation> h[2];
    std::vector<std::shared_ptr<intervention_handle>> live;
    intervention_runner(env& e_, size_t n) : e(e_) {
        h[0] = random_history(e, n);
        h[1] = random_history(e, n);
    }
    size_t length() const override { return h[0].size(); }
    std::string input(size_t k) const override { return observation_text(h[0][k]); }
    size_t fresh() override {
        live.push_back(intervention_handle::create(e.plugin, {}, "conformance"));
        return live.size() - 1;
    }
    std::string answer(size_t i, int which, size_t k) override { return answer_text(observe(*live[i], h[which][k])); }
    void drop(size_t i) override { live[i].reset(); }
};

struct diagnostic_runner : history_runner {
    env& e;
    std::vector<tensor_set> h[2];
    std::vector<std::shared_ptr<diagnostic_handle>> live;
    diagnostic_runner(env& e_, size_t n) : e(e_) {
        const std::shared_ptr<diagnostic_handle> probe = diagnostic_handle::create(e.plugin, {}, "conformance");
        for (int w = 0; w < 2; ++w)
            for (size_t k = 0; k < n; ++k) h[w].push_back(make_tensors(e, *probe, 64 + k % 5, k % 4 == 3));
    }
    size_t length() const override { return h[0].size(); }
    std::string input(size_t k) const override {
        return "measure step " + std::to_string(k) + ": " + std::to_string(h[0][k].views.size()) + " tensors of " +
               std::to_string(h[0][k].views.empty() ? 0 : h[0][k].views[0].count) + " random elements";
    }
    size_t fresh() override {
        live.push_back(diagnostic_handle::create(e.plugin, {}, "conformance"));
        return live.size() - 1;
    }
    std::string answer(size_t i, int which, size_t k) override {
        return values_text(measure(*live[i], k, h[which][k].views));
    }
    void drop(size_t i) override { live[i].reset(); }
};

std::unique_ptr<history_runner> make_runner(env& e, size_t n) {
    if (e.plugin->info.kind == ALTGRAD_KIND_INTERVENTION) return std::make_unique<intervention_runner>(e, n);
    return std::make_unique<diagnostic_runner>(e, n);
}

bool prepare(env& e, result& why) {
    if (!load_for_check(e, why)) return false;
    if (e.plugin->info.kind == ALTGRAD_KIND_DIAGNOSTIC && !load_reference_format(e, why)) return false;
    try {
        create_instance(e, {});
    } catch (const std::exception& x) {
        why = skip(std::string("the plugin does not create with its defaults (see params.defaults): ") + x.what());
        return false;
    }
    return true;
}

result check_separate_body(env& e);

result check_separate(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    try {
        return check_separate_body(e);
    } catch (const std::exception& x) {
        return fail(std::string("a call failed: ") + x.what(), "a random history of 40 inputs with the default parameters",
                    "every input the host can send must be answered without error (see the other checks for "
                    "which)");
    }
}

result check_separate_body(env& e) {
    constexpr size_t kSteps = 40;
    std::unique_ptr<history_runner> run = make_runner(e, kSteps);
    std::vector<std::string> alone[2];
    for (int w = 0; w < 2; ++w) {
        const size_t i = run->fresh();
        for (size_t k = 0; k < kSteps; ++k) alone[w].push_back(run->answer(i, w, k));
        run->drop(i);
    }
    const size_t a = run->fresh(), b = run->fresh();
    for (size_t k = 0; k < kSteps; ++k)
        for (int w = 0; w < 2; ++w) {
            const std::string got = run->answer(w == 0 ? a : b, w, k);
            if (got != alone[w][k])
                return fail("instance " + std::string(w == 0 ? "A" : "B") + " answered differently beside another "
                                "instance than alone at step " + std::to_string(k) + ": " + got + " vs alone " +
                                alone[w][k],
                            "two instances with the default parameters, each fed its own " +
                                std::to_string(kSteps) + "-step random history, calls interleaved A, B, A, B, ...",
                            "keep all state in the instance: no static or global variables that instances share");
        }
    return pass("two instances fed interleaved histories of " + std::to_string(kSteps) +
                " steps answer exactly as each does alone");
}

result check_deterministic_body(env& e);

result check_deterministic(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    try {
        return check_deterministic_body(e);
    } catch (const std::exception& x) {
        return fail(std::string("a call failed: ") + x.what(), "a random history of 40 inputs with the default parameters",
                    "every input the host can send must be answered without error (see the other checks for "
                    "which)");
    }
}

result check_deterministic_body(env& e) {
    constexpr size_t kSteps = 40;
    std::unique_ptr<history_runner> run = make_runner(e, kSteps);
    std::vector<std::string> first;
    const size_t x = run->fresh();
    for (size_t k = 0; k < kSteps; ++k) first.push_back(run->answer(x, 0, k));
    run->drop(x);
    const size_t y = run->fresh();
    for (size_t k = 0; k < kSteps; ++k) {
        const std::string got = run->answer(y, 0, k);
        if (got != first[k])
            return fail("a second fresh instance answered differently at step " + std::to_string(k) + ": " + got +
                            " vs " + first[k],
                        run->input(k) + " (after the same " + std::to_string(k) + " earlier inputs)",
                        "answers must depend only on the parameters and the inputs so far: no clocks, no "
                        "unseeded randomness, no uninitialised state");
    }
    return pass("two fresh instances fed the same " + std::to_string(kSteps) + " inputs give identical answers");
}

// -------- intervention-only

result check_observe_nonfinite(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<intervention_handle> h = intervention_handle::create(e.plugin, {}, "conformance");
    uint32_t run = 0;
    observation base = random_observation(e, 0, run);
    const double specials[] = {NAN, INFINITY, -INFINITY};
    uint64_t step = 0;
    for (double s : specials)
        for (int field = 0; field < 7; ++field) {
            observation o = base;
            o.step = step++;
            o.consecutive_nonfinite_steps = static_cast<uint32_t>(step);
            const char* what = "";
            switch (field) {
                case 0: o.loss = s; what = "loss"; break;
                case 1: o.grad_norm = s; what = "grad_norm"; break;
                case 2: o.learning_rate = s; what = "learning_rate"; break;
                case 3: for (auto& t : o.tensors) t.overflow_rate = s; what = "every overflow_rate"; break;
                case 4: for (auto& t : o.tensors) t.underflow_rate = s; what = "every underflow_rate"; break;
                case 5: for (auto& t : o.tensors) t.bit_stall_rate = s; what = "every bit_stall_rate"; break;
                default:
                    for (auto& t : o.tensors) t.format_max = s;
                    o.loss = o.grad_norm = s;
                    what = "every format_max, loss and grad_norm";
            }
            try {
                observe(*h, o);
            } catch (const std::exception& x) {
                return fail(std::string("observe failed: ") + x.what(),
                            std::string(what) + " = " + hex_float(s) + " (" + observation_text(o) + ")",
                            "NaN and Inf are ordinary inputs (a diverging run is what interventions are for): "
                            "answer no action or a valid one, never an error or an invalid action");
            }
        }
    return pass("21 steps with NaN, +Inf and -Inf in the loss, gradient norm, learning rate, rates and format_max "
                "were observed without error");
}

result check_observe_empty(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<intervention_handle> h = intervention_handle::create(e.plugin, {}, "conformance");
    for (uint64_t step = 0; step < 5; ++step) {
        observation o;
        o.step = step;
        o.loss = step == 2 ? NAN : 1.0;
        o.grad_norm = step == 2 ? INFINITY : 1.0;
        o.consecutive_nonfinite_steps = step == 2 ? 1 : 0;
        o.learning_rate = 1e-3;
        try {
            observe(*h, o);
        } catch (const std::exception& x) {
            return fail(std::string("observe failed: ") + x.what(), observation_text(o) + " (tensors = NULL)",
                        "a step may observe no tensors: tensors is NULL and tensor_count 0");
        }
    }
    return pass("5 steps with no tensors (tensors NULL, count 0) were observed without error");
}

result check_state_resume_body(env& e);

result check_state_resume(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    if (!intervention_handle::create(e.plugin, {}, "conformance")->saves_state())
        return skip("the plugin saves no state (no save_state/load_state): a resumed run starts it afresh");
    try {
        return check_state_resume_body(e);
    } catch (const std::exception& x) {
        return fail(std::string("a call failed: ") + x.what(),
                    "a random history of 40 steps, saved after 0, 13 and 27 of them and loaded into a fresh instance",
                    "save_state must succeed in every state observe can reach, and load_state must accept what "
                    "save_state wrote");
    }
}

// A step after which nothing is wrong: finite loss and gradient, no overflow,
// underflow or stall. State is what makes an instance answer these
// differently (clipping left on), so the kit replays them after a resume too.
observation calm(observation o) {
    o.loss = 2.0;
    o.grad_norm = 1.0;
    o.consecutive_nonfinite_steps = 0;
    for (tensor_observation& t : o.tensors) t.overflow_rate = t.underflow_rate = t.bit_stall_rate = 0.0;
    return o;
}

// load_state with the bytes in a guarded, read-only buffer: reading past the
// state or writing into it faults, and the check names the call.
void load_state(intervention_handle& h, const std::string& bytes) {
    const call_note note("load_state of " + std::to_string(bytes.size()) + " bytes");
    guarded_buffer state(bytes.size(), 1, "state");
    if (!bytes.empty()) std::memcpy(state.data(), bytes.data(), bytes.size());
    state.seal();
    h.load_state(state.data(), bytes.size());
}

result check_state_resume_body(env& e) {
    constexpr size_t kSteps = 40;
    const std::vector<observation> h = random_history(e, kSteps);
    for (const size_t split : {size_t{0}, size_t{13}, size_t{27}})
        for (const bool calm_after : {false, true}) {
            const std::shared_ptr<intervention_handle> original =
                intervention_handle::create(e.plugin, {}, "conformance");
            for (size_t k = 0; k < split; ++k) observe(*original, h[k]);
            const std::string bytes = original->save_state();
            const std::string where = "saved after " + std::to_string(split) + " steps of a random history (" +
                                      std::to_string(bytes.size()) + " bytes)";
            if (original->save_state() != bytes)
                return fail("saving twice in a row gave different bytes", where,
                            "save_state must not change the instance, and must write the same bytes for the same "
                            "state");
            if (!bytes.empty()) {
                try {
                    load_state(*intervention_handle::create(e.plugin, {}, "conformance"),
                               bytes.substr(0, bytes.size() - 1));
                    return fail("a state cut short by one byte was accepted", where,
                                "load_state must refuse bytes it cannot read with INVALID_ARGUMENT (the SDK's "
                                "state_reader does): a truncated checkpoint must not resume silently");
                } catch (const error&) {
                }
            }
            const std::shared_ptr<intervention_handle> restored =
                intervention_handle::create(e.plugin, {}, "conformance");
            load_state(*restored, bytes);
            for (size_t k = split; k < kSteps; ++k) {
                const observation o = calm_after ? calm(h[k]) : h[k];
                const std::string want = answer_text(observe(*original, o));
                const std::string got = answer_text(observe(*restored, o));
                if (got != want)
                    return fail("the restored instance answered " + got + " where the original answered " + want,
                                where + ", then " + (calm_after ? "calm steps (finite, no overflow): " : "") +
                                    observation_text(o),
                                "save_state must write everything later answers depend on, and load_state "
                                "restore it");
            }
        }
    return pass("states saved after 0, 13 and 27 of 40 random steps, loaded into fresh instances, give the original's "
                "answers to the rest of the history and to calm steps; a state cut short is refused");
}

// -------- diagnostic-only

result check_measure_nonfinite(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<diagnostic_handle> d = diagnostic_handle::create(e.plugin, {}, "conformance");
    for (uint64_t step = 0; step < 4; ++step) {
        tensor_set s = make_tensors(e, *d, 257, true);
        if (step == 3)  // all of one kind
            for (size_t k = 0; k < s.data.size(); ++k)
                std::fill(s.data[k].begin(), s.data[k].end(), k % 2 ? INFINITY : NAN);
        try {
            measure(*d, step, s.views);
        } catch (const std::exception& x) {
            return fail(std::string("measure failed: ") + x.what(),
                        std::to_string(s.views.size()) + " tensors of 257 elements, " +
                            (step == 3 ? "every element NaN or every element Inf" : "about 10% NaN and 10% +-Inf"),
                        "NaN and Inf elements must be handled: skip them or answer NaN, never an error");
        }
    }
    return pass("tensors with NaN and +-Inf elements (some, and all) measure without error");
}

result check_measure_empty(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<diagnostic_handle> d = diagnostic_handle::create(e.plugin, {}, "conformance");
    try {
        tensor_set s = make_tensors(e, *d, 0);
        measure(*d, 0, s.views);
        tensor_set t = make_tensors(e, *d, 16);
        tensor_set z = make_tensors(e, *d, 0);
        measure(*d, 1, t.views);
        measure(*d, 2, z.views);  // after a non-empty call, with state to compare against
        measure(*d, 3, {});
    } catch (const std::exception& x) {
        return fail(std::string("measure failed: ") + x.what(),
                    "tensors of count 0 (data NULL), also after a call with 16 elements, and a call with no tensors",
                    "empty tensors (count 0) must be handled: answer NaN or nothing, never an error");
    }
    return pass("count-0 tensors and a call with no tensors measure without error");
}

// ABI 1.2 views: a tensor whose blocks all have scale s is the same tensor as
// one scaled per tensor by s, so a diagnostic must answer the same for both.
// One that reads `scale` only sees scale 1 in the block-scaled view and
// answers differently (unless its answer does not depend on the scale).
result check_measure_block_scales(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const altgrad_version abi = e.plugin->entry->abi_version;
    if (abi.major == 1 && abi.minor < 2)
        return skip("built for ABI " + version_string(abi, false) + ": its views end before block scales");
    if (!e.format->takes_block_scales())
        return skip("the reference format is built before ABI 1.2 block scales");
    constexpr int64_t kRows = 8, kCols = 12;
    constexpr size_t kBlock = 5;  // three blocks per row, the last of 2
    constexpr float kScale = 3.0f;  // not a power of two: it moves the grid
    const std::vector<float> scales(kRows * ((kCols + kBlock - 1) / kBlock), kScale);
    const std::shared_ptr<diagnostic_handle> probe = diagnostic_handle::create(e.plugin, {}, "conformance");
    tensor_set s = make_tensors(e, *probe, kRows * kCols);
    std::vector<altgrad_tensor_view> per_tensor = s.views, blocked = s.views;
    for (size_t k = 0; k < s.views.size(); ++k) {
        if (s.views[k].role == ALTGRAD_TENSOR_ATTENTION_PROBS) continue;  // never block-scaled by the host
        for (altgrad_tensor_view* v : {&per_tensor[k], &blocked[k]}) {
            v->ndim = 2;
            v->shape[0] = kRows;
            v->shape[1] = kCols;
        }
        per_tensor[k].scale = kScale;
        blocked[k].block_scales = scales.data();
        blocked[k].block_size = kBlock;
        blocked[k].block_count = scales.size();
    }
    const std::string input = std::to_string(s.views.size()) + " tensors [8, 12] with random magnitudes: at scale 3, "
                              "and with blocks of 5 along the rows (the last of 2) all of scale 3 and scale 1";
    std::vector<diagnostic_value> a, b;
    try {
        a = measure(*diagnostic_handle::create(e.plugin, {}, "conformance"), 0, per_tensor);
        b = measure(*diagnostic_handle::create(e.plugin, {}, "conformance"), 0, blocked);
    } catch (const std::exception& x) {
        return fail(std::string("measure failed: ") + x.what(), input,
                    "a view with block scales (abi/tensor.h) must be measured like any other");
    }
    if (!same_values(a, b))
        return fail("the block-scaled view answered " + values_text(b) + ", the per-tensor one " + values_text(a),
                    input,
                    "read each element's scale with altgrad::sdk::scale_at (or quantize_like / quantize_gathered), "
                    "not the view's `scale`, which is 1 when block_scales is set");
    return pass("blocks all of scale 3 answer as one scale of 3 (" + std::to_string(a.size()) + " values)");
}

bool good_name(const std::string& n) {
    if (n.empty()) return false;
    for (char c : n)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
    return true;
}

result check_measure_names(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<diagnostic_handle> d = diagnostic_handle::create(e.plugin, {}, "conformance");
    const size_t per = d->max_values_per_tensor();
    size_t total = 0, calls = 0;
    std::vector<std::pair<std::string, tensor_set>> inputs;
    for (size_t k = 0; k < 6; ++k)
        inputs.emplace_back(std::to_string(k % 3 == 2 ? 0 : 100) + " elements" + (k % 2 ? ", NaN and Inf" : ""),
                            make_tensors(e, *d, k % 3 == 2 ? 0 : 100, k % 2 == 1));
    for (auto& [text, s] : inputs) {
        const size_t n = s.views.size();
        std::vector<diagnostic_value> vals;
        try {
            vals = measure(*d, calls, s.views);
        } catch (const std::exception& x) {
            return fail(std::string("measure failed: ") + x.what(), std::to_string(n) + " tensors of " + text,
                        "names are [a-z0-9_.]+, tensor_index < tensor_count or ALTGRAD_ALL_TENSORS, and at most "
                        "max_values_per_tensor * (tensor_count + 1) values");
        }
        ++calls;
        if (vals.size() > per * (n + 1))
            return fail(std::to_string(vals.size()) + " values exceed max_values_per_tensor " + std::to_string(per) +
                            " x (" + std::to_string(n) + " + 1)",
                        std::to_string(n) + " tensors of " + text, "raise max_values_per_tensor or write fewer");
        for (const diagnostic_value& v : vals) {
            if (!good_name(v.name))
                return fail("value name '" + v.name + "' is not [a-z0-9_.]+", std::to_string(n) + " tensors of " + text,
                            "use lower-case letters, digits, '_' and '.' only");
            if (v.tensor_index != ALTGRAD_ALL_TENSORS && v.tensor_index >= n)
                return fail("value '" + v.name + "' names tensor " + std::to_string(v.tensor_index) + " of " +
                                std::to_string(n),
                            std::to_string(n) + " tensors of " + text,
                            "tensor_index is an index into this call's tensors, or ALTGRAD_ALL_TENSORS");
        }
        total += vals.size();
    }
    return pass(std::to_string(total) + " values from " + std::to_string(calls) +
                " calls have valid names and indices, within max_values_per_tensor " + std::to_string(per) +
                " x (n + 1)");
}

// -------- memory.*

// Heap bytes in use by the allocator's own count: glibc's, or ASan's in a
// sanitizer build (its malloc replaces glibc's, whose counters then see
// nothing).
int64_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
    return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
#else
    const struct mallinfo2 m = ::mallinfo2();
    return static_cast<int64_t>(m.uordblks + m.hblkhd);
#endif
}

// Resident set size (catches memory a plugin maps itself and never unmaps).
// Not under ASan, whose quarantine keeps freed memory resident by design.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCheckResident = false;
#else
constexpr bool kCheckResident = true;
#endif
int64_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    int64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

// Rounds of calls after a warm-up (lazy initialisation, first-touch pages and
// the allocator's own caches settle there). The heap slack lets a plugin
// allocate up to 16 KiB once, later than the warm-up, yet fails any leak of
// more than 16 bytes a round; glibc's smallest chunk is 32 bytes, so a leak of
// one allocation a round cannot pass. The resident slack is coarser (8 KiB a
// round): the page cache of /proc and the stack move it a little.
constexpr int kLeakWarmup = 50, kLeakRounds = 1000;
constexpr int64_t kHeapSlack = 16 << 10, kResidentSlack = 8 << 20;

result check_leak_rounds(const std::function<void(int)>& round, const std::string& what) {
    for (int k = 0; k < kLeakWarmup; ++k) round(k);
    const int64_t heap0 = heap_in_use(), resident0 = resident_bytes();
    for (int k = 0; k < kLeakRounds; ++k) round(kLeakWarmup + k);
    const int64_t heap = heap_in_use() - heap0, resident = resident_bytes() - resident0;
    const std::string rounds = std::to_string(kLeakRounds) + " rounds of " + what + ", after " +
                               std::to_string(kLeakWarmup) + " rounds of warm-up";
    const char* hint = "free everything a call allocates (or keep it in the instance and free it in destroy); memory "
                       "that grows with every call runs a long training out of memory";
    if (heap > kHeapSlack)
        return fail("the heap grew by " + std::to_string(heap) + " bytes (" + std::to_string(heap / kLeakRounds) +
                        " a round; at most " + std::to_string(kHeapSlack) + " in all is allowed)",
                    rounds, hint);
    if (kCheckResident && resident > kResidentSlack)
        return fail("the resident size grew by " + std::to_string(resident) + " bytes (" +
                        std::to_string(resident / kLeakRounds) + " a round; at most " +
                        std::to_string(kResidentSlack) + " in all is allowed)",
                    rounds, hint);
    return pass("heap " + std::to_string(heap) + " bytes, resident size " + std::to_string(resident) +
                " bytes of growth over " + rounds);
}

result check_leak(env& e) {
    result why;
    if (!load_for_check(e, why)) return why;
    if (e.plugin->info.kind != ALTGRAD_KIND_FORMAT) {
        if (!prepare(e, why)) return why;
        constexpr size_t kInputs = 40;
        std::unique_ptr<history_runner> run = make_runner(e, kInputs);
        const size_t instance = run->fresh();
        return check_leak_rounds([&](int k) { run->answer(instance, 0, static_cast<size_t>(k) % kInputs); },
                                 std::string(e.plugin->info.kind == ALTGRAD_KIND_INTERVENTION ? "observe" : "measure") +
                                     " on one instance (a " + std::to_string(kInputs) +
                                     "-input random history, repeated)");
    }
    try {
        e.format = format_handle::create(e.plugin);
    } catch (const std::exception& x) {
        return skip(std::string("the plugin does not create (see load.descriptor): ") + x.what());
    }
    const std::vector<float> in = random_probes(e, 1024);
    std::vector<altgrad_rounding> modes;
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_ROUND_TOWARD_ZERO})
        if (e.format->info().rounding_modes & (1u << r)) modes.push_back(r);
    return check_leak_rounds(
        [&](int) {
            e.format = format_handle::create(e.plugin);
            for (altgrad_rounding r : modes) quantize(e, in, mode(r));
            decode(e, encode(e, in, mode(ALTGRAD_ROUND_NEAREST_EVEN)));
            e.format.reset();
        },
        "create, quantize " + std::to_string(in.size()) + " random values under each rounding mode, encode and "
        "decode them, destroy");
}

// ---------------------------------------------------------------- registry

struct check_def {
    const char* name;
    const char* description;
    bool needs_format;  // runs on a created format instance
    result (*run)(env&);
};

const std::vector<check_def>& format_checks() {
    static const std::vector<check_def> checks = {
        {"load.manifest", "the manifest parses and is valid", false, check_manifest},
        {"load.library", "the library loads with RTLD_NOW | RTLD_LOCAL", false, check_library},
        {"load.exports", "the library exports only " ALTGRAD_ENTRY_SYMBOL, false, check_exports},
        {"load.abi_version", "the entry reports an ABI version this host accepts", false, check_abi_version},
        {"load.descriptor", "the descriptor and tables are valid and match the manifest", false, check_descriptor},
        {"load.repeat", "loads, unloads, creates and destroys repeatedly", false, check_repeat_load},
        {"codes.roundtrip", "every code decodes and encodes back to itself (NaN to the canonical NaN)", true,
         check_code_roundtrip},
        {"codes.declared_range", "the declared max, lowest, smallest values, Inf and NaN match the codes", true,
         check_declared_range},
        {"quantize.nearest", "nearest-even agrees with a model built from the codes", true, check_nearest},
        {"quantize.ties_to_even", "exact ties go to the even code", true, check_ties},
        {"quantize.toward_zero", "toward-zero agrees with the model", true, check_toward_zero},
        {"quantize.idempotent", "q(q(x)) = q(x)", true, check_idempotent},
        {"quantize.monotone", "x1 <= x2 implies q(x1) <= q(x2)", true, check_monotone},
        {"quantize.sign_symmetric", "q(-x) = -q(x) where both signs are in range", true, check_sign_symmetric},
        {"quantize.overflow_saturate", "at and beyond max under saturate", true, check_overflow_saturate},
        {"quantize.overflow_nonfinite", "at and beyond max under non-finite", true, check_overflow_nonfinite},
        {"quantize.specials", "NaN, +-Inf, +-0", true, check_specials},
        {"quantize.subnormal_boundary", "the smallest values and the gap to zero", true, check_subnormal_boundary},
        {"quantize.encode_decode", "quantize agrees with encode then decode", true, check_encode_decode},
        {"quantize.scaling", "scaling behaves as q(x*s)/s", true, check_scaling},
        {"quantize.counts", "overflow and underflow counts match the outputs", true, check_counts},
        {"quantize.block_scales", "ABI 1.2: a block-scaled call equals one call per block; bad scales refused", true,
         check_block_scales},
        {"stochastic.neighbours", "stochastic rounding returns one of the two neighbours", true, check_sr_neighbours},
        {"stochastic.unbiased", "the mean stochastic error is zero within 5 sigma", true, check_sr_unbiased},
        {"stochastic.reproducible", "same seed and offset, same bits", true, check_sr_reproducible},
        {"stochastic.chunking", "results do not depend on chunking", true, check_sr_chunking},
        {"concurrency.threads", "many threads at once give the serial result", true, check_threads},
    };
    return checks;
}

// The load checks, which every kind runs first.
std::vector<check_def> load_checks() {
    const std::vector<check_def>& f = format_checks();
    std::vector<check_def> out;
    for (const check_def& c : f)
        if (std::string(c.name).rfind("load.", 0) == 0) out.push_back(c);
    return out;
}

// Checks for intervention and diagnostic plugins load the plugin themselves
// (a diagnostic also loads a bundled format for its tensors' format_ref).
const std::vector<check_def>& shared_instance_checks() {
    static const std::vector<check_def> checks = {
        {"params.defaults", "intervention, diagnostic: create with the manifest's defaults succeeds", false,
         check_params_defaults},
        {"params.refused",
         "intervention, diagnostic: values just outside a declared min, max or choices are refused; create refuses "
         "only with a message",
         false, check_params_refused},
        {"instances.separate", "intervention, diagnostic: two instances answer only from their own history", false,
         check_separate},
        {"answers.deterministic", "intervention, diagnostic: the same inputs to fresh instances, the same answers",
         false, check_deterministic},
    };
    return checks;
}

const std::vector<check_def>& intervention_only_checks() {
    static const std::vector<check_def> checks = {
        {"observe.nonfinite", "intervention: NaN/Inf loss, grad_norm, rates and format_max are observed", false,
         check_observe_nonfinite},
        {"observe.empty", "intervention: a step with no tensors is observed", false, check_observe_empty},
        {"state.resume",
         "intervention: a fresh instance loaded with a saved state answers as the original (skipped when the plugin "
         "saves no state)",
         false, check_state_resume},
    };
    return checks;
}

const std::vector<check_def>& diagnostic_only_checks() {
    static const std::vector<check_def> checks = {
        {"measure.nonfinite", "diagnostic: tensors with NaN/Inf elements measure without error", false,
         check_measure_nonfinite},
        {"measure.empty", "diagnostic: count-0 tensors measure without error", false, check_measure_empty},
        {"measure.names", "diagnostic: names [a-z0-9_.]+, valid indices, at most max_values_per_tensor*(n+1)",
         false, check_measure_names},
        {"measure.block_scales",
         "diagnostic: a view whose blocks all have scale s answers as one scaled per tensor by s (skipped before ABI "
         "1.2)",
         false, check_measure_block_scales},
        {"measure.headlines",
         "diagnostic: the headlines are well formed and name values measure writes (skipped before ABI "
         "1.3)",
         false, [](env& e) { return check_headlines(e.target, e.opts); }},
    };
    return checks;
}

// Checks every kind runs last (each loads the plugin itself).
const std::vector<check_def>& every_kind_last_checks() {
    static const std::vector<check_def> checks = {
        {"memory.leak",
         "repeated calls (formats: create, quantize, encode, decode, destroy; others: observe or measure) leave the "
         "heap and resident size as they were",
         false, check_leak},
    };
    return checks;
}

// The checks run for a plugin of `kind`, in run order.
std::vector<check_def> checks_for(altgrad_plugin_kind kind) {
    std::vector<check_def> out;
    if (kind == ALTGRAD_KIND_FORMAT) {
        out = format_checks();
    } else {
        out = load_checks();
        const std::vector<check_def>& shared = shared_instance_checks();
        out.insert(out.end(), shared.begin(), shared.end());
        const std::vector<check_def>& own =
            kind == ALTGRAD_KIND_INTERVENTION ? intervention_only_checks() : diagnostic_only_checks();
        out.insert(out.end(), own.begin(), own.end());
    }
    const std::vector<check_def>& last = every_kind_last_checks();
    out.insert(out.end(), last.begin(), last.end());
    return out;
}

const char* kinds_of(const check_def& c) {
    const std::string n = c.name;
    if (n.rfind("load.", 0) == 0) return "format, intervention, diagnostic";
    for (const check_def& x : every_kind_last_checks())
        if (n == x.name) return "format, intervention, diagnostic";
    for (const check_def& x : shared_instance_checks())
        if (n == x.name) return "intervention, diagnostic";
    for (const check_def& x : intervention_only_checks())
        if (n == x.name) return "intervention";
    for (const check_def& x : diagnostic_only_checks())
        if (n == x.name) return "diagnostic";
    return "format";
}

uint64_t check_seed(uint64_t seed, const std::string& name) {
    uint64_t h = seed ^ 0x9E3779B97F4A7C15ull;
    for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
    return h;
}

}  // namespace

std::vector<check_info> all_checks() {
    std::vector<check_info> out;
    for (const check_def& c : format_checks()) out.push_back({c.name, c.description, kinds_of(c)});
    for (const auto* list : {&every_kind_last_checks(), &shared_instance_checks(), &intervention_only_checks(),
                             &diagnostic_only_checks()})
        for (const check_def& c : *list) out.push_back({c.name, c.description, kinds_of(c)});
    return out;
}

std::vector<check_info> check_list(altgrad_plugin_kind kind) {
    std::vector<check_info> out;
    for (const check_def& c : checks_for(kind)) out.push_back({c.name, c.description, kinds_of(c)});
    return out;
}

plugin_report check_plugin(const plugin_target& target, const options& o) {
    plugin_report report;
    report.target = target;
    // An invalid manifest has no kind: it gets the format list, whose every
    // check but load.manifest skips.
    const altgrad_plugin_kind kind = target.info ? target.info->kind : ALTGRAD_KIND_FORMAT;
    for (const check_def& c : checks_for(kind)) {
        if (!o.only.empty() && !glob_match(o.only, c.name)) continue;
        result r;
        if (!target.info && std::string(c.name) != "load.manifest") {
            r = skip("the manifest is invalid (see load.manifest)");
        } else {
            r = run_isolated(c.name, o.timeout_seconds, [&]() -> result {
                env e{target, o, c.name, std::mt19937_64(check_seed(o.seed, c.name)), nullptr, nullptr, std::nullopt};
                if (c.needs_format) {
                    try {
                        e.plugin = load_plugin(*target.info);
                        e.format = format_handle::create(e.plugin);
                    } catch (const std::exception& x) {
                        return skip(std::string("the plugin does not load or create: ") + x.what());
                    }
                    if (e.format->info().total_bits <= 16) e.table.emplace(*e.format);
                }
                result r;
                try {
                    r = c.run(e);
                } catch (const finding& f) {
                    r = f.found;
                }
                if (e.drew_random && r.status != outcome::skipped)
                    r.reason += " (seed " + std::to_string(o.seed) + ")";
                return r;
            });
        }
        r.check = c.name;
        report.results.push_back(std::move(r));
    }
    return report;
}

}  // namespace altgrad::host::conformance
