// altgrad-host quantize: numbers from standard input through a format, one
// C99 hex-float per line. The quick way to see what a format does to a value.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "util/error.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::cli {

namespace {

altgrad_rounding parse_rounding(const std::string& s) {
    if (s == "nearest") return ALTGRAD_ROUND_NEAREST_EVEN;
    if (s == "stochastic") return ALTGRAD_ROUND_STOCHASTIC;
    if (s == "toward-zero") return ALTGRAD_ROUND_TOWARD_ZERO;
    throw usage_error("quantize: --rounding \"" + s + "\": expected nearest, stochastic or toward-zero");
}

altgrad_overflow parse_overflow(const std::string& s) {
    if (s == "saturate") return ALTGRAD_OVERFLOW_SATURATE;
    if (s == "nonfinite") return ALTGRAD_OVERFLOW_NONFINITE;
    throw usage_error("quantize: --overflow \"" + s + "\": expected saturate or nonfinite");
}

}  // namespace

int quantize_command(const context& ctx, const args& a) {
    po::options_description options("quantize options (numbers are read from standard input)");
    std::vector<std::string> params;
    std::string rounding = "nearest", overflow = "saturate", scale_text = "1";
    quantize_options o;
    options.add_options()("name", po::value<std::string>()->required(), "format plugin name")(
        "rounding", po::value<std::string>(&rounding)->default_value("nearest"), "nearest | stochastic | toward-zero")(
        "overflow", po::value<std::string>(&overflow)->default_value("saturate"), "saturate | nonfinite")(
        "scale", po::value<std::string>(&scale_text)->default_value("1"),
        "scale s: each x becomes q(x*s)/s (finite, > 0; decimal or hex-float)")(
        "seed", po::value<uint64_t>(&o.seed)->default_value(0), "stochastic rounding seed")(
        "offset", po::value<uint64_t>(&o.offset)->default_value(0), "index of the first value in the random stream")(
        "counts", "print the overflow and underflow counts to standard error")(
        "param", po::value<std::vector<std::string>>(&params), "KEY=VALUE plugin parameter (repeatable)");
    po::positional_options_description pos;
    pos.add("name", 1);
    po::variables_map vm;
    if (!parse_subcommand("quantize",
                          "quantize NAME [--rounding MODE] [--overflow MODE] [--scale S] [--seed N] [--param K=V]... < numbers",
                          options, pos, a, vm))
        return 0;
    o.rounding = parse_rounding(rounding);
    o.overflow = parse_overflow(overflow);
    const std::optional<float> scale = parse_float(scale_text);
    if (!scale || !std::isfinite(*scale) || *scale <= 0.0f)
        throw usage_error("quantize: --scale \"" + scale_text + "\": expected a finite number > 0");
    o.scale = *scale;

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
