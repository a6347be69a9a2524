// altgrad-host list: every plugin in the folder, loaded and checked, with the
// reason for each broken one.
#include <iomanip>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "plugins/registry.hpp"
#include "util/json.hpp"

namespace altgrad::host::cli {

int list_command(const context& ctx, const args& a) {
    po::options_description options("list options");
    options.add_options()("json", "print JSON instead of a table");
    po::variables_map vm;
    if (!parse_subcommand("list", "list [--json]", options, {}, a, vm)) return 0;

    registry reg(ctx.plugins);
    reg.load_all();
    const bool as_json = vm.count("json") > 0;
    size_t broken = 0;
    if (as_json) std::cout << "{\"plugins_dir\": " << json::quote(ctx.plugins.string()) << ", \"plugins\": [";
    else std::cout << std::left << std::setw(14) << "KIND" << std::setw(16) << "NAME" << std::setw(10) << "VERSION"
                   << "STATUS\n";
    bool first = true;
    for (const plugin_record& r : reg.records()) {
        const bool ok = r.status == plugin_status::ok;
        broken += !ok;
        const std::string kind = r.info ? kind_name(r.info->kind) : "?";
        const std::string version = r.info ? version_string(r.info->version) : "?";
        if (as_json) {
            std::cout << (first ? "" : ",") << "\n  {\"kind\": " << json::quote(kind)
                      << ", \"name\": " << json::quote(r.name()) << ", \"version\": " << json::quote(version)
                      << ", \"status\": " << json::quote(ok ? "ok" : "broken")
                      << ", \"description\": " << (r.info ? json::quote(r.info->description) : "null")
                      << ", \"manifest\": " << json::quote(r.manifest_path.string())
                      << ", \"error\": " << (ok ? "null" : json::quote(r.error)) << "}";
        } else {
            std::cout << std::setw(14) << kind << std::setw(16) << r.name() << std::setw(10) << version
                      << (ok ? "ok" : "broken: " + r.error) << "\n";
        }
        first = false;
    }
    if (as_json) std::cout << "\n]}\n";
    if (reg.records().empty()) std::cerr << "altgrad-host: no plugins found in " << ctx.plugins.string() << "\n";
    else if (broken > 0)
        std::cerr << "altgrad-host: " << broken << " of " << reg.records().size() << " plugins are broken\n";
    return 0;
}

}  // namespace altgrad::host::cli
