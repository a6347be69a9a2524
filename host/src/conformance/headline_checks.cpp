// measure.headlines (headline_checks.hpp): a diagnostic's declared headline
// values are well formed and name values its measure() writes. Built on the
// kit's shared pieces (checks.hpp): the environment, the bundled format for
// the tensors' format_ref, the random tensors of the diagnostic checks.
#include "conformance/headline_checks.hpp"

#include <dlfcn.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "conformance/checks.hpp"
#include "plugins/diagnostic_handle.hpp"
#include "plugins/headlines.hpp"
#include "plugins/loader.hpp"
#include "util/abi_names.hpp"

namespace altgrad::host::conformance {

namespace {

// The library's entry, opened as the loader opens it (the check's process
// ends soon: the library stays open); NULL with `why` when there is none.
// Read directly: a malformed declaration makes the loader refuse the plugin,
// and this check is where it is explained.
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

// The tensors of a call, for the finding's input: "weight, weight_gradient".
std::string roles_text(const tensor_set& s) {
    std::string t;
    for (const altgrad_tensor_view& v : s.views)
        t += (t.empty() ? "" : ", ") + std::string(role_name(v.role));
    return t.empty() ? "no tensors" : t;
}

// Every value name two measure calls on the kit's random tensors write. Throws what the handle throws.
std::set<std::string> written_names(env& e, std::string& input) {
    const std::shared_ptr<diagnostic_handle> d = diagnostic_handle::create(e.plugin, {}, "conformance");
    std::set<std::string> names;
    for (uint64_t step = 0; step < 2; ++step) {
        const tensor_set s = make_tensors(e, *d, 64);
        input = "2 measure calls with default parameters on random tensors of 64 elements (" + roles_text(s) +
                ")";
        for (const diagnostic_value& v : d->measure(step, s.views)) names.insert(v.name);
    }
    return names;
}

}  // namespace

result check_measure_headlines(env& e) {
    const manifest& m = *e.target.info;
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
    result not_ready;
    if (!prepare(e, not_ready)) return not_ready;
    std::string input;
    std::set<std::string> written;
    try {
        written = written_names(e, input);
    } catch (const std::exception& x) {
        return fail(std::string("measure failed: ") + x.what(), input,
                    "the headlines' values are checked on what measure writes (see measure.* for the call)");
    }
    for (size_t i = 0; i < declared.size(); ++i)
        if (written.count(declared[i].value) == 0)
            return fail("headline " + std::to_string(i) + " (series '" + declared[i].series +
                            "') names value '" + declared[i].value +
                            "', which measure never wrote (it wrote: " + name_list(written) + ")",
                        input,
                        "a headline's value must be a name measure() writes (for some tensor or "
                        "ALTGRAD_ALL_TENSORS): correct the name, or write the value");
    std::string series;
    for (const diagnostic_headline& h : declared) series += (series.empty() ? "" : ", ") + h.series;
    return pass(std::to_string(declared.size()) + " headline" + (declared.size() == 1 ? "" : "s") + " (" +
                series + ") well formed, each naming a value measure writes");
}

}  // namespace altgrad::host::conformance
