#include "cli/options.hpp"

#include <algorithm>

#include "util/error.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::cli {

bool parse_subcommand(const command_help& help, po::options_description& options,
                      const po::options_description& operands,
                      const po::positional_options_description& positional, const args& a,
                      po::variables_map& vm) {
    options.add_options()("help,h", "show this help");
    po::options_description all;
    all.add(options).add(operands);
    try {
        // No abbreviations: "gemm --m 16" must not be --mma-depth 16.
        const po::parsed_options parsed =
            po::command_line_parser(a)
                .options(all)
                .positional(positional)
                .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
                .run();
        // Operands are named only to bind them to positions: "--plugin X" or
        // "--name X" given by name would be an undocumented second spelling.
        for (const po::option& o : parsed.options)
            if (o.position_key < 0 && operands.find_nothrow(o.string_key, false) != nullptr)
                throw usage_error(help.name + ": unrecognised option '" + o.original_tokens.front() + "'");
        po::store(parsed, vm);
        if (vm.count("help")) {
            // A line starting with a space continues the form above it.
            for (size_t i = 0; i < help.usage.size(); ++i)
                std::cout << (i == 0 ? "usage: " : "       ")
                          << (help.usage[i][0] == ' ' ? "" : "altgrad-host ") << help.usage[i] << "\n";
            std::cout << "\n" << options << "\nexample:\n  " << help.example << "\n\nexit codes:\n";
            std::vector<std::pair<int, std::string>> exits = help.exits;
            exits.emplace_back(2, "a wrong command line");
            std::sort(exits.begin(), exits.end());
            for (const auto& [code, meaning] : exits) std::cout << "  " << code << "  " << meaning << "\n";
            return false;
        }
        po::notify(vm);
    } catch (const po::error& e) {
        throw usage_error(help.name + ": " + e.what());
    }
    return true;
}

uint64_t unsigned_option(const std::string& command, const char* option, const std::string& text) {
    if (const std::optional<uint64_t> v = parse_uint64(text)) return *v;
    throw usage_error(command + ": --" + option + " \"" + text + "\": expected an integer 0 .. " +
                      std::to_string(UINT64_MAX));
}

host::given_params parse_param_assignments(const std::vector<std::string>& items) {
    host::given_params out;
    for (const std::string& item : items) {
        const size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0)
            throw usage_error("--param \"" + item + "\": expected KEY=VALUE");
        const std::string key = item.substr(0, eq);
        if (out.count(key)) throw usage_error("--param " + key + " given twice");
        out[key] = item.substr(eq + 1);
    }
    return out;
}

}  // namespace altgrad::host::cli
