#include "train/trainer.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "config/run_config.hpp"
#include "data/dataset.hpp"
#include "plugins/registry.hpp"
#include "train/model.hpp"
#include "util/error.hpp"
#include "util/json.hpp"

namespace altgrad::host::train {
namespace fs = std::filesystem;

namespace {

// ------------------------------------------------------------ small helpers

altgrad_rounding rounding_of(const std::string& s) {
    if (s == "stochastic") return ALTGRAD_ROUND_STOCHASTIC;
    if (s == "toward-zero") return ALTGRAD_ROUND_TOWARD_ZERO;
    return ALTGRAD_ROUND_NEAREST_EVEN;
}

scaling_config scaling_of(const config::quantization_config& q) {
    scaling_config s;
    s.mode = q.scaling == "delayed" ? scaling_mode::delayed
             : q.scaling == "current" ? scaling_mode::current
                                      : scaling_mode::none;
    s.history_len = static_cast<int>(q.amax_history_len);
    s.compute = q.amax_compute == "most_recent" ? amax_compute::most_recent : amax_compute::max;
    s.margin = static_cast<int>(q.margin);
    return s;
}

// The learning rate of step `step` (0-based): linear warm-up, then cosine
// decay to min_lr at max_steps (nanoGPT's schedule), or constant.
double learning_rate_at(const config::training_config& t, int64_t step) {
    if (step < t.warmup_steps) return t.learning_rate * static_cast<double>(step + 1) / static_cast<double>(t.warmup_steps + 1);
    if (t.lr_schedule == "constant") return t.learning_rate;
    const double span = static_cast<double>(std::max<int64_t>(1, t.max_steps - t.warmup_steps));
    const double ratio = std::min(1.0, static_cast<double>(step - t.warmup_steps) / span);
    return t.min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (t.learning_rate - t.min_lr);
}

std::string duration_text(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    const int64_t s = static_cast<int64_t>(seconds + 0.5);
    char buf[32];
    if (s >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                                 static_cast<long long>(s / 60 % 60));
    else if (s >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                                    static_cast<long long>(s % 60));
    else std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
    return buf;
}

void write_file_atomically(const fs::path& path, const std::string& text) {
    const fs::path tmp = path.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << text;
        if (!out) throw error(path.string() + ": cannot write");
    }
    fs::rename(tmp, path);
}

// ------------------------------------------------------------ the plan

// Give every quantization site its format plugin, rounding and scaling, from
// the config's global formats and per-layer rules.
void assign_formats(quant_plan& plan, const config::run_config& c, registry& plugins) {
    const config::quantization_config& q = c.quantization;
    std::map<std::string, std::shared_ptr<const format_handle>> handles;
    auto handle = [&](const std::string& name) -> std::shared_ptr<const format_handle> {
        if (name == "fp32") return nullptr;  // float32 is what the model computes in: nothing to do
        auto it = handles.find(name);
        if (it != handles.end()) return it->second;
        std::shared_ptr<const format_handle> h;
        try {
            h = format_handle::create(plugins.load(name));
        } catch (const error& e) {
            throw error(c.source.string() + ": quantization: format '" + name + "': " + e.what());
        }
        return handles[name] = h;
    };
    for (quant_site& s : plan.sites) {
        if (!q.enabled) continue;
        const config::layer_formats f = config::formats_for(q, s.layer);
        const bool backward = s.role == ALTGRAD_TENSOR_OUTPUT_GRADIENT;
        s.format = handle(s.role == ALTGRAD_TENSOR_WEIGHT ? f.weight : s.role == ALTGRAD_TENSOR_ACTIVATION ? f.activation
                                                                                                           : f.gradient);
        s.rounding = rounding_of(backward ? q.backward_rounding : q.forward_rounding);
        s.overflow = q.overflow == "nonfinite" ? ALTGRAD_OVERFLOW_NONFINITE : ALTGRAD_OVERFLOW_SATURATE;
        s.scaling = scaling_state(scaling_of(q), s.format ? s.format->info().max_finite : 1.0);
    }
}

// The parameter that holds a weight site's tensor (the LM head is tied).
std::string parameter_of(const quant_site& s) { return s.layer == "lm_head" ? "tok_emb.weight" : s.layer + ".weight"; }

// ------------------------------------------------------------ metrics

class metrics_log {
public:
    metrics_log(const fs::path& path, bool append) : out_(path, append ? std::ios::app : std::ios::trunc) {
        if (!out_) throw error(path.string() + ": cannot write");
    }
    void write(const std::string& line) {
        out_ << line << "\n";
        out_.flush();
    }

private:
    std::ofstream out_;
};

// Keep the lines of steps <= last_step (a resumed run rewrites what follows).
void truncate_metrics(const fs::path& path, int64_t last_step) {
    std::ifstream in(path);
    std::string kept, line;
    while (std::getline(in, line)) {
        const size_t at = line.find("\"step\": ");
        if (at == std::string::npos) continue;
        if (std::strtoll(line.c_str() + at + 8, nullptr, 10) <= last_step) kept += line + "\n";
    }
    write_file_atomically(path, kept);
}

std::string quant_stats_line(int64_t step, const quant_site& s) {
    std::ostringstream o;
    o << "{\"step\": " << step << ", \"tensor\": " << json::quote(s.name()) << ", \"role\": "
      << json::quote(s.role == ALTGRAD_TENSOR_WEIGHT ? "weight" : s.role == ALTGRAD_TENSOR_ACTIVATION ? "activation"
                                                                                                      : "gradient")
      << ", \"format\": " << json::quote(s.format ? s.format->name() : "fp32") << ", \"scale\": "
      << json::number(s.scale) << ", \"amax\": " << json::number(s.amax) << ", \"overflow\": " << s.overflow_count
      << ", \"underflow\": " << s.underflow_count << ", \"count\": " << s.count << "}";
    return o.str();
}

// ------------------------------------------------------------ checkpoints

fs::path checkpoint_dir(const fs::path& run_dir, int64_t step) {
    char name[32];
    std::snprintf(name, sizeof name, "step_%07lld", static_cast<long long>(step));
    return run_dir / "checkpoints" / name;
}

// The newest complete checkpoint: a step_N folder holding state.toml (written
// last, before the folder is renamed into place).
std::optional<std::pair<int64_t, fs::path>> latest_checkpoint(const fs::path& run_dir) {
    std::optional<std::pair<int64_t, fs::path>> best;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run_dir / "checkpoints", ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("step_", 0) != 0 || !fs::exists(e.path() / "state.toml")) continue;
        const int64_t step = std::strtoll(n.c_str() + 5, nullptr, 10);
        if (!best || step > best->first) best = {{step, e.path()}};
    }
    return best;
}

