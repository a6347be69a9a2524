#include "conformance/headline_checks.hpp"

#include <dlfcn.h>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "plugins/diagnostic_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/headlines.hpp"
#include "plugins/loader.hpp"
#include "util/abi_names.hpp"

namespace altgrad::host::conformance {
namespace fs = std::filesystem;

namespace {

constexpr const char* kCheck = "measure.headlines";

result pass(const std::string& reason) { return {"", outcome::passed, reason, "", "", 0}; }
result fail(const std::string& reason, const std::string& input, const std::string& hint) {
    return {"", outcome::failed, reason, input, hint, 0};
}
result skip(const std::string& reason) { return {"", outcome::skipped, reason, "", "", 0}; }

// The library's entry, opened as the loader opens it (the check's process
// ends soon: the library stays open); NULL with `why` when there is none.
const altgrad_entry* raw_entry(const manifest& m, std::string& why) {
    void* handle = ::dlopen(m.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        why = ::dlerror();
        return nullptr;
    }
    const auto fn = reinterpret_cast<altgrad_entry_fn>(::dlsym(handle, ALTGRAD_ENTRY_SYMBOL));
    const altgrad_entry* e = fn != nullptr ? fn() : nullptr;
    if (e == nullptr) why = "no entry";
    else if (e->struct_size < offsetof(altgrad_entry, diagnostic) + sizeof e->diagnostic)
        why = "entry too small";
    else if (abi_incompatibility(e->abi_version)) why = "the ABI version is refused";
    else if (e->diagnostic == nullptr) why = "no diagnostic table";
    else return e;
    return nullptr;
}

// A bundled format from the target's own plugins folder, for the tensors'
// format_ref (as the kit's other measuring checks take one).
std::shared_ptr<format_handle> reference_format(const plugin_target& target, std::string& why) {
    const fs::path dir = target.manifest_path.parent_path().parent_path();
    for (const char* name : {"e5m2", "e3m4", "e4m3"}) {
        std::error_code ec;
        const fs::path m = dir / name / "manifest.toml";
        if (!fs::exists(m, ec)) continue;
        try {
            return format_handle::create(load_plugin(read_manifest(m)));
        } catch (const std::exception& x) {
            why += std::string(why.empty() ? "" : "; ") + name + ": " + x.what();
        }
    }
    why = "needs a format (e5m2, e3m4 or e4m3) for the tensors' format_ref in " + dir.string() +
          (why.empty() ? "" : " (" + why + ")");
    return nullptr;
}

// Random tensors of every role the diagnostic asks for (every role when it
// asks for none): [8, 8] of magnitudes 2^-24..2^16 with some zeros, a
// gradient named like the weight (diagnostics pair them by name), attention
// probabilities [1, 2, 4, 4] whose rows are distributions; weights carry
// `previous` when asked.
struct tensor_set {
    std::vector<std::string> names, roles;
    std::vector<std::vector<float>> data, previous;
    std::vector<altgrad_tensor_view> views;
};

tensor_set random_tensors(const diagnostic_handle& d, const format_handle& f, std::mt19937_64& rng,
                          bool with_previous) {
    tensor_set s;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<altgrad_tensor_role> roles;
    for (int r = ALTGRAD_TENSOR_WEIGHT; r <= ALTGRAD_TENSOR_OUTPUT_GRADIENT; ++r)
        if (d.interests() == 0 || d.interested_in(static_cast<altgrad_tensor_role>(r)))
            roles.push_back(static_cast<altgrad_tensor_role>(r));
    for (size_t k = 0; k < roles.size(); ++k) {
        const bool probs = roles[k] == ALTGRAD_TENSOR_ATTENTION_PROBS;
        const bool paired = roles[k] == ALTGRAD_TENSOR_GRADIENT && roles[0] == ALTGRAD_TENSOR_WEIGHT;
        s.names.push_back(paired ? s.names[0] : "blocks.0.t" + std::to_string(k));
        s.roles.push_back(role_name(roles[k]));
        std::vector<float> x(probs ? 32 : 64), p(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
            const double mag = probs ? u(rng) + 0.01 : std::exp2(40.0 * u(rng) - 24.0);
            x[i] = static_cast<float>(!probs && u(rng) < 0.5 ? -mag : mag);
            if (!probs && u(rng) < 0.05) x[i] = 0.0f;
            p[i] = x[i] * static_cast<float>(1.0 + 0.01 * (u(rng) - 0.5));
        }
        for (size_t row = 0; probs && row < 8; ++row) {  // each row of 4 keys sums to 1
            float sum = 0;
            for (size_t j = 0; j < 4; ++j) sum += x[row * 4 + j];
            for (size_t j = 0; j < 4; ++j) x[row * 4 + j] /= sum;
        }
        s.data.push_back(std::move(x));
        s.previous.push_back(std::move(p));
    }
    for (size_t k = 0; k < roles.size(); ++k) {
        altgrad_tensor_view v{};
        v.struct_size = sizeof v;
        v.name = s.names[k].c_str();
        v.role = roles[k];
        v.data = s.data[k].data();
        v.previous = roles[k] == ALTGRAD_TENSOR_WEIGHT && with_previous ? s.previous[k].data() : nullptr;
        v.count = s.data[k].size();
        const bool probs = roles[k] == ALTGRAD_TENSOR_ATTENTION_PROBS;
        const std::vector<int64_t> shape =
            probs ? std::vector<int64_t>{1, 2, 4, 4} : std::vector<int64_t>{8, 8};
        v.ndim = static_cast<uint32_t>(shape.size());
        for (size_t i = 0; i < shape.size(); ++i) v.shape[i] = shape[i];
        v.memory = ALTGRAD_MEMORY_HOST;
        v.format = f.ref();
        v.scale = 1.0f;
        s.views.push_back(v);
    }
    return s;
}

// "a, b, c" of at most `most` names, then "... (N in all)".
std::string name_list(const std::set<std::string>& names, size_t most = 8) {
    std::string s;
    size_t k = 0;
    for (const std::string& n : names) {
        if (k++ == most) return s + ", ... (" + std::to_string(names.size()) + " in all)";
        s += (s.empty() ? "" : ", ") + n;
    }
    return s.empty() ? "nothing" : s;
}

std::string roles_text(const tensor_set& s) {
    std::string t;
    for (size_t k = 0; k < s.roles.size(); ++k)
        t += (t.empty() ? "" : ", ") + s.roles[k] + (s.views[k].ndim == 4 ? " [1, 2, 4, 4]" : " [8, 8]");
    return t.empty() ? "no tensors" : t;
}

// Every value name two measure calls write: random tensors, the second call
// with the weights' previous values. Throws what the handle throws.
std::set<std::string> written_names(const std::shared_ptr<const loaded_plugin>& plugin,
                                    const format_handle& f, std::mt19937_64& rng, std::string& input) {
    const std::shared_ptr<diagnostic_handle> d = diagnostic_handle::create(plugin, {}, "conformance");
    std::set<std::string> names;
    for (uint64_t step = 0; step < 2; ++step) {
        const tensor_set s = random_tensors(*d, f, rng, step == 1);
        input = "2 measure calls with default parameters on random tensors (" + roles_text(s) +
                "), the second with the weights' previous values";
        for (const diagnostic_value& v : d->measure(step, s.views)) names.insert(v.name);
    }
    return names;
}

uint64_t check_seed(uint64_t seed) {
    uint64_t h = seed ^ 0x9E3779B97F4A7C15ull;
    for (const char* c = kCheck; *c != '\0'; ++c) h = (h ^ static_cast<uint8_t>(*c)) * 0x100000001B3ull;
    return h;
}

}  // namespace

result check_headlines(const plugin_target& target, const options& o) {
    const manifest& m = *target.info;
    std::string why;
    const altgrad_entry* entry = raw_entry(m, why);
    if (entry == nullptr) return skip(why + " (see load.abi_version, load.descriptor)");
    if (!has_headline_fields(*entry))
        return skip("built for ABI " + version_string(entry->abi_version, false) +
                    ": it declares no headlines (a report shows every value it writes)");
    std::vector<diagnostic_headline> declared;
    try {
        declared = read_headlines(*entry);
    } catch (const std::exception& x) {
        return fail("plugin '" + m.name + "': " + x.what(), "the diagnostic table's headlines",
                    "declare them with altgrad::sdk::headline(value, series) in a static constexpr array "
                    "(altgrad/sdk/diagnostic_plugin.hpp, which checks the rules of abi/diagnostic.h when the "
                    "plugin compiles)");
    }
    if (declared.empty())
        return skip("declares no headlines (headline_count 0): a report shows every value it writes");
    std::shared_ptr<const loaded_plugin> plugin;
    try {
        plugin = load_plugin(m);
    } catch (const std::exception& x) {
        return skip(std::string("the plugin does not load (see load.descriptor): ") + x.what());
    }
    const std::shared_ptr<format_handle> f = reference_format(target, why);
    if (!f) return skip(why);
    std::mt19937_64 rng(check_seed(o.seed));
    const std::string seed = " (seed " + std::to_string(o.seed) + ")";
    std::string input;
    std::set<std::string> written;
    try {
        written = written_names(plugin, *f, rng, input);
    } catch (const std::exception& x) {
        return fail(std::string("measure failed: ") + x.what() + seed, input,
                    "the headlines' values are checked on what measure writes (see measure.* for the call)");
    }
    for (size_t i = 0; i < declared.size(); ++i)
        if (written.count(declared[i].value) == 0)
            return fail("headline " + std::to_string(i) + " (series '" + declared[i].series +
                            "') names value '" + declared[i].value +
                            "', which measure never wrote (it wrote: " + name_list(written) + ")" + seed,
                        input,
                        "a headline's value must be a name measure() writes (for some tensor or "
                        "ALTGRAD_ALL_TENSORS): correct the name, or write the value");
    std::string series;
    for (const diagnostic_headline& h : declared) series += (series.empty() ? "" : ", ") + h.series;
    return pass(std::to_string(declared.size()) + " headline" + (declared.size() == 1 ? "" : "s") + " (" +
                series + ") well formed, each naming a value measure writes" + seed);
}

}  // namespace altgrad::host::conformance
