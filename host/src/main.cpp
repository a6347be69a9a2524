// altgrad-host: discovers plugins in a folder, loads them on demand, and runs
// a subcommand. Exit codes: 0 success, 1 an error (bad input, a broken plugin,
// a failed check), 2 a wrong command line, 3 a training run that stopped early.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/commands.hpp"
#include "plugins/loader.hpp"
#include "plugins/registry.hpp"
#include "util/edit_distance.hpp"
#include "util/error.hpp"

namespace po = boost::program_options;
namespace cli = altgrad::host::cli;

namespace {

const std::map<std::string, std::pair<int (*)(const cli::context&, const cli::args&), const char*>> kCommands = {
    {"list", {&cli::list_command, "every plugin with kind, name, version and status"}},
    {"describe", {&cli::describe_command, "a plugin's parameters; for a format its exact encoding"}},
    {"quantize", {&cli::quantize_command, "numbers from standard input through a format, as hex-floats"}},
    {"conformance", {&cli::conformance_command, "check plugins against the ABI's rules, precisely"}},
#ifndef ALTGRAD_HOST_WITHOUT_TRAINER  // the sanitizer build (ALTGRAD_SANITIZE) has no LibTorch
    {"run", {&cli::run_command, "train a GPT on a config, quantized through the format plugins"}},
    {"sweep", {&cli::sweep_command, "many runs from a sweep file: a local worker pool, or a Slurm job array"}},
#endif
    {"report", {&cli::report_command, "a markdown report with figures from run directories"}},
    {"new-plugin", {&cli::new_plugin_command, "write a buildable out-of-tree plugin project to start from"}},
};

// Which plugin folder a command without --plugins uses, for the help.
std::string default_plugins_text() {
    const std::optional<altgrad::host::plugin_folder_choice> d = altgrad::host::default_plugin_folder();
    if (!d) return "none: give --plugins DIR or set ALTGRAD_PLUGINS (no plugins/ beside this host, none installed)";
    return d->dir.string() + " (" + d->source + ")";
}

void print_usage(const po::options_description& global) {
    std::cout << "usage: altgrad-host [--plugins DIR] COMMAND [ARGS...]\n\ncommands:\n";
    for (const auto& [name, command] : kCommands) std::cout << "  " << name << std::string(12 - name.size(), ' ')
                                                            << command.second << "\n";
    std::cout << "\n" << global << "\nWithout --plugins: $ALTGRAD_PLUGINS, else the plugins of the build or installation "
                 "this host belongs to.\nHere that is: " << default_plugins_text()
              << "\n\n'altgrad-host COMMAND --help' describes a command's options.\n";
}

// Options before the command are the host's own. With allow_unregistered an
// unknown one would be skipped and its value taken for the command ("--plugns
// DIR list" said "unknown command 'DIR'"), so it is refused by its name here.
void refuse_unknown_global_options(const po::parsed_options& parsed, const po::options_description& global) {
    for (const po::option& o : parsed.options) {
        if (o.position_key >= 0) return;  // the command: what follows is its own
        if (!o.unregistered) continue;
        const std::string given = o.original_tokens.front().substr(0, o.original_tokens.front().find('='));
        std::string hint;
        size_t best = 3;  // a suggestion only for a near miss
        for (const auto& known : global.options()) {
            const std::string name = "--" + known->long_name();
            if (const size_t d = altgrad::host::edit_distance(given, name); d < best)
                best = d, hint = "; did you mean '" + name + "'?";
        }
        throw altgrad::host::usage_error("unknown option '" + given + "'" + hint);
    }
}

// The command's index in argv (argc when there is none): the first argument
// that is neither an option nor the value of a separate "--plugins DIR".
int command_index(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--plugins") ++i;
        else if (a.empty() || a[0] != '-') return i;
    }
    return argc;
}