struct trainer_state {
    GPT model{nullptr};
    std::unique_ptr<torch::optim::AdamW> optimizer;
    quant_plan plan;
};

void save_checkpoint(const fs::path& run_dir, int64_t step, trainer_state& t, int64_t keep) {
    const fs::path final_dir = checkpoint_dir(run_dir, step);
    const fs::path tmp = run_dir / "checkpoints" / (".tmp-" + final_dir.filename().string());
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    torch::save(t.model, (tmp / "model.pt").string());
    torch::save(*t.optimizer, (tmp / "optimizer.pt").string());
    {
        auto gen = at::detail::getDefaultCPUGenerator();
        std::lock_guard<std::mutex> lock(gen.mutex());
        torch::save(gen.get_state(), (tmp / "rng.pt").string());
    }
    std::ostringstream state;
    state << "# AltGrad checkpoint: written last, so its presence marks a complete checkpoint.\nstep = " << step
          << "\n\n[scaling]\n";
    for (const quant_site& s : t.plan.sites)
        state << json::quote(s.name()) << " = " << json::quote(s.scaling.serialize()) << "\n";
    write_file_atomically(tmp / "state.toml", state.str());
    fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);  // atomic: a crash leaves a .tmp- folder, never a half checkpoint
    // Keep the newest `keep`.
    std::vector<fs::path> all;
    for (const auto& e : fs::directory_iterator(run_dir / "checkpoints"))
        if (e.path().filename().string().rfind("step_", 0) == 0) all.push_back(e.path());
    std::sort(all.begin(), all.end());
    for (size_t k = 0; k + static_cast<size_t>(keep) < all.size(); ++k) fs::remove_all(all[k]);
}

