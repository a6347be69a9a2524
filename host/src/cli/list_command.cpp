// altgrad-host list: every plugin in the folder, probed and checked (each in a
// child process, so none can take `list` down), with the reason for each
// broken one.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/plugin_json.hpp"
#include "plugins/registry.hpp"
#include "util/json_output.hpp"

namespace altgrad::host::cli {

ordered_json plugin_record_json(const plugin_record& r) {
    const bool ok = r.status == plugin_status::ok;
    return ordered_json{{"kind", r.info ? kind_name(r.info->kind) : "?"},
                        {"name", r.name()},
                        {"aliases", r.info ? ordered_json(r.info->aliases) : ordered_json::array()},
                        {"version", r.info ? version_string(r.info->version) : "?"},
                        {"status", ok ? "ok" : "broken"},
                        {"description", r.info ? ordered_json(r.info->description) : ordered_json(nullptr)},
                        {"manifest", r.manifest_path.string()},
                        {"error", ok ? ordered_json(nullptr) : ordered_json(r.error)}};
}

int list_command(const context& ctx, const args& a) {
    po::options_description options("list options");
    options.add_options()("json", "print JSON instead of a table");
    po::variables_map vm;
    const command_help help{"list",
                            {"--plugins DIR list [--json]"},
                            "altgrad-host --plugins build/plugins list",
                            {{0, "the plugins were listed (a broken one too, with the reason)"},
                             {1, "an error: the plugin folder cannot be read"}}};
    if (!parse_subcommand(help, options, {}, {}, a, vm)) return 0;

    registry reg(ctx.plugins);
    reg.probe_all();
    const bool as_json = vm.count("json") > 0;
    size_t broken = 0;
    // Columns as wide as their longest entry (and two spaces apart), so long names stay aligned.
    size_t kind_w = 4, name_w = 4, version_w = 7;
    for (const plugin_record& r : reg.records()) {
        kind_w = std::max(kind_w, (r.info ? std::string(kind_name(r.info->kind)) : "?").size());
        name_w = std::max(name_w, r.name().size());
        version_w = std::max(version_w, (r.info ? version_string(r.info->version) : "?").size());
    }
    if (!as_json)
        std::cout << std::left << std::setw(kind_w + 2) << "KIND" << std::setw(name_w + 2) << "NAME"
                  << std::setw(version_w + 2) << "VERSION" << "STATUS\n";
    ordered_json plugins = ordered_json::array();
    for (const plugin_record& r : reg.records()) {
        const bool ok = r.status == plugin_status::ok;
        broken += !ok;
        const std::string kind = r.info ? kind_name(r.info->kind) : "?";
        const std::string version = r.info ? version_string(r.info->version) : "?";
        if (as_json) {
            plugins.push_back(plugin_record_json(r));
        } else {
            std::cout << std::setw(kind_w + 2) << kind << std::setw(name_w + 2) << r.name() << std::setw(version_w + 2)
                      << version << (ok ? "ok" : "broken: " + r.error) << "\n";
        }
    }
    if (as_json) std::cout << json_output({{"plugins_dir", ctx.plugins.string()}, {"plugins", plugins}});
    if (reg.records().empty()) std::cerr << "altgrad-host: no plugins found in " << ctx.plugins.string() << "\n";
    else if (broken > 0)
        std::cerr << "altgrad-host: " << broken << " of " << reg.records().size() << " plugins are broken\n";
    return 0;
}

}  // namespace altgrad::host::cli
