#include "cli/options.hpp"

#include "util/error.hpp"

namespace altgrad::host::cli {

bool parse_subcommand(const std::string& name, const std::string& synopsis, po::options_description& options,
                      const po::positional_options_description& positional, const args& a,
                      po::variables_map& vm) {
    options.add_options()("help,h", "show this help");
    try {
        po::store(po::command_line_parser(a).options(options).positional(positional).run(), vm);
        if (vm.count("help")) {
            std::cout << "usage: altgrad-host [--plugins DIR] " << synopsis << "\n\n" << options << "\n";
            return false;
        }
        po::notify(vm);
    } catch (const po::error& e) {
        throw usage_error(name + ": " + e.what());
    }
    return true;
}

std::map<std::string, std::string> parse_param_assignments(const std::vector<std::string>& items) {
    std::map<std::string, std::string> out;
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