int64_t load_checkpoint(const fs::path& dir, trainer_state& t) {
    torch::load(t.model, (dir / "model.pt").string());
    torch::load(*t.optimizer, (dir / "optimizer.pt").string());
    {
        torch::Tensor rng;
        torch::load(rng, (dir / "rng.pt").string());
        auto gen = at::detail::getDefaultCPUGenerator();
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(rng);
    }
    std::ifstream in(dir / "state.toml");
    std::string line;
    int64_t step = -1;
    std::map<std::string, std::string> scaling;
    while (std::getline(in, line)) {
        if (line.rfind("step = ", 0) == 0) step = std::strtoll(line.c_str() + 7, nullptr, 10);
        const size_t eq = line.find("\" = \"");
        if (line.size() > 2 && line[0] == '"' && eq != std::string::npos)
            scaling[line.substr(1, eq - 1)] = line.substr(eq + 5, line.size() - eq - 6);
    }
    if (step < 0) throw error((dir / "state.toml").string() + ": key 'step': missing");
    for (quant_site& s : t.plan.sites) {
        const auto it = scaling.find(s.name());
        if (it != scaling.end()) s.scaling.deserialize(it->second);
    }
    return step;
}

// ------------------------------------------------------------ evaluation

double evaluate(trainer_state& t, const data::dataset& d, const config::run_config& c) {
    torch::NoGradGuard no_grad;
    t.model->eval();
    double total = 0;
    const int64_t B = c.training.batch_size, T = c.model.block_size;
    std::vector<int64_t> x(static_cast<size_t>(B * T)), y(x.size());
    for (int64_t i = 0; i < c.training.eval_batches; ++i) {
        // Evaluation batches are the same every time: steps 0..eval_batches-1 of the split.
        data::fill_batch(d, data::split::val, static_cast<uint64_t>(c.training.seed), static_cast<uint64_t>(i), B, T,
                         x.data(), y.data());
        const auto opts = torch::TensorOptions().dtype(torch::kLong);
        const torch::Tensor xt = torch::from_blob(x.data(), {B, T}, opts);
        const torch::Tensor yt = torch::from_blob(y.data(), {B, T}, opts);
        total += t.model->forward(xt, yt).second.item<double>();
    }
    t.model->train();
    return total / static_cast<double>(c.training.eval_batches);
}

// Evaluation must not disturb the delayed-scaling histories of training.
struct frozen_scaling {
    explicit frozen_scaling(quant_plan& p) : plan(p) {
        for (const quant_site& s : p.sites) saved.push_back(s.scaling);
    }
    ~frozen_scaling() {
        for (size_t k = 0; k < saved.size(); ++k) plan.sites[k].scaling = saved[k];
    }
    quant_plan& plan;
    std::vector<scaling_state> saved;
};

}  // namespace

