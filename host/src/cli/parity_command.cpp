// altgrad-host parity: whether a config's recipe quantizes on the GPU what it
// quantizes on the CPU, bit for bit (train/device_parity.hpp).
#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "train/device_parity.hpp"
#include "util/error.hpp"

namespace altgrad::host::cli {

namespace {

constexpr int kDifferingExitCode = 3;
constexpr size_t kMismatchesShown = 20;

void print_report(const train::parity_report& r, const std::string& config) {
    std::cout << "parity of " << config << ": the CPU against " << r.against << ", " << r.layers
              << " linear layers, " << r.steps << " step(s) each\n\n"
              << "| operand | tensors | elements | differing |\n|---|---:|---:|---:|\n";
    for (const auto& [kind, t] : r.by_operand)
        std::cout << "| " << kind << " | " << t.tensors << " | " << t.elements << " | " << t.differing
                  << " |\n";
    if (!r.product_difference.empty()) {
        std::cout << "\nproducts (float32 by two libraries, not judged): largest |difference| / max |value|:";
        for (const auto& [product, d] : r.product_difference) {
            char text[32];
            std::snprintf(text, sizeof text, "%.3g", d);
            std::cout << " " << product << " " << text;
        }
        std::cout << "\n";
    }
    for (const std::string& note : r.not_compared) std::cout << "not compared: " << note << "\n";
    for (size_t i = 0; i < r.mismatches.size() && i < kMismatchesShown; ++i) {
        const train::parity_mismatch& m = r.mismatches[i];
        std::cout << "differs: " << m.what << ": " << m.differing << " of " << m.elements << " (" << m.first
                  << ")\n";
    }
    if (r.mismatches.size() > kMismatchesShown)
        std::cout << "differs: ... and " << r.mismatches.size() - kMismatchesShown << " more\n";
    const int64_t n = r.differing();
    std::cout << "\n" << (n == 0 ? "same bits" : std::to_string(n) + " differing") << "\n";
}

}  // namespace

int parity_command(const context& ctx, const args& a) {
    po::options_description options("parity options");
    train::parity_request req;
    std::string config;
    options.add_options()("set", po::value<std::vector<std::string>>(&req.overrides),
                          "KEY=VALUE config override (repeatable), as for run")(
        "against-set", po::value<std::vector<std::string>>(&req.against_overrides),
        "KEY=VALUE override of the other side only (repeatable): which operands a change moves")(
        "device", po::value<std::string>(&req.device)->default_value("cuda"),
        "cuda: GPU 0 against the CPU; cpu: the CPU with one thread against training.threads")(
        "steps", po::value<int64_t>(&req.steps)->default_value(2),
        "calls of each layer (the second scales from the first's amax history)")(
        "tokens", po::value<int64_t>(&req.tokens)->default_value(256), "rows of each layer's input")(
        "vocab", po::value<int64_t>(&req.vocab)->default_value(97), "rows of the LM head");
    po::options_description operands;
    operands.add_options()("config", po::value<std::string>(&config));
    po::positional_options_description pos;
    pos.add("config", 1);
    po::variables_map vm;
    const command_help help{
        "parity",
        {"[--plugins DIR] parity CONFIG.toml [--set KEY=VALUE]... [--against-set KEY=VALUE]...",
         "             [--device cuda|cpu] [--steps N] [--tokens N] [--vocab N]"},
        "altgrad-host --plugins build/plugins parity configs/recipes/nvfp4.toml",
        {{0, "every operand and site state has the same bits on both sides"},
         {1, "an error: a bad config, a plugin without a CUDA path, no usable GPU"},
         {kDifferingExitCode,
          "some bits differ (each tensor that differs is listed, with its first element)"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;
    if (config.empty()) throw usage_error("parity: give a CONFIG.toml");
    if (req.steps < 1 || req.tokens < 1 || req.vocab < 1)
        throw usage_error("parity: --steps, --tokens and --vocab take a positive number");
    req.config = config;
    req.plugins = ctx.plugins;
    const train::parity_report r = train::check_device_parity(req);
    print_report(r, config);
    return r.differing() == 0 ? 0 : kDifferingExitCode;
}

}  // namespace altgrad::host::cli
