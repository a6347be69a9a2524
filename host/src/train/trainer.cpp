#include "train/trainer.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "config/run_config.hpp"
#include "data/dataset.hpp"
#include "plugins/registry.hpp"
#include "stability/failure.hpp"
#include "stability/failure_report.hpp"
#include "stability/plugin_set.hpp"
#include "train/history.hpp"
#include "train/measure.hpp"
#include "train/model.hpp"
#include "util/glob.hpp"
#include "util/error.hpp"
#include "util/json.hpp"
#include "util/json_value.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::train {
namespace fs = std::filesystem;

namespace {

// ------------------------------------------------------------ small helpers

scaling_config scaling_of(const config::quantization_config& q) {
    scaling_config s;
    s.mode = q.scaling;
    s.history_len = static_cast<int>(q.amax_history_len);
    s.compute = q.amax_compute;
    s.margin = static_cast<int>(q.margin);
    return s;
}

// The learning rate of step `step` (0-based): linear warm-up, then cosine
// decay to min_lr at max_steps (nanoGPT's schedule), or constant.
double learning_rate_at(const config::training_config& t, int64_t step) {
    if (step < t.warmup_steps) return t.learning_rate * static_cast<double>(step + 1) / static_cast<double>(t.warmup_steps + 1);
    if (t.lr_schedule == config::lr_schedule_kind::constant) return t.learning_rate;
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

// The format plugins of a run, created once each by name. "fp32" is no
// plugin here: float32 is what the model computes in, so nothing to do.
class format_library {
public:
    format_library(registry& plugins, std::string where) : plugins_(plugins), where_(std::move(where)) {}

    std::shared_ptr<const format_handle> get(const std::string& name) {
        if (name == "fp32") return nullptr;
        return load(name);
    }
    // The fp32 plugin itself: the format diagnostics see for float32 tensors.
    std::shared_ptr<const format_handle> fp32() { return load("fp32"); }

private:
    std::shared_ptr<const format_handle> load(const std::string& name) {
        auto it = handles_.find(name);
        if (it != handles_.end()) return it->second;
        try {
            return handles_[name] = format_handle::create(plugins_.load(name));
        } catch (const error& e) {
            throw error(where_ + ": format '" + name + "': " + e.what());
        }
    }
    registry& plugins_;
    std::string where_;
    std::map<std::string, std::shared_ptr<const format_handle>> handles_;
};

// Give every quantization site its format plugin, rounding and scaling, from
// the config's global formats and per-layer rules.
void assign_formats(quant_plan& plan, const config::run_config& c, format_library& formats) {
    const config::quantization_config& q = c.quantization;
    for (quant_site& s : plan.sites) {
        if (!q.enabled) continue;
        const config::layer_formats f = config::formats_for(q, s.layer);
        const bool backward = s.role == ALTGRAD_TENSOR_OUTPUT_GRADIENT;
        s.format = formats.get(s.role == ALTGRAD_TENSOR_WEIGHT ? f.weight : s.role == ALTGRAD_TENSOR_ACTIVATION ? f.activation
                                                                                                                : f.gradient);
        s.rounding = backward ? q.backward_rounding : q.forward_rounding;
        s.overflow = q.overflow;
        s.scaling = scaling_state(scaling_of(q), s.format ? s.format->info().max_finite : 1.0);
    }
}

std::string format_name_of(const quant_site& s) { return s.format ? s.format->name() : "fp32"; }

// Where training runs: the CPU, or the first CUDA GPU when the config asks
// for one, LibTorch can reach one, and every format plugin in use takes
// device buffers (a format an intervention switches to later is checked when
// it is first used).
torch::Device training_device(const config::run_config& c, const quant_plan& plan) {
    if (c.training.device != config::compute_device::cuda) return torch::kCPU;
    const std::string key = c.source.string() + ": key 'training.device': \"cuda\"";
    if (!torch::cuda::is_available())
        throw error(key + " needs a LibTorch built with CUDA and a visible GPU, and this process has no usable one "
                    "(torch::cuda::is_available() is false; use \"cpu\")");
    for (const quant_site& s : plan.sites)
        if (s.format && !s.format->accepts(ALTGRAD_MEMORY_CUDA))
            throw error(key + ": format plugin '" + s.format->name() + "' (" + s.name() +
                        ") has no CUDA implementation (build the plugins with ALTGRAD_CUDA=ON, or use \"cpu\")");
    return torch::Device(torch::kCUDA, 0);
}

// A format switch asked by an intervention: every site whose name matches
// `pattern` and is in another format moves to `to`, with fresh scaling (the
// old amax history says nothing about the new range).
std::vector<format_switch> switch_formats(quant_plan& plan, const std::string& pattern, const std::string& to,
                                          format_library& formats) {
    std::vector<format_switch> done;
    for (quant_site& s : plan.sites) {
        if (!glob_match(pattern, s.name()) || format_name_of(s) == to) continue;
        const std::string from = format_name_of(s);
        s.format = formats.get(to);
        s.scaling.reset(s.format ? s.format->info().max_finite : 1.0);
        done.push_back({s.name(), from, to});
    }
    return done;
}

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
    const bool weight = s.role == ALTGRAD_TENSOR_WEIGHT;
    o << "{\"step\": " << step << ", \"tensor\": " << json::quote(s.name()) << ", \"role\": "
      << json::quote(s.role_name())
      << ", \"format\": " << json::quote(s.format ? s.format->name() : "fp32") << ", \"scale\": "
      << json::number(s.scale) << ", \"amax\": " << json::number(s.amax) << ", \"overflow\": " << s.overflow_count
      << ", \"underflow\": " << s.underflow_count << ", \"count\": " << s.count;
    if (weight) o << ", \"bit_stall_rate\": " << json::number(s.bit_stall_rate);
    o << "}";
    return o.str();
}

std::string diagnostic_line(int64_t step, const diagnostic_record& r) {
    std::ostringstream o;
    o << "{\"step\": " << step << ", \"diagnostic\": " << json::quote(r.diagnostic) << ", \"tensor\": "
      << json::quote(r.tensor) << ", \"role\": " << json::quote(r.role) << ", \"values\": {";
    for (size_t i = 0; i < r.values.size(); ++i)
        o << (i ? ", " : "") << json::quote(r.values[i].first) << ": " << json::number(r.values[i].second);
    o << "}}";
    return o.str();
}

// {"step", "event", "plugin", "reason", ...extra}: extra is pre-rendered `, "key": value` text.
std::string event_line(int64_t step, const std::string& event, const std::string& plugin, const std::string& reason,
                       const std::string& extra = "") {
    return "{\"step\": " + std::to_string(step) + ", \"event\": " + json::quote(event) + ", \"plugin\": " +
           json::quote(plugin) + ", \"reason\": " + json::quote(reason) + extra + "}";
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

// Everything a checkpoint holds, so that a resumed run repeats the
// uninterrupted one: the model and optimizer, the quantization plan (formats,
// scaling), the bit-stall snapshots, the random generators (CPU, and the
// GPU's when training there), the loop's own counters, the failure
// detector's streaks, the interventions' saved states and the run history.
struct trainer_state {
    GPT model{nullptr};
    std::unique_ptr<torch::optim::AdamW> optimizer;
    quant_plan plan;
    bit_stall_meter stall;
    uint32_t nonfinite_run = 0;    // consecutive non-finite steps, the last one included
    double window_loss_sum = 0;    // finite training losses since the last measurement
    int64_t window_loss_n = 0;
    stability::failure_detector* detector = nullptr;
    stability::intervention_set* interventions = nullptr;
    run_history history;
    torch::Device device{torch::kCPU};  // where the model trains
};

// LibTorch's default random generator of `device` (dropout draws from it).
at::Generator default_generator(const torch::Device& device) {
    return device.is_cuda() ? at::globalContext().defaultGenerator(device) : at::detail::getDefaultCPUGenerator();
}

void save_generator(const torch::Device& device, const fs::path& file) {
    at::Generator gen = default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    torch::save(gen.get_state(), file.string());
}

void load_generator(const torch::Device& device, const fs::path& file) {
    torch::Tensor state;
    torch::load(state, file.string());
    at::Generator gen = default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
}

void save_checkpoint(const fs::path& run_dir, int64_t step, const trainer_state& t, int64_t keep) {
    const fs::path final_dir = checkpoint_dir(run_dir, step);
    const fs::path tmp = run_dir / "checkpoints" / (".tmp-" + final_dir.filename().string());
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    torch::save(t.model, (tmp / "model.pt").string());
    torch::save(*t.optimizer, (tmp / "optimizer.pt").string());
    save_generator(torch::Device(torch::kCPU), tmp / "rng.pt");
    if (t.device.is_cuda()) save_generator(t.device, tmp / "rng_cuda.pt");  // dropout on the GPU
    t.interventions->save_states(tmp);
    write_file_atomically(tmp / "history.json", history_json(t.history));
    std::ostringstream state;
    state << "# AltGrad checkpoint: written last, so its presence marks a complete checkpoint.\nstep = " << step
          << "\n\n[loop]\n\"nonfinite_run\" = \"" << t.nonfinite_run << "\"\n\"window_loss_sum\" = \""
          << hex_float(t.window_loss_sum) << "\"\n\"window_loss_n\" = \"" << t.window_loss_n << "\"\n\"failure_detector\" = \""
          << t.detector->serialize() << "\"\n\n[bit_stall_rate]\n";
    for (const quant_site& s : t.plan.sites)
        if (s.role == ALTGRAD_TENSOR_WEIGHT) state << json::quote(s.name()) << " = \"" << hex_float(s.bit_stall_rate) << "\"\n";
    state << "\n[scaling]\n";
    for (const quant_site& s : t.plan.sites)
        state << json::quote(s.name()) << " = " << json::quote(s.scaling.serialize()) << "\n";
    state << "\n[formats]\n";
    for (const quant_site& s : t.plan.sites) state << json::quote(s.name()) << " = " << json::quote(format_name_of(s)) << "\n";
    {
        // Undefined entries (non-weights, or before the first snapshot) are saved as empty tensors.
        std::vector<torch::Tensor> snaps;
        for (const torch::Tensor& x : t.stall.snapshots()) snaps.push_back(x.defined() ? x : torch::empty({0}));
        torch::save(snaps, (tmp / "bit_stall.pt").string());
    }
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

int64_t load_checkpoint(const fs::path& dir, trainer_state& t, format_library& formats) {
    torch::load(t.model, (dir / "model.pt").string());
    torch::load(*t.optimizer, (dir / "optimizer.pt").string());
    load_generator(torch::Device(torch::kCPU), dir / "rng.pt");
    if (t.device.is_cuda() && fs::exists(dir / "rng_cuda.pt")) load_generator(t.device, dir / "rng_cuda.pt");
    const std::string where = (dir / "state.toml").string();
    std::ifstream in(dir / "state.toml");
    std::string line;
    int64_t step = -1;
    std::map<std::string, std::map<std::string, std::string>> sections;  // [section] -> "key" = "value"
    std::string section;
    while (std::getline(in, line)) {
        if (line.rfind("step = ", 0) == 0) step = std::strtoll(line.c_str() + 7, nullptr, 10);
        if (line.size() > 2 && line.front() == '[' && line.back() == ']') section = line.substr(1, line.size() - 2);
        const size_t eq = line.find("\" = \"");
        if (line.size() > 2 && line[0] == '"' && eq != std::string::npos)
            sections[section][line.substr(1, eq - 1)] = line.substr(eq + 5, line.size() - eq - 6);
    }
    if (step < 0) throw error(where + ": key 'step': missing");
    const std::map<std::string, std::string>& scaling = sections["scaling"];
    const std::map<std::string, std::string>& format = sections["formats"];
    // Checkpoints from before [loop] existed resume with fresh counters.
    const std::map<std::string, std::string>& loop = sections["loop"];
    const auto loop_value = [&](const char* key) -> const std::string* {
        const auto it = loop.find(key);
        return it == loop.end() ? nullptr : &it->second;
    };
    if (const std::string* v = loop_value("nonfinite_run")) t.nonfinite_run = static_cast<uint32_t>(std::stoul(*v));
    if (const std::string* v = loop_value("window_loss_sum")) t.window_loss_sum = std::strtod(v->c_str(), nullptr);
    if (const std::string* v = loop_value("window_loss_n")) t.window_loss_n = std::stoll(*v);
    if (const std::string* v = loop_value("failure_detector")) t.detector->deserialize(*v, where + ": [loop] failure_detector");
    for (quant_site& s : t.plan.sites) {
        const auto it = sections["bit_stall_rate"].find(s.name());
        if (it != sections["bit_stall_rate"].end()) s.bit_stall_rate = std::strtod(it->second.c_str(), nullptr);
    }
    for (quant_site& s : t.plan.sites) {
        // Formats first (an intervention may have switched some), then their scaling.
        const auto f = format.find(s.name());
        if (f != format.end() && f->second != format_name_of(s)) {
            s.format = formats.get(f->second);
            s.scaling.reset(s.format ? s.format->info().max_finite : 1.0);
        }
        const auto it = scaling.find(s.name());
        if (it != scaling.end()) s.scaling.deserialize(it->second);
    }
    if (fs::exists(dir / "bit_stall.pt")) {
        std::vector<torch::Tensor> snaps;
        torch::load(snaps, (dir / "bit_stall.pt").string());
        for (torch::Tensor& x : snaps)
            if (x.numel() == 0) x = torch::Tensor();
        t.stall.restore(std::move(snaps));
    }
    if (fs::exists(dir / "history.json")) {
        std::ifstream h(dir / "history.json");
        const std::string text((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
        try {
            t.history = history_from_json(text, (dir / "history.json").string());
        } catch (const json::parse_error& e) {
            throw error((dir / "history.json").string() + ": " + e.what());
        }
    }
    return step;
}

// ------------------------------------------------------------ evaluation

double evaluate(trainer_state& t, const data::dataset& d, const config::run_config& c, const torch::Device& device) {
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
        const torch::Tensor xt = torch::from_blob(x.data(), {B, T}, opts).to(device);
        const torch::Tensor yt = torch::from_blob(y.data(), {B, T}, opts).to(device);
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

// ------------------------------------------------------------ stability

// What the interventions see of step `step` (0-based, as the ABI counts).
observation observe_step(uint64_t step, double loss, double grad_norm, double lr, uint32_t nonfinite_run,
                         const quant_plan& plan, bool stall_fresh) {
    observation o;
    o.step = step;
    o.loss = loss;
    o.grad_norm = grad_norm;
    o.learning_rate = lr;
    o.consecutive_nonfinite_steps = nonfinite_run;
    for (const quant_site& s : plan.sites) {
        if (!s.format) continue;
        tensor_observation t;
        t.name = s.name();
        t.role = s.role;
        t.format = s.format->name();
        t.format_max = s.format->info().max_finite;
        t.overflow_rate = s.overflow_rate();
        t.underflow_rate = s.underflow_rate();
        t.bit_stall_rate = s.role == ALTGRAD_TENSOR_WEIGHT && stall_fresh ? s.bit_stall_rate : NAN;
        o.tensors.push_back(std::move(t));
    }
    return o;
}

// The interventions' answers folded into what this step does.
struct step_actions {
    double clip = INFINITY;  // the smallest max norm asked for
    bool skip = false;
    std::vector<stability::plugin_action> switches;  // applied after the step
};

// Clip the global gradient norm (known: `norm`) to `max_norm`, as clip_grad_norm_ does.
void clip_gradients(const std::vector<torch::Tensor>& params, double max_norm, double norm) {
    if (!(norm > max_norm)) return;
    torch::NoGradGuard no_grad;
    const double factor = max_norm / (norm + 1e-6);
    for (const torch::Tensor& p : params)
        if (p.grad().defined()) p.grad().mul_(factor);
}

void remember_diagnostics(run_history& h, int64_t step, const std::vector<diagnostic_record>& records) {
    std::map<std::string, std::pair<double, int>> sums;  // diagnostic.value -> (sum, n) over tensors
    for (const diagnostic_record& r : records)
        for (const auto& [name, value] : r.values)
            if (std::isfinite(value)) {
                auto& s = sums[r.diagnostic + "." + name];
                s.first += value;
                ++s.second;
            }
    for (const auto& [name, s] : sums) h.diagnostics.push_back({step, name, s.first / s.second});
    // Keep the last three snapshots.
    std::set<int64_t> steps;
    for (const auto& d : h.diagnostics) steps.insert(d.step);
    while (steps.size() > 3) {
        const int64_t oldest = *steps.begin();
        steps.erase(steps.begin());
        while (!h.diagnostics.empty() && h.diagnostics.front().step == oldest) h.diagnostics.pop_front();
    }
}

stability::failure_context failure_context_of(const config::run_config& c, const stability::verdict& v,
                                              const fs::path& checkpoint, double lr, const quant_plan& plan,
                                              const std::map<std::string, torch::Tensor>& params,
                                              const run_history& h) {
    stability::failure_context x;
    x.config = c;
    x.collapse = v;
    x.checkpoint = checkpoint.string();
    x.learning_rate = lr;
    std::vector<torch::Tensor> weights;
    for (const quant_site& s : plan.sites) {
        stability::tensor_state t;
        t.name = s.name();
        t.role = s.role;
        t.format = format_name_of(s);
        if (s.format && s.format->info().family != ALTGRAD_FAMILY_CODEBOOK)
            t.mantissa_bits = static_cast<int>(s.format->info().mantissa_bits);
        t.overflow_rate = s.overflow_rate();
        t.underflow_rate = s.underflow_rate();
        t.bit_stall_rate = s.bit_stall_rate;
        x.tensors.push_back(t);
        if (s.role == ALTGRAD_TENSOR_WEIGHT && s.format) weights.push_back(params.at(parameter_of(s)).detach().abs().flatten());
    }
    if (!weights.empty()) x.median_abs_weight = torch::cat(weights).median().item<double>();
    x.nonfinite_gradients = nonfinite_gradients(params);
    x.trend.assign(h.trend.begin(), h.trend.end());
    x.diagnostics.assign(h.diagnostics.begin(), h.diagnostics.end());
    x.events = h.events;
    return x;
}

void write_summary(const fs::path& run_dir, const config::run_config& c, const run_summary& s,
                   const std::string& status, const stability::verdict& v, const run_history& h) {
    std::ostringstream o;
    o << "{\"name\": " << json::quote(c.name) << ", \"status\": " << json::quote(status)
      << ", \"failure_mode\": " << json::quote(stability::failure_mode_name(v.mode)) << ", \"failure_step\": "
      << (v.mode == stability::failure_mode::none ? "null" : std::to_string(v.evidence_step))
      << ", \"failure_evidence\": " << json::quote(v.evidence) << ", \"steps_done\": " << s.steps_done
      << ", \"max_steps\": " << s.max_steps << ", \"seed\": " << c.training.seed
      << ", \"final_train_loss\": " << json::number(s.final_train_loss)
      << ", \"final_val_loss\": " << json::number(s.final_val_loss)
      << ", \"best_val_loss\": " << json::number(s.best_val_loss) << ", \"seconds\": " << json::number(s.seconds)
      << ", \"formats\": {\"weight\": " << json::quote(c.quantization.weight_format)
      << ", \"activation\": " << json::quote(c.quantization.activation_format)
      << ", \"gradient\": " << json::quote(c.quantization.gradient_format) << "}, ";
    write_switches_and_interventions(o, h);
    o << "}\n";
    write_file_atomically(run_dir / "summary.json", o.str());
}

bool is_diagnostic_step(int64_t steps_done, const config::run_config& c) {
    return steps_done % c.quantization.diagnostic_interval == 0 || steps_done == c.training.max_steps;
}

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
    }
    const config::training_config& tc = c.training;
    const int threads = tc.threads > 0 ? static_cast<int>(tc.threads)
                                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(threads);

    // ---- data, plugins, model, optimizer (all checked before the run directory is made)
    data::data_options dopt;
    dopt.path = c.data.path;
    dopt.format = c.data.format;
    dopt.val_fraction = c.data.val_fraction;
    dopt.vocab_size = c.data.vocab_size;
    const data::dataset data = data::load_dataset(dopt, c.source.string() + ": data.path");
    data::check_block_size(data, c.model.block_size, c.model.vocab_size, c.source.string() + ": model");
    registry plugins(req.plugins);
    format_library formats(plugins, c.source.string() + ": quantization");
    stability::intervention_set interventions(c, plugins);
    stability::diagnostic_set diagnostics(c, plugins);
    const std::shared_ptr<const format_handle> fp32 = diagnostics.empty() ? nullptr : formats.fp32();

    torch::manual_seed(static_cast<uint64_t>(tc.seed));
    stability::failure_detector detector(c.failure, !interventions.empty(), tc.max_steps);
    trainer_state t;
    t.detector = &detector;
    t.interventions = &interventions;
    t.plan.seed = static_cast<uint64_t>(tc.seed);
    gpt_config g;
    g.vocab_size = c.model.vocab_size > 0 ? c.model.vocab_size : data.vocab_size();
    g.block_size = c.model.block_size;
    g.n_layer = c.model.n_layer;
    g.n_head = c.model.n_head;
    g.n_embd = c.model.n_embd;
    g.dropout = c.model.dropout;
    g.bias = c.model.bias;
    g.swiglu = c.model.activation == config::activation_function::swiglu;
    t.model = GPT(g, t.plan);
    assign_formats(t.plan, c, formats);
    const torch::Device device = training_device(c, t.plan);
    t.device = device;
    t.model->to(device);  // before the optimizer is made: it holds the parameters

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
    const std::vector<torch::Tensor> parameters = t.model->parameters();
    const weight_lookup weight_of = [&](const quant_site& s) { return params.at(parameter_of(s)); };

    if (!resuming) {
        fs::create_directories(run_dir / "checkpoints");
        fs::create_directories(run_dir / "reports");
        write_file_atomically(run_dir / "config.toml", config::to_toml(c));
    }
    int64_t step = 0;
    if (resuming) {
        const auto ckpt = latest_checkpoint(run_dir);
        if (!ckpt) throw error("--resume " + run_dir.string() + ": no complete checkpoint in checkpoints/");
        step = load_checkpoint(ckpt->second, t, formats);
        interventions.load_states(ckpt->second, log);
        truncate_metrics(run_dir / "metrics.jsonl", step);
        fs::remove(run_dir / "summary.json");
        log << "resumed " << run_dir.string() << " at step " << step << "\n";
    } else {
        t.stall.advance(t.plan, weight_of);  // the first bit-stall measurement compares against the initial weights
    }
    metrics_log metrics(run_dir / "metrics.jsonl", resuming);

    int64_t parameter_count = 0;
    for (const auto& p : params) parameter_count += p.second.numel();
    log << "run " << c.name << ": " << parameter_count << " parameters, " << data.description() << "\n"
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
        const double val = evaluate(t, data, c, device);
        metrics.write("{\"step\": " + std::to_string(at_step) + ", \"val_loss\": " + json::number(val) + "}");
        summary.final_val_loss = val;
        if (val < summary.best_val_loss) summary.best_val_loss = val;
        if (!req.live_progress) log << "step " << at_step << ": val loss " << val << std::endl;
        return val;
    };
    stability::verdict outcome;  // mode none: finished
    // Bit stall was measured at the end of the previous step: derived from the
    // step, so a checkpoint needs no copy of it.
    bool stall_fresh = step > 0 && is_diagnostic_step(step, c);
    run_history& history = t.history;  // saved in checkpoints
    double lr = learning_rate_at(tc, step);
    const auto loop_start = std::chrono::steady_clock::now();
    const int64_t first_step = step;
    try {
        if (step == 0) run_eval(0);
        while (step < tc.max_steps) {
            const auto step_start = std::chrono::steady_clock::now();
            lr = learning_rate_at(tc, step);
            for (auto& group : t.optimizer->param_groups())
                static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);

            data::fill_batch(data, data::split::train, static_cast<uint64_t>(tc.seed), static_cast<uint64_t>(step), B,
                             T, xb.data(), yb.data());
            t.plan.step = static_cast<uint64_t>(step);
            t.plan.capture = !diagnostics.empty() && is_diagnostic_step(step + 1, c);
            const torch::Tensor x = torch::from_blob(xb.data(), {B, T}, long_opts).to(device);
            const torch::Tensor y = torch::from_blob(yb.data(), {B, T}, long_opts).to(device);

            // ---- forward and backward: quantizes weights, activations, then output gradients
            t.optimizer->zero_grad();
            const torch::Tensor loss = t.model->forward(x, y).second;
            loss.backward();
            const double loss_value = loss.item<double>();
            const double grad_norm = torch::nn::utils::clip_grad_norm_(parameters, INFINITY);  // measures only
            const bool finite = std::isfinite(loss_value) && std::isfinite(grad_norm);
            t.nonfinite_run = finite ? 0 : t.nonfinite_run + 1;
            const int64_t done = step + 1;  // metrics and events count steps done

            // ---- interventions: every plugin sees the step and may clip, skip or switch
            step_actions todo;
            if (!interventions.empty()) {
                const observation seen = observe_step(static_cast<uint64_t>(step), loss_value, grad_norm, lr,
                                                      t.nonfinite_run, t.plan, stall_fresh);
                for (stability::plugin_action& a : interventions.observe(seen)) {
                    ++history.interventions[a.plugin][action_kind_name(a.what.kind)];
                    if (a.what.kind == ALTGRAD_ACTION_CLIP_GRAD_NORM) {
                        todo.clip = std::min(todo.clip, a.what.value);
                        metrics.write(event_line(done, "clip_grad_norm", a.plugin, a.what.reason,
                                                 ", \"value\": " + json::number(a.what.value)));
                    } else if (a.what.kind == ALTGRAD_ACTION_SKIP_STEP) {
                        todo.skip = true;
                        metrics.write(event_line(done, "skip_step", a.plugin, a.what.reason));
                        history.events.push_back("step " + std::to_string(done) + ": " + a.plugin + " skipped the update: " + a.what.reason);
                    } else {
                        todo.switches.push_back(std::move(a));
                    }
                }
            }
            if (!finite) {
                metrics.write(event_line(done, "nonfinite", "host",
                                         "loss " + json::number(loss_value) + ", gradient norm " + json::number(grad_norm) +
                                             ": update skipped"));
            }

            // ---- the update
            if (finite && !todo.skip) {
                const double max_norm = std::min(tc.grad_clip > 0 ? tc.grad_clip : INFINITY, todo.clip);
                clip_gradients(parameters, max_norm, grad_norm);
                t.optimizer->step();
                if (!c.quantization.shadow_weights) {
                    // No master copy: the weights live in their format, and an update
                    // too small to move a weight to another code is lost (bit stall).
                    torch::NoGradGuard no_grad;
                    for (const quant_site& s : t.plan.sites)
                        if (s.role == ALTGRAD_TENSOR_WEIGHT)
                            store_in_format(params.at(parameter_of(s)), s, t.plan, t.plan.sites.size());
                }
            }
            step = done;

            // ---- measurements: every step the cheap ones, every diagnostic interval the rest
            const worst_rates rates = worst_quantization_rates(t.plan);
            const double sparsity = grad_sparsity(parameters, c.failure.near_zero);
            stability::step_evidence evidence;
            evidence.step = step;
            evidence.loss = loss_value;
            evidence.finite = finite;
            evidence.grad_sparsity = sparsity;
            evidence.overflow_rate = rates.overflow;
            stall_fresh = is_diagnostic_step(step, c);
            std::vector<diagnostic_record> records;
            if (std::isfinite(loss_value)) t.window_loss_sum += loss_value, ++t.window_loss_n;
            if (stall_fresh) {
                evidence.bit_stall_rate = t.stall.measure(t.plan, weight_of);
                evidence.window_loss = t.window_loss_n ? t.window_loss_sum / t.window_loss_n : NAN;
                evidence.updates_lost = !c.quantization.shadow_weights;
                t.window_loss_sum = 0, t.window_loss_n = 0;
                if (!diagnostics.empty()) records = run_diagnostics(diagnostics, t.plan, weight_of, t.stall, *fp32, step);
                release_captures(t.plan);
                t.stall.advance(t.plan, weight_of);
            }

            const double step_seconds = seconds_since(step_start);
            const double tokens_per_s = static_cast<double>(B * T) / std::max(step_seconds, 1e-9);
            summary.final_train_loss = loss_value;
            metrics.write("{\"step\": " + std::to_string(step) + ", \"loss\": " + json::number(loss_value) +
                          ", \"lr\": " + json::number(lr) + ", \"grad_norm\": " + json::number(grad_norm) +
                          ", \"tokens_per_s\": " + json::number(tokens_per_s) + ", \"grad_sparsity\": " +
                          json::number(sparsity) + ", \"overflow_rate\": " + json::number(rates.overflow) +
                          ", \"underflow_rate\": " + json::number(rates.underflow) + "}");
            if (stall_fresh) {
                for (const quant_site& s : t.plan.sites)
                    if (s.format) metrics.write(quant_stats_line(step, s));
                for (const diagnostic_record& r : records) metrics.write(diagnostic_line(step, r));
                remember_diagnostics(history, step, records);
            }
            history.trend.push_back({step, loss_value, grad_norm, sparsity, rates.overflow, evidence.bit_stall_rate});
            if (history.trend.size() > 10) history.trend.pop_front();

            // ---- format switches asked for above take effect from the next step
            for (const stability::plugin_action& a : todo.switches) {
                for (const format_switch& sw : switch_formats(t.plan, a.what.tensor, a.what.format, formats)) {
                    metrics.write(event_line(step, "switch_format", a.plugin, a.what.reason,
                                             ", \"tensor\": " + json::quote(sw.tensor) + ", \"from\": " +
                                                 json::quote(sw.from) + ", \"to\": " + json::quote(sw.to)));
                    history.switches.push_back({step, a.plugin, sw});
                    history.events.push_back("step " + std::to_string(step) + ": " + a.plugin + " switched " + sw.tensor +
                                             " from " + sw.from + " to " + sw.to + ": " + a.what.reason);
                    if (!req.live_progress)
                        log << "step " << step << ": " << a.plugin << " switched " << sw.tensor << " " << sw.from
                            << " -> " << sw.to << std::endl;
                }
            }

            const double elapsed = seconds_since(loop_start);
            const double eta = elapsed / static_cast<double>(step - first_step) * static_cast<double>(tc.max_steps - step);
            if (req.live_progress) {
                char line[160];
                std::snprintf(line, sizeof line, "\rstep %lld/%lld | loss %.4f | %.0f tok/s | ETA %s   ",
                              static_cast<long long>(step), static_cast<long long>(tc.max_steps), loss_value,
                              tokens_per_s, duration_text(eta).c_str());
                log << line << std::flush;
            } else if (step % tc.log_interval == 0 || step == tc.max_steps) {
                log << "step " << step << "/" << tc.max_steps << " loss " << loss_value << " lr " << lr << " "
                    << static_cast<int64_t>(tokens_per_s) << " tok/s ETA " << duration_text(eta) << std::endl;
            }

            // ---- failure detection: a collapse leaves a checkpoint, an event and a report, and stops the run
            if (const std::optional<stability::verdict> v = detector.observe(evidence)) {
                outcome = *v;
                summary.stop_reason = std::string(stability::failure_mode_name(v->mode)) + " at step " +
                                      std::to_string(v->evidence_step) + ": " + v->evidence;
                metrics.write(event_line(step, "collapse", "host", v->evidence,
                                         ", \"mode\": " + json::quote(stability::failure_mode_name(v->mode)) +
                                             ", \"evidence_step\": " + std::to_string(v->evidence_step)));
                save_checkpoint(run_dir, step, t, c.output.keep_checkpoints);
                const fs::path ckpt = fs::relative(checkpoint_dir(run_dir, step), run_dir);
                write_file_atomically(run_dir / "reports" / "failure.md",
                                      stability::failure_report_markdown(
                                          failure_context_of(c, *v, ckpt, lr, t.plan, params, history)));
                if (req.live_progress) log << "\n";
                log << "collapsed: " << summary.stop_reason << "\nfailure report " << (run_dir / "reports" / "failure.md").string()
                    << std::endl;
                break;
            }
            if (step % tc.eval_interval == 0 || step == tc.max_steps) run_eval(step);
            if (step % c.output.checkpoint_interval == 0 || step == tc.max_steps)
                save_checkpoint(run_dir, step, t, c.output.keep_checkpoints);
        }
    } catch (const error& e) {
        // A plugin or I/O failure mid-run: record how far it got, then report the error as usual.
        summary.steps_done = step;
        summary.seconds = seconds_since(start_time);
        write_summary(run_dir, c, summary, "error", detector.stopped_early(step, e.what()), history);
        throw;
    }
    if (req.live_progress && outcome.mode == stability::failure_mode::none) log << "\n";
    summary.steps_done = step;
    summary.seconds = seconds_since(start_time);
    write_summary(run_dir, c, summary, outcome.mode == stability::failure_mode::none ? "finished" : "collapsed", outcome,
                  history);
    log << "done: " << summary.stop_reason << ", " << summary.steps_done << "/" << summary.max_steps
        << " steps, final train loss " << summary.final_train_loss << ", final val loss " << summary.final_val_loss
        << " (best " << summary.best_val_loss << "), " << duration_text(summary.seconds) << "\n"
        << "run directory " << run_dir.string() << " (config.toml, metrics.jsonl, summary.json, checkpoints/, reports/)\n"
        << "corpus unigram entropy " << data.unigram_entropy_nats() << " nats/char\n";
    return summary;
}

}  // namespace altgrad::host::train
