// One training step (forward, backward, AdamW), quantized (E5M2 everywhere:
// every linear layer's weight, input and output gradient through the e5m2
// format plugin, delayed scaling, stochastic rounding backward) against
// unquantized (float32), same model and batch, in the same process.
//
//   altgrad_train_step_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   benchmarks/step_ratio.py < the JSON output   (prints quantized / float32)
//
// The model is the configs' default (4 layers, 4 heads, 128 wide, 64-token
// blocks, vocabulary 113 as the fortunes corpus), batch 12, one thread.
#include <benchmark/benchmark.h>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cstdlib>
#include <memory>

#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "train/model.hpp"

namespace {

using namespace altgrad::host;

struct step_setup {
    train::quant_plan plan;
    train::GPT model{nullptr};
    std::unique_ptr<torch::optim::AdamW> optimizer;
    torch::Tensor x, y;

    explicit step_setup(bool quantized) {
        train::set_cpu_threads(1);
        torch::manual_seed(42);
        train::gpt_config c;
        c.vocab_size = 113;
        model = train::GPT(c, plan);
        if (quantized) {
            const char* dir = std::getenv("ALTGRAD_PLUGIN_DIR");
            static registry reg(dir ? dir : ALTGRAD_BENCH_PLUGIN_DIR);
            static const std::shared_ptr<const format_handle> e5m2 = format_handle::create(reg.load("e5m2"));
            for (train::quant_site& s : plan.sites) {
                s.format = e5m2;
                s.rounding = s.role == ALTGRAD_TENSOR_OUTPUT_GRADIENT ? ALTGRAD_ROUND_STOCHASTIC
                                                                      : ALTGRAD_ROUND_NEAREST_EVEN;
                s.scaling = quant::scaling_state(quant::scaling_config{}, e5m2->info().max_finite);
            }
        }
        optimizer =
            std::make_unique<torch::optim::AdamW>(model->parameters(), torch::optim::AdamWOptions(6e-4));
        x = torch::randint(c.vocab_size, {12, c.block_size}, torch::TensorOptions().dtype(torch::kLong));
        y = torch::randint(c.vocab_size, {12, c.block_size}, torch::TensorOptions().dtype(torch::kLong));
    }

    double step() {
        ++plan.step;
        optimizer->zero_grad();
        const torch::Tensor loss = model->forward(x, y).second;
        loss.backward();
        torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
        optimizer->step();
        return loss.item<double>();
    }
};

void BM_train_step(benchmark::State& state) {
    const bool quantized = state.range(0) != 0;
    step_setup s(quantized);
    for (int i = 0; i < 3; ++i) s.step();  // warm up: allocator, scaling history
    for (auto _ : state) benchmark::DoNotOptimize(s.step());
    state.SetLabel(quantized ? "e5m2" : "fp32");
    state.SetItemsProcessed(state.iterations() * 12 * 64);  // tokens
}

BENCHMARK(BM_train_step)->Arg(0)->Arg(1)->ArgName("quantized")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
