#include "plugins/probe.hpp"

#include "plugins/loader.hpp"
#include "sandbox/isolate.hpp"

namespace altgrad::host {

std::optional<std::string> probe_plugin(const manifest& m, double timeout_seconds) {
    namespace kit = sandbox;
    // The conformance kit's isolation: a child process, a pipe for the result, a time limit.
    const kit::result r = kit::run_isolated("load", timeout_seconds, [&]() -> kit::result {
        load_plugin(m);  // throws the loader's error; the child's exception becomes a failed result
        return kit::result{"load", kit::outcome::passed, "", "", "", 0};
    });
    switch (r.status) {
        case kit::outcome::passed: return std::nullopt;
        case kit::outcome::failed: return r.reason;  // the loader's own message names plugin, path and check
        default: return "plugin '" + m.name + "' (" + m.library.string() + "): load: " + r.reason;
    }
}

}  // namespace altgrad::host
