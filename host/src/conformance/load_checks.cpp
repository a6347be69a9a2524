// The load.* checks, which every kind runs first: the manifest, the library
// as the dynamic loader sees it, its exports, the entry's ABI version and
// descriptor, and loading and unloading it repeatedly.
#include <dlfcn.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "conformance/checks.hpp"
#include "conformance/elf_exports.hpp"

namespace altgrad::host::conformance {

namespace {

void* raw_open(const env& e, std::string& why) {
    void* h = ::dlopen(e.target.info->library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) why = ::dlerror();
    return h;
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

}  // namespace

result check_manifest(env& e) {
    if (!e.target.info)
        return fail(e.target.manifest_error, e.target.manifest_path.string(),
                    "fix the manifest key named in the message (docs/writing-a-plugin.md)");
    return pass("manifest " + e.target.manifest_path.string() + " is valid");
}

result check_library(env& e) {
    std::string why;
    void* h = raw_open(e, why);
    if (h == nullptr)
        return fail("dlopen with RTLD_NOW | RTLD_LOCAL failed: " + why, e.target.info->library.string(),
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
    if (!entry)
        return fail("the library does not export " ALTGRAD_ENTRY_SYMBOL, e.target.info->library.string(),
                    "define it with ALTGRAD_FORMAT_PLUGIN (altgrad/sdk/format_plugin.hpp)");
    if (!extra.empty()) {
        std::string list;
        for (size_t k = 0; k < extra.size() && k < 5; ++k) list += (k ? ", " : "") + extra[k];
        if (extra.size() > 5) list += ", ... (" + std::to_string(extra.size()) + " in all)";
        return {
            "",
            outcome::warning,
            "exports more than the entry symbol: " + list,
            e.target.info->library.string(),
            "build with altgrad_add_plugin(): its linker version script exports only " ALTGRAD_ENTRY_SYMBOL
            " (hidden visibility alone still leaks std:: template instances)",
            0};
    }
    return pass("exports only " ALTGRAD_ENTRY_SYMBOL);
}

result check_abi_version(env& e) {
    void* h = nullptr;
    std::string why;
    bool returned_null = false;
    const altgrad_entry* entry = raw_entry(e, h, why, &returned_null);
    if (returned_null)
        return fail(
            why + ": the plugin describes nothing and the host cannot load it", ALTGRAD_ENTRY_SYMBOL "()",
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
    if (abi_incompatibility(entry->abi_version))
        return skip("the ABI version is refused (see load.abi_version)");
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
            return skip(std::string("the host refuses the plugin (see load.abi_version, load.descriptor): ") +
                        x.what());
        }
        if (p->info.kind == ALTGRAD_KIND_FORMAT) format_handle::create(p, e.opts.params);
    }
    return pass("loaded and unloaded 20 times; loaded, created and destroyed an instance 5 times");
}

}  // namespace altgrad::host::conformance