run_summary run_training(const run_request& req, std::ostream& log) {
    const auto start_time = std::chrono::steady_clock::now();
    auto seconds_since = [](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };

    // ---- config and run directory
    const bool resuming = !req.resume.empty();
    fs::path run_dir = req.resume;
    config::run_config c;
    if (resuming) {
        if (!fs::exists(req.resume / "config.toml"))
            throw error("--resume " + req.resume.string() + ": no config.toml (not a run directory)");
        c = config::load_config(req.resume / "config.toml", req.overrides);
    } else {
        c = config::load_config(req.config, req.overrides);
        run_dir = req.out;
        if (run_dir.empty()) {
            run_dir = fs::path(c.output.dir) / c.name;
            for (int k = 2; fs::exists(run_dir); ++k) run_dir = fs::path(c.output.dir) / (c.name + "-" + std::to_string(k));
        } else if (fs::exists(run_dir) && !fs::is_empty(run_dir)) {
            throw error("--out " + run_dir.string() + ": exists and is not empty (use --resume to continue a run)");
        }
        fs::create_directories(run_dir / "checkpoints");
        fs::create_directories(run_dir / "reports");
        write_file_atomically(run_dir / "config.toml", config::to_toml(c));
    }
    const config::training_config& tc = c.training;
    if (tc.device == "cuda")
        throw error(c.source.string() + ": key 'training.device': \"cuda\" needs a LibTorch built with CUDA and format "
                    "plugins with a CUDA implementation; this build has neither (use \"cpu\")");
    const int threads = tc.threads > 0 ? static_cast<int>(tc.threads)
                                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(threads);

    // ---- data, plugins, model, optimizer
    data::data_options dopt;
    dopt.path = c.data.path;
    dopt.format = c.data.format;
    dopt.val_fraction = c.data.val_fraction;
    dopt.vocab_size = c.data.vocab_size;
    const data::dataset data = data::load_dataset(dopt, c.source.string() + ": data.path");
    data::check_block_size(data, c.model.block_size, c.model.vocab_size, c.source.string() + ": model");
    registry plugins(req.plugins);

    torch::manual_seed(static_cast<uint64_t>(tc.seed));
    trainer_state t;
    t.plan.seed = static_cast<uint64_t>(tc.seed);
    gpt_config g;
    g.vocab_size = c.model.vocab_size > 0 ? c.model.vocab_size : data.vocab_size();
    g.block_size = c.model.block_size;
    g.n_layer = c.model.n_layer;
    g.n_head = c.model.n_head;
    g.n_embd = c.model.n_embd;
    g.dropout = c.model.dropout;
    g.bias = c.model.bias;
    g.swiglu = c.model.activation == "swiglu";
    t.model = GPT(g, t.plan);
    assign_formats(t.plan, c, plugins);

    std::vector<torch::Tensor> decay, no_decay;
    for (auto& p : t.model->named_parameters()) (p.value().dim() >= 2 ? decay : no_decay).push_back(p.value());
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(tc.learning_rate)
                                       .betas({tc.beta1, tc.beta2})
                                       .weight_decay(tc.weight_decay)));
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                      torch::optim::AdamWOptions(tc.learning_rate).betas({tc.beta1, tc.beta2}).weight_decay(0.0)));
    t.optimizer = std::make_unique<torch::optim::AdamW>(std::move(groups));

    std::map<std::string, torch::Tensor> params;
    for (auto& p : t.model->named_parameters()) params[p.key()] = p.value();

    int64_t step = 0;
    if (resuming) {
        const auto ckpt = latest_checkpoint(run_dir);
        if (!ckpt) throw error("--resume " + run_dir.string() + ": no complete checkpoint in checkpoints/");
        step = load_checkpoint(ckpt->second, t);
        truncate_metrics(run_dir / "metrics.jsonl", step);
        log << "resumed " << run_dir.string() << " at step " << step << "\n";
    }
    metrics_log metrics(run_dir / "metrics.jsonl", resuming);

    int64_t parameters = 0;
    for (const auto& p : params) parameters += p.second.numel();
    log << "run " << c.name << ": " << parameters << " parameters, " << data.description() << "\n"
        << "run directory " << run_dir.string() << std::endl;

    // ---- the training loop
    const int64_t B = tc.batch_size, T = c.model.block_size;
    std::vector<int64_t> xb(static_cast<size_t>(B * T)), yb(xb.size());
    const auto long_opts = torch::TensorOptions().dtype(torch::kLong);
    run_summary summary;
    summary.run_dir = run_dir;
    summary.max_steps = tc.max_steps;
    summary.best_val_loss = INFINITY;
    summary.final_val_loss = NAN;
    summary.final_train_loss = NAN;
    summary.stop_reason = "finished";
    auto run_eval = [&](int64_t at_step) {
        frozen_scaling keep(t.plan);
        const double val = evaluate(t, data, c);
        metrics.write("{\"step\": " + std::to_string(at_step) + ", \"val_loss\": " + json::number(val) + "}");
        summary.final_val_loss = val;
        if (val < summary.best_val_loss) summary.best_val_loss = val;
        if (!req.live_progress) log << "step " << at_step << ": val loss " << val << std::endl;
        return val;
    };
    if (step == 0) run_eval(0);
    const auto loop_start = std::chrono::steady_clock::now();
    const int64_t first_step = step;
    while (step < tc.max_steps) {
        const auto step_start = std::chrono::steady_clock::now();
        const double lr = learning_rate_at(tc, step);
        for (auto& group : t.optimizer->param_groups())
            static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);

        data::fill_batch(data, data::split::train, static_cast<uint64_t>(tc.seed), static_cast<uint64_t>(step), B, T,
                         xb.data(), yb.data());
        t.plan.step = static_cast<uint64_t>(step);
        const torch::Tensor x = torch::from_blob(xb.data(), {B, T}, long_opts);
        const torch::Tensor y = torch::from_blob(yb.data(), {B, T}, long_opts);

        t.optimizer->zero_grad();
        const torch::Tensor loss = t.model->forward(x, y).second;  // quantizes weights and activations
        loss.backward();                                             // quantizes output gradients
        const double grad_norm =
            tc.grad_clip > 0 ? torch::nn::utils::clip_grad_norm_(t.model->parameters(), tc.grad_clip)
                             : torch::nn::utils::clip_grad_norm_(t.model->parameters(), INFINITY);
        t.optimizer->step();
        if (!c.quantization.shadow_weights) {
            // No master copy: the weights live in their format, and an update
            // too small to move a weight to another code is lost (bit stall).
            torch::NoGradGuard no_grad;
            for (const quant_site& s : t.plan.sites)
                if (s.role == ALTGRAD_TENSOR_WEIGHT)
                    store_in_format(params.at(parameter_of(s)), s, t.plan, t.plan.sites.size());
        }
        ++step;

        const double loss_value = loss.item<double>();
        const double step_seconds = seconds_since(step_start);
        const double tokens_per_s = static_cast<double>(B * T) / std::max(step_seconds, 1e-9);
        summary.final_train_loss = loss_value;
        metrics.write("{\"step\": " + std::to_string(step) + ", \"loss\": " + json::number(loss_value) +
                      ", \"lr\": " + json::number(lr) + ", \"grad_norm\": " + json::number(grad_norm) +
                      ", \"tokens_per_s\": " + json::number(tokens_per_s) + "}");
        if (step % c.quantization.diagnostic_interval == 0 || step == tc.max_steps)
            for (const quant_site& s : t.plan.sites)
                if (s.format) metrics.write(quant_stats_line(step, s));

        const double elapsed = seconds_since(loop_start);
        const double eta = elapsed / static_cast<double>(step - first_step) * static_cast<double>(tc.max_steps - step);
        if (req.live_progress) {
            char line[160];
            std::snprintf(line, sizeof line, "\rstep %lld/%lld | loss %.4f | %.0f tok/s | ETA %s   ",
                          static_cast<long long>(step), static_cast<long long>(tc.max_steps), loss_value, tokens_per_s,
                          duration_text(eta).c_str());
            log << line << std::flush;
        } else if (step % tc.log_interval == 0 || step == tc.max_steps) {
            log << "step " << step << "/" << tc.max_steps << " loss " << loss_value << " lr " << lr << " "
                << static_cast<int64_t>(tokens_per_s) << " tok/s ETA " << duration_text(eta) << std::endl;
        }
        if (!std::isfinite(loss_value)) {
            summary.stop_reason = "non-finite loss at step " + std::to_string(step);
            save_checkpoint(run_dir, step, t, c.output.keep_checkpoints);
            break;
        }
        if (step % tc.eval_interval == 0 || step == tc.max_steps) run_eval(step);
        if (step % c.output.checkpoint_interval == 0 || step == tc.max_steps)
            save_checkpoint(run_dir, step, t, c.output.keep_checkpoints);
    }
    if (req.live_progress) log << "\n";
    summary.steps_done = step;
    summary.seconds = seconds_since(start_time);
    log << "done: " << summary.stop_reason << ", " << summary.steps_done << "/" << summary.max_steps
        << " steps, final train loss " << summary.final_train_loss << ", final val loss " << summary.final_val_loss
        << " (best " << summary.best_val_loss << "), " << duration_text(summary.seconds) << "\n"
        << "run directory " << run_dir.string() << " (config.toml, metrics.jsonl, checkpoints/)\n"
        << "corpus unigram entropy " << data.unigram_entropy_nats() << " nats/char\n";
    return summary;
}

}  // namespace altgrad::host::train
