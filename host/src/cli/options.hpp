// Program_Options helpers shared by the subcommands.
#pragma once

#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/commands.hpp"
#include "plugins/params.hpp"

namespace altgrad::host::cli {

namespace po = boost::program_options;

// What a subcommand's --help says besides its options: the usage (as the
// README writes it), an example command line, and the exit codes it can give
// (2, a wrong command line, is added for every subcommand).
struct command_help {
    std::string name;                // "quantize"
    std::vector<std::string> usage;  // forms after "altgrad-host ", e.g. "[--plugins DIR] list [--json]";
                                     // a line starting with a space continues the one above
    std::string example;             // a complete command line
    std::vector<std::pair<int, std::string>> exits;  // {0, "success"}, ...
};

// Parse a subcommand's arguments. `options` are shown by --help; `operands`
// hold the positional arguments (NAME, CONFIG, RUN_DIR...), which the usage
// line names, so --help does not list them as options. Unknown options and
// wrong values become a usage_error naming the subcommand. Returns false
// (after printing help) when --help was asked for.
bool parse_subcommand(const command_help& help, po::options_description& options,
                      const po::options_description& operands,
                      const po::positional_options_description& positional, const args& a,
                      po::variables_map& vm);

// The value of an unsigned integer option (`--seed N`) of `command`: digits
// only, at most 2^64-1; usage_error naming the option otherwise.
uint64_t unsigned_option(const std::string& command, const char* option, const std::string& text);

// "--param key=value" strings to a map; usage_error on a malformed one.
host::given_params parse_param_assignments(const std::vector<std::string>& items);

}  // namespace altgrad::host::cli