// Parses the command line and runs the command; returns the exit code.
int run_command_line(int argc, char** argv) {
    po::options_description global("global options");
    global.add_options()("plugins", po::value<std::string>(), "the plugin folder (one sub-folder per plugin)")(
        "help,h", "show this help")("version", "print the host and ABI versions");
    po::options_description hidden;
    hidden.add_options()("command", po::value<std::string>())("args", po::value<std::vector<std::string>>());
    po::options_description all;
    all.add(global).add(hidden);
    po::positional_options_description pos;
    pos.add("command", 1).add("args", -1);

    try {
        po::variables_map vm;
        // Only the arguments up to the command are the host's: "conformance --plugin X"
        // must not reach the global --plugins (nor by Boost's abbreviation guessing).
        const int command_at = command_index(argc, argv);
        const int global_end = std::min(argc, command_at + 1);
        po::parsed_options parsed = po::command_line_parser(global_end, argv)
                                        .options(all)
                                        .positional(pos)
                                        .style(po::command_line_style::default_style &
                                               ~po::command_line_style::allow_guessing)
                                        .allow_unregistered()
                                        .run();
        refuse_unknown_global_options(parsed, global);
        po::store(parsed, vm);
        if (vm.count("version")) {
            std::cout << "altgrad-host " << ALTGRAD_HOST_VERSION << ", plugin ABI "
                      << altgrad::host::version_string(altgrad::host::host_abi_version(), false) << "\n";
            return 0;
        }
        if (!vm.count("command")) {
            print_usage(global);
            return vm.count("help") ? 0 : 2;
        }
        const std::string command = vm["command"].as<std::string>();
        const auto it = kCommands.find(command);
        if (it == kCommands.end()) throw altgrad::host::usage_error("unknown command '" + command + "'");
        // Everything after the command name belongs to the command.
        std::vector<std::string> rest(argv + global_end, argv + argc);
        if (vm.count("help")) rest.push_back("--help");
        cli::context ctx;
        if (vm.count("plugins")) {
            ctx.plugins = vm["plugins"].as<std::string>();
        } else if (const auto d = altgrad::host::default_plugin_folder()) {
            ctx.plugins = d->dir;
        } else {
            const bool wants_help = std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
                                    std::find(rest.begin(), rest.end(), "-h") != rest.end();
            // conformance can take library paths; report reads run directories only; new-plugin writes files.
            if (!wants_help && command != "conformance" && command != "report" && command != "new-plugin")
                throw altgrad::host::usage_error(
                    "--plugins DIR is required (or set ALTGRAD_PLUGINS): this host has no plugins/ beside it and "
                    "none installed");
        }
        return it->second.first(ctx, rest);
    } catch (const altgrad::host::usage_error& e) {
        std::cerr << "altgrad-host: " << e.what() << " (see altgrad-host --help)\n";
        return 2;
    } catch (const po::error& e) {
        std::cerr << "altgrad-host: " << e.what() << " (see altgrad-host --help)\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "altgrad-host: error: " << e.what() << "\n";
        return 1;
    }
}

// "write failed" and the reason when known (a write that failed earlier, in
// the middle of the output, leaves no reliable errno), when output written to
// standard output was lost (a full disk, a closed pipe); nothing when all of
// it was written.
std::optional<std::string> standard_output_failure() {
    // std::cout writes through stdout's buffer (synced with stdio): one fflush
    // flushes both, and its errno is the reason.
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    const int reason = errno;
    if (std::cout.good() && flushed && !std::ferror(stdout)) return std::nullopt;
    return std::string("write failed") + (!flushed && reason != 0 ? std::string(": ") + std::strerror(reason) : "");
}

}  // namespace

int main(int argc, char** argv) {
    const int code = run_command_line(argc, argv);
    // Lost output is not success: `list > /dev/full` must not exit 0.
    if (const std::optional<std::string> why = standard_output_failure()) {
        std::cerr << "altgrad-host: error: standard output: " << *why << "\n";
        return code != 0 ? code : 1;
    }
    return code;
}
