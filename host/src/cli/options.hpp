// Program_Options helpers shared by the subcommands.
#pragma once

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/commands.hpp"

namespace altgrad::host::cli {

namespace po = boost::program_options;

// Parse a subcommand's arguments; unknown options and wrong values become a
// usage_error naming the subcommand. Returns false (after printing help) when
// --help was asked for.
bool parse_subcommand(const std::string& name, const std::string& synopsis, po::options_description& options,
                      const po::positional_options_description& positional, const args& a,
                      po::variables_map& vm);

// "--param key=value" strings to a map; usage_error on a malformed one.
std::map<std::string, std::string> parse_param_assignments(const std::vector<std::string>& items);

}  // namespace altgrad::host::cli
