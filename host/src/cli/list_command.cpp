// altgrad-host list: every plugin in the folder, probed and checked (each in a
// child process, so none can take `list` down), with the reason for each
// broken one.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "plugins/plugin_json.hpp"
#include "plugins/registry.hpp"
#include "util/json_output.hpp"

namespace altgrad::host::cli {

int list_command(const context& ctx, const args& a) {
    po::options_description options("list options");
    options.add_options()("json", "print JSON instead of a table");
    po::options_description operands;
    operands.add_options()("name", po::value<std::vector<std::string>>());
    po::positional_options_description pos;
    pos.add("name", -1);
    po::variables_map vm;
    const command_help help{
        "list",
        {"[--plugins DIR] list [NAME...] [--json]"},
        "altgrad-host --plugins build/plugins list float8_e4m3fn bf16",
        {{0, "the plugins were listed (a broken one too, with the reason)"},
         {1, "an error: the plugin folder cannot be read, or no plugin has a NAME given"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;

    registry reg(ctx.plugins);
    // Every plugin, or those named (by name or alias), in the order given; each probed.
    std::vector<const plugin_record*> shown;
    if (vm.count("name")) {
        for (const std::string& name : vm["name"].as<std::vector<std::string>>())
            shown.push_back(&reg.probed(name));
    } else {
        reg.probe_all();
        for (const plugin_record& r : reg.records()) shown.push_back(&r);
    }
    const bool as_json = vm.count("json") > 0;
    size_t broken = 0;
    const auto aliases_of = [](const plugin_record& r) {
        std::string out;
        if (r.info)
            for (const std::string& alias : r.info->aliases) out += (out.empty() ? "" : ",") + alias;
        return out.empty() ? std::string("-") : out;
    };
    // Columns as wide as their longest entry (and two spaces apart), so long names stay aligned.
    size_t kind_w = 4, name_w = 4, version_w = 7, aliases_w = 7;
    for (const plugin_record* r : shown) {
        kind_w = std::max(kind_w, (r->info ? std::string(kind_name(r->info->kind)) : "?").size());
        name_w = std::max(name_w, r->name().size());
        version_w = std::max(version_w, (r->info ? version_string(r->info->version) : "?").size());
        aliases_w = std::max(aliases_w, aliases_of(*r).size());
    }
    if (!as_json)
        std::cout << std::left << std::setw(kind_w + 2) << "KIND" << std::setw(name_w + 2) << "NAME"
                  << std::setw(version_w + 2) << "VERSION" << std::setw(aliases_w + 2) << "ALIASES"
                  << "STATUS\n";
    ordered_json plugins = ordered_json::array();
    for (const plugin_record* r : shown) {
        const bool ok = r->status == plugin_status::ok;
        broken += !ok;
        const std::string kind = r->info ? kind_name(r->info->kind) : "?";
        const std::string version = r->info ? version_string(r->info->version) : "?";
        if (as_json) {
            plugins.push_back(plugin_record_json(*r));
        } else {
            std::cout << std::setw(kind_w + 2) << kind << std::setw(name_w + 2) << r->name()
                      << std::setw(version_w + 2) << version << std::setw(aliases_w + 2) << aliases_of(*r)
                      << (ok ? "ok" : "broken: " + r->error) << "\n";
        }
    }
    if (as_json) std::cout << json_output({{"plugins_dir", ctx.plugins.string()}, {"plugins", plugins}});
    if (reg.records().empty())
        std::cerr << "altgrad-host: no plugins found in " << ctx.plugins.string() << "\n";
    else if (broken > 0)
        std::cerr << "altgrad-host: " << broken << " of " << shown.size() << " plugins are broken\n";
    return 0;
}

}  // namespace altgrad::host::cli
