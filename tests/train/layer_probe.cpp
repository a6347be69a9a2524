// altgrad_layer_probe: one linear layer of a config's GPT, run by the
// trainer's own code (train::assign_formats, train::quantized_linear) on
// tensors a test gives, for tests/python/test_layer_parity.py, which runs
// Python's QuantLinear on the same tensors and compares the bits.
//
//   altgrad_layer_probe PLUGINS CONFIG LAYER TOKENS IN OUT STEPS INPUT OUTPUT [KEY=VALUE ...]
//
// Prints the model's quantized layers, one a line, in the trainer's order
// (the streams' layer k of L). INPUT holds float32 values, in this order:
// w [OUT, IN], b [OUT], then per step x [TOKENS, IN] and dy [TOKENS, OUT].
// OUTPUT receives, per step (plan.step = 0, 1, ...), y [TOKENS, OUT],
// dx [TOKENS, IN], dW [OUT, IN] and db [OUT]. KEY=VALUE: --set overrides.
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "config/layer_names.hpp"
#include "config/run_config.hpp"
#include "plugins/registry.hpp"
#include "train/format_library.hpp"
#include "train/quant_plan.hpp"

namespace train = altgrad::host::train;
namespace config = altgrad::host::config;

namespace {

torch::Tensor take(const std::vector<float>& all, size_t& at, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (at + static_cast<size_t>(n) > all.size()) throw std::runtime_error("INPUT: too few values");
    torch::Tensor t = torch::from_blob(const_cast<float*>(all.data() + at), shape, torch::kFloat32).clone();
    at += static_cast<size_t>(n);
    return t;
}

void put(std::ofstream& out, const torch::Tensor& t) {
    const torch::Tensor c = t.detach().contiguous();
    out.write(reinterpret_cast<const char*>(c.data_ptr<float>()),
              static_cast<std::streamsize>(c.numel() * 4));
}

int probe(int argc, char** argv) {
    if (argc < 10) {
        std::cerr << "usage: altgrad_layer_probe PLUGINS CONFIG LAYER TOKENS IN OUT STEPS INPUT OUTPUT "
                     "[KEY=VALUE ...]\n";
        return 2;
    }
    const std::string layer = argv[3];
    const int64_t tokens = std::stoll(argv[4]), in = std::stoll(argv[5]), out = std::stoll(argv[6]),
                  steps = std::stoll(argv[7]);
    const std::vector<std::string> overrides(argv + 10, argv + argc);
    torch::set_num_threads(1);

    altgrad::host::registry plugins(argv[1]);
    const config::run_config c = config::load_config(argv[2], overrides);
    train::format_library formats(plugins, c.source.string() + ": quantization", c.quantization.params);
    train::quant_plan plan;
    size_t first_site = SIZE_MAX;
    for (const std::string& name :
         config::layer_names(c.model.n_layer, c.model.activation == config::activation_function::swiglu)) {
        const size_t s = plan.add_linear(name);
        if (name == layer) first_site = s;
        std::cout << name << "\n";
    }
    if (first_site == SIZE_MAX)
        throw std::runtime_error("LAYER: '" + layer + "' is not a layer of the model");
    train::assign_formats(plan, c, formats);
    plan.seed = static_cast<uint64_t>(c.training.seed);
    plan.gemm_threads = 1;

    std::ifstream input(argv[8], std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
    std::vector<float> values(bytes.size() / 4);
    std::memcpy(values.data(), bytes.data(), values.size() * 4);
    size_t at = 0;
    const torch::Tensor w0 = take(values, at, {out, in}), b0 = take(values, at, {out});
    std::ofstream output(argv[9], std::ios::binary);
    for (int64_t step = 0; step < steps; ++step) {
        plan.step = static_cast<uint64_t>(step);
        const torch::Tensor x = take(values, at, {1, tokens, in}).requires_grad_(true);
        const torch::Tensor dy = take(values, at, {1, tokens, out});
        const torch::Tensor w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
        const torch::Tensor y = train::quantized_linear(x, w, b, plan, first_site);
        y.backward(dy);
        put(output, y);
        put(output, x.grad());
        put(output, w.grad());
        put(output, b.grad());
    }
    return output ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return probe(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << "altgrad_layer_probe: " << e.what() << "\n";
        return 1;
    }
}
