// altgrad-host quantize: numbers from standard input through a format, one
// C99 hex-float per line. The quick way to see what a format does to a value.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "plugins/abi_names.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "util/error.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::cli {

namespace {

// The value of --OPTION by its name in `names`; a usage error listing the names otherwise.
template <class E>
E parse_choice(const name_table<E>& names, const char* option, const std::string& s) {
    if (const std::optional<E> v = names.value(s)) return *v;
    throw usage_error("quantize: --" + std::string(option) + " \"" + s + "\": expected one of " + names.list());
}

// "nearest | stochastic | toward-zero" for the help.
template <class E>
std::string alternatives(const name_table<E>& names) {
    std::string s;
    for (const auto& [value, name] : names.entries()) s += (s.empty() ? "" : " | ") + std::string(name);
    return s;
}

}  // namespace

int quantize_command(const context& ctx, const args& a) {
    po::options_description options("quantize options (numbers are read from standard input)");
    std::vector<std::string> params;
    std::string rounding = "nearest", overflow = "saturate", scale_text = "1", seed_text = "0", offset_text = "0";
    quantize_options o;
    po::options_description operands;
    operands.add_options()("name", po::value<std::string>());
    options.add_options()(
        "rounding", po::value<std::string>(&rounding)->default_value("nearest"), alternatives(rounding_names()).c_str())(
        "overflow", po::value<std::string>(&overflow)->default_value("saturate"), alternatives(overflow_names()).c_str())(
        "scale", po::value<std::string>(&scale_text)->default_value("1"),
        "scale s: each x becomes q(x*s)/s (finite, > 0; decimal or hex-float)")(
        "seed", po::value<std::string>(&seed_text)->default_value("0"), "stochastic rounding seed")(
        "offset", po::value<std::string>(&offset_text)->default_value("0"),
        "index of the first value in the random stream")(
        "counts", "print the overflow and underflow counts to standard error")(
        "param", po::value<std::vector<std::string>>(&params), "KEY=VALUE plugin parameter (repeatable)");
    po::positional_options_description pos;
    pos.add("name", 1);
    po::variables_map vm;
    const command_help help{
        "quantize",
        {"--plugins DIR quantize NAME [--rounding nearest|stochastic|toward-zero]",
         "             [--overflow saturate|nonfinite] [--scale S] [--seed N] [--offset N] [--counts]",
         "             [--param KEY=VALUE]...   < numbers"},
        "echo \"0.1 464 1e5 nan\" | altgrad-host --plugins build/plugins quantize e4m3 --rounding nearest",
        {{0, "every number was quantized and printed"},
         {1, "an error: no such format plugin, a broken one, a bad parameter, or input that is not a number"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;
    if (!vm.count("name"))
        throw usage_error("quantize: which format? Give a format plugin's name, e.g. 'quantize e4m3' "
                          "('altgrad-host --plugins DIR list' shows them)");
    o.rounding = parse_choice(rounding_names(), "rounding", rounding);
    o.overflow = parse_choice(overflow_names(), "overflow", overflow);
    const std::optional<float> scale = parse_float(scale_text);
    if (!scale || !std::isfinite(*scale) || *scale <= 0.0f)
        throw usage_error("quantize: --scale \"" + scale_text + "\": expected a finite number > 0");
    o.scale = *scale;
    o.seed = unsigned_option("quantize", "seed", seed_text);
    o.offset = unsigned_option("quantize", "offset", offset_text);

    registry reg(ctx.plugins);
    const auto f = format_handle::create(reg.load(vm["name"].as<std::string>()), parse_param_assignments(params));
    const std::vector<float> in = read_floats(std::cin, "quantize: standard input");
    std::vector<float> out(in.size());
    const quantize_counts counts = f->quantize(in.data(), out.data(), in.size(), o);
    for (const float y : out) std::printf("%a\n", static_cast<double>(y));
    if (vm.count("counts"))
        std::fprintf(stderr, "overflow %llu underflow %llu of %zu\n", static_cast<unsigned long long>(counts.overflow),
                     static_cast<unsigned long long>(counts.underflow), in.size());
    return 0;
}

}  // namespace altgrad::host::cli
