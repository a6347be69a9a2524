// Loading one plugin library and checking it against the host's ABI and its
// manifest. A loaded library is never unloaded while anything from it lives:
// every object made from a plugin holds a shared_ptr to its loaded_plugin.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

#include "plugins/headlines.hpp"
#include "plugins/manifest.hpp"

namespace boost::dll {
class shared_library;
}

namespace altgrad::host {

struct loaded_plugin {
    manifest info;
    std::shared_ptr<boost::dll::shared_library> library;
    const altgrad_entry* entry = nullptr;
    // A diagnostic's headline values (ABI 1.3), read and checked at load:
    // empty for the other kinds and for a diagnostic that declares none.
    std::vector<diagnostic_headline> headlines;

    const altgrad_descriptor& descriptor() const { return *entry->descriptor; }
};

// The host's own ABI version.
altgrad_version host_abi_version();

// Why a plugin built for ABI `plugin` cannot run in this host, or nothing.
std::optional<std::string> abi_incompatibility(const altgrad_version& plugin);

// Load the manifest's library with RTLD_NOW | RTLD_LOCAL and check the entry,
// the ABI version, the descriptor, the vtable and a diagnostic's headlines.
// Throws host::error "plugin 'NAME' (PATH): CHECK: WHAT".
std::shared_ptr<const loaded_plugin> load_plugin(const manifest& m);

}  // namespace altgrad::host
