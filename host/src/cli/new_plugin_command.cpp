// altgrad-host new-plugin: write a small out-of-tree plugin project (CMake
// with find_package(AltGrad), the source, its manifest, a README) that builds
// against the installed SDK and passes the conformance kit as written.
#include <iostream>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "scaffold/new_plugin.hpp"
#include "util/abi_names.hpp"
#include "util/error.hpp"

namespace altgrad::host::cli {

int new_plugin_command(const context&, const args& a) {
    po::options_description options("new-plugin options");
    std::string name, kind_text, dir = ".";
    po::options_description operands;
    operands.add_options()("name", po::value<std::string>(&name));
    options.add_options()("kind", po::value<std::string>(&kind_text), "format | diagnostic | intervention")(
        "dir", po::value<std::string>(&dir)->default_value("."), "where to create the project folder NAME/");
    po::positional_options_description pos;
    pos.add("name", 1);
    po::variables_map vm;
    const command_help help{"new-plugin",
                            {"new-plugin NAME --kind format|diagnostic|intervention [--dir DIR]"},
                            "altgrad-host new-plugin my_fp4 --kind format --dir ~/plugins",
                            {{0, "the project was written (its files are listed)"},
                             {1, "an error: NAME/ exists and is not empty, or cannot be written"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;
    if (name.empty()) throw usage_error("new-plugin: which name? e.g. 'new-plugin my_fp4 --kind format'");
    const std::optional<altgrad_plugin_kind> kind = plugin_kind_names().value(kind_text);
    // No scaffold for transforms and accumulators yet: plugins/hadamard/ and
    // plugins/sm90_wgmma_fp8/ are the smallest examples.
    if (!kind || *kind == ALTGRAD_KIND_TRANSFORM || *kind == ALTGRAD_KIND_ACCUMULATOR)
        throw usage_error("new-plugin: --kind \"" + kind_text +
                          "\": expected one of format, diagnostic, intervention (for a transform, copy "
                          "plugins/hadamard/ of the AltGrad sources; for an accumulator, "
                          "plugins/sm90_wgmma_fp8/)");
    for (const auto& file : scaffold::write_plugin_project(name, *kind, dir))
        std::cout << file.string() << "\n";
    std::cerr << "next: see " << (std::filesystem::path(dir) / name / "README.md").lexically_normal().string()
              << " (build against the installed SDK, run the conformance kit, use it)\n";
    return 0;
}

}  // namespace altgrad::host::cli
