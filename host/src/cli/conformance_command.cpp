// altgrad-host conformance: run the conformance kit on plugins and say
// precisely what each gets wrong. Exit 1 when anything failed, crashed or
// timed out (warnings do not fail).
#include <chrono>
#include <iostream>
#include <random>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "conformance/kit.hpp"
#include "conformance/report.hpp"
#include "plugins/params.hpp"
#include "util/error.hpp"

namespace altgrad::host::cli {

namespace {

// --param is for format, transform and accumulator plugins, each of which
// must take every key and value (else create would refuse them, and every
// check of the plugin would skip).
void check_params(const std::vector<conformance::plugin_target>& targets, const host::given_params& params) {
    for (const conformance::plugin_target& t : targets) {
        if (!t.info) continue;  // load.manifest says why
        if (t.info->kind == ALTGRAD_KIND_INTERVENTION || t.info->kind == ALTGRAD_KIND_DIAGNOSTIC)
            throw usage_error(
                "conformance: --param is for format, transform and accumulator plugins, and '" +
                t.info->name + "' is " +
                (t.info->kind == ALTGRAD_KIND_INTERVENTION ? "an intervention" : "a diagnostic"));
        resolve_params(*t.info, params, "conformance --param");
    }
}

}  // namespace

int conformance_command(const context& ctx, const args& a) {
    namespace kit = altgrad::host::conformance;
    po::options_description options("conformance options");
    std::vector<std::string> targets, params;
    kit::options o;
    std::string only;
    options.add_options()("json", "print JSON instead of a table")(
        "only", po::value<std::string>(&only),
        "run only the checks whose name matches this glob, e.g. 'quantize.*'")(
        "seed", po::value<std::string>(),
        "seed of every randomised check (default: from the clock; printed to replay)")(
        "timeout", po::value<double>(&o.timeout_seconds)->default_value(30), "seconds allowed per check")(
        "list-checks", "print the check names and exit")(
        "brief", "one line per plugin, plus every result that did not pass")(
        "param", po::value<std::vector<std::string>>(&params),
        "KEY=VALUE parameter of the format, transform and accumulator plugins checked (repeatable): every "
        "instance is created with them");
    po::options_description operands;
    operands.add_options()("plugin", po::value<std::vector<std::string>>(&targets));
    po::positional_options_description pos;
    pos.add("plugin", -1);
    po::variables_map vm;
    const command_help help{
        "conformance",
        {"[--plugins DIR] conformance [--json] [--brief] [--only PATTERN] [--seed N]",
         "             [--timeout S] [--list-checks] [--param KEY=VALUE]... [NAME|LIBRARY_PATH ...]"},
        "altgrad-host --plugins build/plugins conformance --brief e4m3 ./my_plugin/libaltgrad_posit8.so",
        {{0, "every check passed (warnings do not fail)"},
         {1, "a check failed, crashed or timed out, or a plugin could not be loaded"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;
    if (vm.count("list-checks")) {
        for (const kit::check_info& c : kit::all_checks())
            std::cout << c.name << std::string(30 - std::string(c.name).size(), ' ') << c.description << "\n";
        return 0;
    }
    if (!(o.timeout_seconds > 0)) throw usage_error("conformance: --timeout must be > 0");
    o.only = only;
    o.seed = vm.count("seed")
                 ? unsigned_option("conformance", "seed", vm["seed"].as<std::string>())
                 : static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) %
                       1000000007ull;
    if (!o.only.empty()) {
        bool any = false;
        for (const kit::check_info& c : kit::all_checks())
            any = any || altgrad::host::glob_match(o.only, c.name);
        if (!any)
            throw usage_error("conformance: --only '" + o.only + "' matches no check (see --list-checks)");
    }

    std::vector<kit::plugin_target> chosen;
    if (targets.empty()) {
        if (ctx.plugins.empty()) throw usage_error("conformance: give --plugins DIR or plugin paths");
        chosen = kit::all_targets(ctx.plugins);
    }
    for (const std::string& t : targets) {
        const bool is_path = t.find('/') != std::string::npos;
        if (!is_path && ctx.plugins.empty())
            throw usage_error("conformance: '" + t + "' needs --plugins DIR");
        chosen.push_back(is_path ? kit::target_by_path(t) : kit::target_by_name(ctx.plugins, t));
    }
    o.params = parse_param_assignments(params);
    if (!o.params.empty()) check_params(chosen, o.params);
    std::vector<kit::plugin_report> reports;
    for (const kit::plugin_target& t : chosen) reports.push_back(kit::check_plugin(t, o));
    if (vm.count("json")) kit::print_json(std::cout, reports, o);
    else kit::print_text(std::cout, reports, o, vm.count("brief") > 0);
    return kit::any_failure(reports) ? 1 : 0;
}

}  // namespace altgrad::host::cli
