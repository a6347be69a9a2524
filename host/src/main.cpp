// altgrad-host: discovers plugins in a folder, loads them on demand, and runs
// a subcommand. Exit codes: 0 success, 1 an error (bad input, a broken plugin,
// a failed check), 2 a wrong command line, 3 a training run that stopped early
// (or, from parity, bits that differ).
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
#include "util/cpu_kernels.hpp"
#include "util/edit_distance.hpp"
#include "util/error.hpp"

namespace po = boost::program_options;
namespace cli = altgrad::host::cli;

namespace {

using command_function = int (*)(const cli::context&, const cli::args&);

// The sanitizer build (ALTGRAD_SANITIZE) has no LibTorch: no trainer, and no
// cli/run_command.cpp (host/CMakeLists.txt).
#ifdef ALTGRAD_HOST_WITHOUT_TRAINER
constexpr bool kHasTrainer = false;
constexpr command_function kRunCommand = nullptr;
constexpr command_function kParityCommand = nullptr;
#else
constexpr bool kHasTrainer = true;
constexpr command_function kRunCommand = &cli::run_command;
constexpr command_function kParityCommand = &cli::parity_command;
#endif

// Whether a command needs the plugin folder: conformance can take library
// paths; report reads run directories only; new-plugin writes files.
enum class plugin_folder { required, optional };
// Whether a command needs the trainer: run and parity train (on pinned CPU kernels,
// util/cpu_kernels.hpp), sweep runs `run` workers. A host without it has no
// such command (not in the usage, unknown by name).
enum class trainer { no, trains, runs_workers };

struct command {
    command_function run;
    plugin_folder plugins;
    trainer needs_trainer;
    const char* summary;  // its line in the usage
};

const std::map<std::string, command> kCommands = {
    {"list",
     {&cli::list_command, plugin_folder::required, trainer::no,
      "every plugin with kind, name, version and status"}},
    {"describe",
     {&cli::describe_command, plugin_folder::required, trainer::no,
      "a plugin's parameters; for a format its exact encoding"}},
    {"quantize",
     {&cli::quantize_command, plugin_folder::required, trainer::no,
      "numbers from standard input through a format, as hex-floats"}},
    {"gemm",
     {&cli::gemm_command, plugin_folder::required, trainer::no,
      "a matrix product through a low-precision accumulator, and its error"}},
    {"conformance",
     {&cli::conformance_command, plugin_folder::optional, trainer::no,
      "check plugins against the ABI's rules, precisely"}},
    {"parity",
     {kParityCommand, plugin_folder::required, trainer::trains,
      "a recipe's quantized operands on the GPU against the CPU, bit for bit"}},
    {"run",
     {kRunCommand, plugin_folder::required, trainer::trains,
      "train a GPT on a config, quantized through the format plugins"}},
    {"sweep",
     {&cli::sweep_command, plugin_folder::required, trainer::runs_workers,
      "many runs from a sweep file: a local worker pool, or a Slurm job array"}},
    {"report",
     {&cli::report_command, plugin_folder::optional, trainer::no,
      "a markdown report with figures from run directories"}},
    {"new-plugin",
     {&cli::new_plugin_command, plugin_folder::optional, trainer::no,
      "write a buildable out-of-tree plugin project to start from"}},
};

// Whether this host has the command: one without the trainer has neither run nor sweep.
bool available(const command& c) { return c.needs_trainer == trainer::no || kHasTrainer; }

// Which plugin folder a command without --plugins uses, for the help.
std::string default_plugins_text() {
    const std::optional<altgrad::host::plugin_folder_choice> d = altgrad::host::default_plugin_folder();
    if (!d)
        return "none: give --plugins DIR or set ALTGRAD_PLUGINS (no plugins/ beside this host, none "
               "installed)";
    return d->dir.string() + " (" + d->source + ")";
}

void print_usage(const po::options_description& global) {
    std::cout << "usage: altgrad-host [--plugins DIR] COMMAND [ARGS...]\n\ncommands:\n";
    for (const auto& [name, c] : kCommands)
        if (available(c))
            std::cout << "  " << name << std::string(12 - name.size(), ' ') << c.summary << "\n";
    std::cout << "\n"
              << global
              << "\nWithout --plugins: $ALTGRAD_PLUGINS, else the plugins of the build or installation "
                 "this host belongs to.\nHere that is: "
              << default_plugins_text()
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
    global.add_options()("plugins", po::value<std::string>(),
                         "the plugin folder (one sub-folder per plugin)")("help,h", "show this help")(
        "version", "print the host and ABI versions");
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
        po::parsed_options parsed =
            po::command_line_parser(global_end, argv)
                .options(all)
                .positional(pos)
                .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
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
        if (it == kCommands.end() || !available(it->second))
            throw altgrad::host::usage_error("unknown command '" + command + "'");
        // Everything after the command name belongs to the command.
        std::vector<std::string> rest(argv + global_end, argv + argc);
        if (vm.count("help")) rest.push_back("--help");
        const bool wants_help = std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
                                std::find(rest.begin(), rest.end(), "-h") != rest.end();
        if (it->second.needs_trainer == trainer::trains && !wants_help) altgrad::host::pin_cpu_kernels(argv);
        cli::context ctx;
        if (vm.count("plugins")) {
            ctx.plugins = vm["plugins"].as<std::string>();
        } else if (const auto d = altgrad::host::default_plugin_folder()) {
            ctx.plugins = d->dir;
        } else {
            if (!wants_help && it->second.plugins == plugin_folder::required)
                throw altgrad::host::usage_error(
                    "--plugins DIR is required (or set ALTGRAD_PLUGINS): this host has no plugins/ beside it "
                    "and "
                    "none installed");
        }
        return it->second.run(ctx, rest);
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
    return std::string("write failed") +
           (!flushed && reason != 0 ? std::string(": ") + std::strerror(reason) : "");
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
