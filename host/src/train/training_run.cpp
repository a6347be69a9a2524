#include "train/training_run.hpp"

#include <ATen/Parallel.h>

#include <cmath>
#include <cstdio>
#include <new>
#include <optional>
#include <set>
#include <thread>

#include <sys/resource.h>

#include "config/writer.hpp"
#include "data/ngram.hpp"
#include "plugins/call_record.hpp"
#include "quant/seeds.hpp"
#include "run/supervise.hpp"
#include "stability/failure_report.hpp"
#include "util/cpu_kernels.hpp"
#include "util/error.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::train {

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// User + system CPU time of this process so far, all threads (NaN if getrusage fails).
double process_cpu_seconds() {
    rusage u{};
    if (::getrusage(RUSAGE_SELF, &u) != 0) return NAN;
    const auto sec = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
    };
    return sec(u.ru_utime) + sec(u.ru_stime);
}

std::string duration_text(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    const int64_t s = static_cast<int64_t>(seconds + 0.5);
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                      static_cast<long long>(s / 60 % 60));
    else if (s >= 60)
        std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                      static_cast<long long>(s % 60));
    else std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
    return buf;
}

// Any failure as one line: LibTorch's errors carry a backtrace, and running
// out of memory is named by the config keys that size the model and batch.
error as_host_error(const std::exception& e, const config::run_config& c) {
    if (const auto* h = dynamic_cast<const error*>(&e)) return *h;
    const std::string what = first_line(e.what());
    const bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                        what.find("alloc") != std::string::npos ||
                        what.find("out of memory") != std::string::npos;
    if (memory)
        return error(c.source.string() + ": out of memory (" + what +
                     "): the model and batch are sized by "
                     "model.n_layer = " +
                     std::to_string(c.model.n_layer) + ", model.n_embd = " + std::to_string(c.model.n_embd) +
                     ", model.block_size = " + std::to_string(c.model.block_size) +
                     ", training.batch_size = " + std::to_string(c.training.batch_size) +
                     ": make them smaller");
    return error(c.source.string() + ": training failed: " + what);
}

// The config of a new run (CONFIG.toml), or of a resumed one (its config.toml),
// with every format named by its plugin's own name: an alias means exactly
// what the name means ("float32" is "fp32", float32 itself), and the run
// directory's config.toml, summary and metrics say the project's names. A
// name that is no format plugin is an error naming the file and key.
config::run_config load_run_config(const run_request& req) {
    if (!req.resume.empty() && !fs::exists(run::config_file(req.resume)))
        throw error("--resume " + req.resume.string() + ": no config.toml (not a run directory)");
    config::run_config c =
        config::load_config(req.resume.empty() ? req.config : run::config_file(req.resume), req.overrides);
    registry names(req.plugins);
    config::rename_formats(c.quantization, [&](const std::string& key, const std::string& name) {
        if (name == "fp32" || name == "pow2") return name;
        try {
            return names.name_of(name, ALTGRAD_KIND_FORMAT);
        } catch (const error& e) {
            throw error(c.source.string() + ": key '" + key + "': " + e.what());
        }
    });
    return c;
}

// --out, or <output.dir>/<name> (then -2, -3, ... when taken).
fs::path new_run_dir(const run_request& req, const config::run_config& c) {
    if (!req.out.empty()) {
        if (fs::exists(req.out) && !fs::is_empty(req.out))
            throw error("--out " + req.out.string() +
                        ": exists and is not empty (use --resume to continue a run)");
        return req.out;
    }
    fs::path dir = fs::path(c.output.dir) / c.name;
    for (int k = 2; fs::exists(dir); ++k) dir = fs::path(c.output.dir) / (c.name + "-" + std::to_string(k));
    return dir;
}

data::dataset load_run_data(const config::run_config& c) {
    data::data_options o;
    o.path = c.data.path;
    o.format = c.data.format;
    o.val_fraction = c.data.val_fraction;
    o.vocab_size = c.data.vocab_size;
    data::dataset d = data::load_dataset(o, c.source.string() + ": data.path");
    data::check_block_size(d, c.model.block_size, c.model.vocab_size, c.source.string() + ": model");
    return d;
}

// Clip the global gradient norm (known: `norm`) to `max_norm`, as clip_grad_norm_ does.
void clip_gradients(const std::vector<torch::Tensor>& params, double max_norm, double norm) {
    if (!(norm > max_norm)) return;
    torch::NoGradGuard no_grad;
    const double factor = max_norm / (norm + 1e-6);
    for (const torch::Tensor& p : params)
        if (p.grad().defined()) p.grad().mul_(factor);
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
    std::vector<quant::scaling_state> saved;
};

// The tensors the interventions see, the metrics write and the failure
// report lists: every quantized one (`all`: every site), at its last use.
std::vector<run::tensor_line> tensor_records(const quant_plan& plan, int64_t step, bool with_bit_stall,
                                             bool all = false) {
    std::vector<run::tensor_line> out;
    for (const quant_site& s : plan.sites)
        if (s.format || all) out.push_back(record_of(s, step, with_bit_stall));
    return out;
}

// Each format's largest finite value, by name (what the interventions see).
std::map<std::string, double> format_maxima(const quant_plan& plan) {
    std::map<std::string, double> out;
    for (const quant_site& s : plan.sites)
        if (s.format) out[s.format->name()] = s.format->info().max_finite;
    return out;
}

// The last three diagnostic snapshots, each value summarised over its
// tensors as the catalog's mean (the all-tensor value where written).
void remember_diagnostics(run::run_history& h, int64_t step, const std::vector<diagnostic_record>& records) {
    std::map<std::string, std::vector<run::tensor_value>> by_name;  // diagnostic.value -> its tensors' values
    for (const diagnostic_record& r : records)
        for (const auto& [name, value] : r.values)
            by_name[r.diagnostic + "." + name].push_back({r.tensor == "*", value});
    run::metric mean;
    mean.summary = run::tensor_summary::mean;
    for (const auto& [name, values] : by_name)
        if (const double v = run::summarise(mean, values); !std::isnan(v))
            h.diagnostics.push_back({step, name, v});
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
                                              const run::run_history& h, int64_t step) {
    stability::failure_context x;
    x.config = c;
    x.collapse = v;
    x.checkpoint = checkpoint.string();
    x.learning_rate = lr;
    x.tensors = tensor_records(plan, step, /*with_bit_stall=*/true, /*all=*/true);
    std::vector<torch::Tensor> weights;
    for (const quant_site& s : plan.sites) {
        if (s.format && s.format->info().family != ALTGRAD_FAMILY_CODEBOOK)
            x.mantissa_bits[s.format->name()] = static_cast<int>(s.format->info().mantissa_bits);
        if (s.role == ALTGRAD_TENSOR_WEIGHT && s.format && !s.second_use())
            weights.push_back(params.at(parameter_of(s)).detach().abs().flatten());
    }
    if (!weights.empty()) x.median_abs_weight = torch::cat(weights).median().item<double>();
    x.nonfinite_gradients = nonfinite_gradients(params);
    x.trend.assign(h.trend.begin(), h.trend.end());
    x.diagnostics.assign(h.diagnostics.begin(), h.diagnostics.end());
    x.events = h.events;
    return x;
}

}  // namespace

// A format an intervention switches to later is checked when it is first
// used. GPU local_rank: a rank's own on a machine with a GPU per rank, as
// NCCL needs.
torch::Device training_device(const config::run_config& c, const quant_plan& plan, int local_rank) {
    if (c.training.device != config::compute_device::cuda) return torch::kCPU;
    const std::string key = c.source.string() + ": key 'training.device': \"cuda\"";
    if (!torch::cuda::is_available())
        throw error(key +
                    " needs a LibTorch built with CUDA and a visible GPU, and this process has no usable one "
                    "(torch::cuda::is_available() is false; use \"cpu\")");
    for (const quant_site& s : plan.sites)
        if (s.format && !s.format->accepts(ALTGRAD_MEMORY_CUDA))
            throw error(
                key + ": format plugin '" + s.format->name() + "' (" + s.name() +
                ") has no CUDA implementation (build the plugins with ALTGRAD_CUDA=ON, or use \"cpu\")");
    for (const product_accumulators& layer : plan.accumulators)
        for (const product_accumulator& a : layer)
            if (a.modelled())
                throw error(key + ": an accumulator (quantization.forward, ...) is modelled on the CPU only");
    for (const product_transforms& layer : plan.transforms)
        for (const product_transform& t : layer)
            if (t.handle && !t.handle->accepts(ALTGRAD_MEMORY_CUDA))
                throw error(key + ": transform plugin '" + t.handle->name() + "' (" + t.key +
                            ") has no CUDA implementation (build the plugins with ALTGRAD_CUDA=ON, or use "
                            "\"cpu\")");
    const int gpus = static_cast<int>(torch::cuda::device_count());
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
}

// ------------------------------------------------------------------ set up

training_run::training_run(const run_request& req, std::ostream& log)
    : place_(place_from_environment()),
      log_(place_.rank == 0 ? log : null_log_),
      live_progress_(req.live_progress),
      start_time_(std::chrono::steady_clock::now()),
      c_(load_run_config(req)),
      ranks_(place_, c_),
      run_dir_(req.resume.empty()
                   ? fs::path(ranks_.from_root("run_dir", ranks_.root() ? new_run_dir(req, c_).string() : ""))
                   : req.resume),
      resuming_(!req.resume.empty()),
      fallback_(req.fallback),
      data_(load_run_data(c_)),
      plugins_(req.plugins),
      formats_(plugins_, c_.source.string() + ": quantization", c_.quantization.params),
      interventions_(c_, plugins_),
      diagnostics_(c_, plugins_),
      fp32_(diagnostics_.empty() ? nullptr : formats_.fp32()),
      detector_(c_.failure, !interventions_.empty(), !c_.quantization.shadow_weights, c_.training.max_steps) {
    ranks_.check_same("the resolved config", std::hash<std::string>{}(config::to_toml(c_)));
    step_metrics_ = host_step_metrics();
    try {
        diagnostics_.describe_headlines(catalog_);
    } catch (const error& e) {  // two diagnostics declaring one series
        throw error(c_.source.string() + ": key 'diagnostics.plugins': " + e.what());
    }
    for (const added_step_metric& m : req.added_metrics) {
        catalog_.add(m.description);
        step_metrics_.push_back(
            {m.description.name, [f = m.compute](const step_inputs& in) { return f(in.so_far); }});
    }
    // Deliberately: LibTorch starts with one intra-op thread on small machines.
    const int cpu_threads = cpu_threads_of(c_.training);
    const int blas_threads = set_cpu_threads(cpu_threads);
    plan_.gemm_threads = static_cast<unsigned>(cpu_threads);
    build_model_and_optimizer();
    open_run_directory();
    note_run_dir(run_dir_);  // for a crash summary (run/supervise.hpp)
    for (const std::string& note : c_.notes) log_ << "note: " << note << "\n";
    log_ << "run " << c_.name << ": " << parameter_count() << " parameters, " << data_.description() << "\n"
         << "cpu threads " << cpu_threads << " (BLAS "
         << (blas_threads >= 0 ? std::to_string(blas_threads) : std::string("not OpenBLAS: its own")) << ")\n"
         << "cpu kernels " << cpu_kernels_note() << "\n"
         << "run directory " << run_dir_.string() << std::endl;
    if (place_.distributed())
        log_ << place_.world_size << " ranks (" << place_.launcher << ", rendezvous " << place_.master_addr
             << ":" << place_.master_port << "), each " << c_.training.grad_accum << " micro-batch(es) of "
             << c_.training.batch_size << " rows a step" << std::endl;
}

void training_run::build_model_and_optimizer() {
    const config::training_config& tc = c_.training;
    torch::manual_seed(static_cast<uint64_t>(tc.seed));
    plan_.seed = static_cast<uint64_t>(tc.seed);
    model_ = GPT(gpt_config_of(c_.model, c_.model.vocab_size > 0 ? c_.model.vocab_size : data_.vocab_size()),
                 plan_);
    assign_formats(plan_, c_, formats_);
    device_ = training_device(c_, plan_, place_.local_rank);
    model_->to(device_);  // before the optimizer is made: it holds the parameters

    // AdamW with weight decay on matrices only (nanoGPT's groups).
    std::vector<torch::Tensor> decay, no_decay;
    for (auto& p : model_->named_parameters()) (p.value().dim() >= 2 ? decay : no_decay).push_back(p.value());
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(
        decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(tc.learning_rate)
                                                                .betas({tc.beta1, tc.beta2})
                                                                .weight_decay(tc.weight_decay)));
    groups.emplace_back(
        no_decay,
        std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(tc.learning_rate).betas({tc.beta1, tc.beta2}).weight_decay(0.0)));
    optimizer_ = std::make_unique<torch::optim::AdamW>(std::move(groups));

    std::vector<std::string> names;
    for (auto& p : model_->named_parameters()) {
        params_[p.key()] = p.value();
        parameters_.push_back(p.value());
        names.push_back(p.key());
    }
    communication_ = add_communication_sites(plan_, c_, formats_, names);
    weight_of_ = [this](const quant_site& s) { return params_.at(parameter_of(s)); };
    xb_.resize(static_cast<size_t>(tc.batch_size * c_.model.block_size));
    yb_.resize(xb_.size());
}

// Every rank reads the checkpoint it resumes from; rank 0 alone writes.
void training_run::open_run_directory() {
    const bool writes = ranks_.root();
    if (resuming_) {
        if (writes && !fs::is_regular_file(run::metrics_file(run_dir_)))
            throw error(run::metrics_file(run_dir_).string() +
                        ": missing (a resumed run would lose its history; restore the file or start again)");
        const resumed r = load_latest_checkpoint(run_dir_, checkpointed_parts(), formats_, log_, fallback_);
        step_ = r.step;
        run_id_ = r.run_id;
        seconds_before_ = history_.elapsed_seconds;  // NaN where the checkpoint does not know
        cpu_seconds_before_ = history_.elapsed_cpu_seconds;
        if (writes) {
            run::truncate_metrics(run::metrics_file(run_dir_), step_);
            fs::remove(run::summary_file(run_dir_));
        }
        log_ << "resumed " << run_dir_.string() << " at step " << step_ << "\n";
    } else {
        run_id_ = run_dir_.filename().string();
        if (writes) {
            fs::create_directories(run::checkpoints_dir(run_dir_));
            run::write_file_atomically(run::config_file(run_dir_), config::to_toml(c_));
        }
        stall_.advance(plan_,
                       weight_of_);  // the first bit-stall measurement compares against the initial weights
    }
    if (writes) {
        run::write_catalog(run_dir_, catalog_);
        metrics_.emplace(run::metrics_file(run_dir_), run_id_, resuming_, catalog_);
    }
    // Bit stall was measured at the end of the previous step: derived from the step.
    stall_fresh_ = step_ > 0 && is_diagnostic_step(step_);
    first_step_ = step_;
}

checkpointed training_run::checkpointed_parts() {
    return {model_, *optimizer_, plan_, stall_, detector_, interventions_, history_, device_};
}

// ------------------------------------------------------------------ the loop

run_result training_run::run() {
    const int64_t max_steps = c_.training.max_steps;
    loop_start_ = std::chrono::steady_clock::now();
    try {
        note_steps_done(step_);
        if (step_ == 0) evaluate();
        while (step_ < max_steps) {
            note_steps_done(step_);
            const auto step_start = std::chrono::steady_clock::now();
            const step_result r = forward_backward();  // quantizes weights, activations, output gradients
            const step_actions todo = ask_interventions(r);  // clip, skip, switch formats
            update(r, todo);
            ++step_;
            const run::train_line step = measure(r, seconds_since(step_start));
            apply_switches(todo);  // from the next step on
            report_progress(step);
            if (const std::optional<stability::verdict> v = detector_.observe(step)) {
                collapse(*v);
                return finish("collapsed", *v);
            }
            if (step_ % c_.training.eval_interval == 0 || step_ == max_steps) evaluate();
            // SIGINT/SIGTERM (run/supervise.hpp): stop after this step, resumable from its checkpoint.
            const bool stopping = ranks_.any(run::stop_requested() != 0) && step_ < max_steps;
            if (step_ % c_.output.checkpoint_interval == 0 || step_ == max_steps || stopping) checkpoint();
            if (stopping) {
                if (live_progress_) log_ << "\n";
                stop_reason_ = "interrupted";
                return finish("interrupted", stability::verdict{});
            }
        }
    } catch (const std::exception& e) {
        // A plugin, LibTorch or I/O failure mid-run (a full disk, no memory):
        // one line, and a summary of how far it got when it can be written.
        const error failure = as_host_error(e, c_);
        try {
            finish("error", detector_.stopped_early(step_, failure.what()));
        } catch (const std::exception& also) {
            log_ << "(summary.json not written either: " << first_line(also.what()) << ")\n";
        }
        throw failure;
    }
    if (live_progress_) log_ << "\n";
    return finish("finished", stability::verdict{});
}

// ------------------------------------------------------------------ phases

training_run::step_result training_run::forward_backward() {
    lr_ = learning_rate_at(step_);
    for (auto& group : optimizer_->param_groups())
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr_);
    plan_.step = static_cast<uint64_t>(step_);
    const bool capture = !diagnostics_.empty() && is_diagnostic_step(step_ + 1);

    // This rank's micro-batches of the step's M: rank r runs r*A .. r*A + A - 1.
    const int64_t A = c_.training.grad_accum, M = A * ranks_.size();
    optimizer_->zero_grad();
    step_totals totals(plan_);
    double loss = 0;
    for (int64_t m = ranks_.rank() * A; m < (ranks_.rank() + 1) * A; ++m)
        loss += micro_batch(m, M, capture, totals);
    for (size_t i = 0; i < sent_.size(); ++i)
        if (sent_[i].defined()) parameters_[i].mutable_grad() = std::move(sent_[i]);
    sent_.clear();
    ranks_.sum_gradients(parameters_);  // in rank order: as one process's micro-batches
    if (ranks_.size() > 1) totals.fold_ranks(ranks_.gather(totals.packed()));
    totals.finish(plan_);
    step_result r;
    r.loss = ranks_.sum(loss);
    r.grad_norm = torch::nn::utils::clip_grad_norm_(parameters_, INFINITY);  // measures only
    r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
    return r;
}

// Micro-batch m of the step's M: rows m*b .. m*b+b-1 of its batch, forward
// and backward at loss / M, so the parameters' gradients sum to the whole
// batch's mean. Returns its loss / M (the step's loss is their sum, in order).
double training_run::micro_batch(int64_t m, int64_t M, bool capture, step_totals& totals) {
    const int64_t B = c_.training.batch_size, T = c_.model.block_size;
    totals.begin_micro_batch(plan_);
    plan_.micro_batch = static_cast<uint64_t>(m);
    plan_.capture = capture && m == 0;  // diagnostics see micro-batch 0's tensors
    data::fill_batch(data_, data::split::train, static_cast<uint64_t>(c_.training.seed),
                     static_cast<uint64_t>(step_), static_cast<uint64_t>(m * B), B, T, xb_.data(),
                     yb_.data());
    if (M > 1 && c_.model.dropout > 0)  // each micro-batch's masks from its own key, wherever it runs
        torch::manual_seed(quant::seed_of(static_cast<uint64_t>(c_.training.seed),
                                          quant::micro_batch_key(plan_.step, plan_.micro_batch),
                                          quant::dropout_stream));
    const auto long_opts = torch::TensorOptions().dtype(torch::kLong);
    const torch::Tensor x = torch::from_blob(xb_.data(), {B, T}, long_opts).to(device_);
    const torch::Tensor y = torch::from_blob(yb_.data(), {B, T}, long_opts).to(device_);
    const torch::Tensor loss = model_->forward(x, y).second;
    (M > 1 ? loss / static_cast<double>(M) : loss).backward();
    if (!communication_.empty()) quantize_gradients();
    totals.add_micro_batch(plan_);
    return loss.item<double>() / static_cast<double>(M);
}

// [quantization.communication]: this micro-batch's gradients as a rank would
// send them, each quantized by its parameter's site and added in order into
// the step's sum (sent_), which forward_backward hands to .grad; .grad is
// cleared for the next micro-batch's backward. Keyed by the micro-batch, as
// every gradient is, so one process with grad_accum = N draws what N ranks do.
void training_run::quantize_gradients() {
    torch::NoGradGuard no_grad;
    sent_.resize(parameters_.size());  // empty at a step's start (forward_backward hands it over)
    const uint64_t key = quant::micro_batch_key(plan_.step, plan_.micro_batch);
    for (size_t i = 0; i < parameters_.size(); ++i) {
        torch::Tensor& g = parameters_[i].mutable_grad();
        if (!g.defined()) continue;
        const uint64_t seed = quant::seed_of(plan_.seed, key, quant::communication_stream(i));
        const torch::Tensor q = fake_quantize(g, plan_.sites[communication_[i]], plan_, seed);
        // q may be g itself (a site switched to float32): .grad lets go of it below.
        if (!sent_[i].defined()) sent_[i] = q;
        else sent_[i].add_(q);
        g = torch::Tensor();
    }
}

training_run::step_actions training_run::ask_interventions(const step_result& r) {
    step_actions todo;
    const int64_t done = step_ + 1;  // metrics and events count steps done
    // The detector has seen every step before this one.
    const uint32_t nonfinite_run = r.finite ? 0 : detector_.consecutive_nonfinite() + 1;
    if (!interventions_.empty()) {
        observation seen;
        seen.step = static_cast<uint64_t>(step_);  // 0-based, as the ABI counts
        seen.loss = r.loss;
        seen.grad_norm = r.grad_norm;
        seen.learning_rate = lr_;
        seen.consecutive_nonfinite_steps = nonfinite_run;
        seen.max_steps = static_cast<uint64_t>(c_.training.max_steps);
        const std::vector<run::tensor_line> tensors = tensor_records(plan_, step_, stall_fresh_);
        for (stability::plugin_action& a : interventions_.observe(seen, tensors, format_maxima(plan_))) {
            ++history_.interventions[a.plugin][action_kind_name(a.what.kind)];
            if (a.what.kind == ALTGRAD_ACTION_CLIP_GRAD_NORM) {
                todo.clip = std::min(todo.clip, a.what.value);
                run::event_line e{done, "clip_grad_norm", a.plugin, a.what.reason};
                e.value = a.what.value;
                event(std::move(e));
            } else if (a.what.kind == ALTGRAD_ACTION_SKIP_STEP) {
                todo.skip = true;
                event({done, "skip_step", a.plugin, a.what.reason});
                history_.events.push_back("step " + std::to_string(done) + ": " + a.plugin +
                                          " skipped the update: " + a.what.reason);
            } else {
                todo.switches.push_back(std::move(a));
            }
        }
    }
    if (!r.finite)
        event({done, "nonfinite", "host",
               "loss " + shortest_decimal(r.loss) + ", gradient norm " + shortest_decimal(r.grad_norm) +
                   ": update skipped"});
    return todo;
}

void training_run::update(const step_result& r, const step_actions& todo) {
    if (!r.finite || todo.skip) return;
    const double max_norm = std::min(c_.training.grad_clip > 0 ? c_.training.grad_clip : INFINITY, todo.clip);
    clip_gradients(parameters_, max_norm, r.grad_norm);
    optimizer_->step();
    if (!c_.quantization.shadow_weights) {
        // No master copy: the weights live in their format, and an update
        // too small to move a weight to another code is lost (bit stall).
        torch::NoGradGuard no_grad;
        for (const quant_site& s : plan_.sites)
            if (s.role == ALTGRAD_TENSOR_WEIGHT &&
                !s.second_use())  // a weight lives in its first use's format
                store_in_format(params_.at(parameter_of(s)), s, plan_, plan_.first_use_sites());
    }
}

run::train_line training_run::measure(const step_result& r, double step_seconds) {
    // Every step the step metrics, every diagnostic interval the rest.
    const double tokens = static_cast<double>(c_.training.batch_size * c_.training.grad_accum *
                                              ranks_.size() * c_.model.block_size);
    const step_inputs in{r.loss, r.grad_norm, lr_, step_seconds, tokens, c_, plan_, parameters_, {}};
    run::train_line step = compute_step_metrics(step_, step_metrics_, in);
    write_metrics(step);
    stall_fresh_ = is_diagnostic_step(step_);
    std::vector<diagnostic_record> records;
    if (stall_fresh_) {
        step.values.set("bit_stall", stall_.measure(plan_, weight_of_));  // the detector's, not written here
        if (!diagnostics_.empty() && ranks_.root())  // rank 0 holds micro-batch 0's captures
            records = run_diagnostics(diagnostics_, plan_, weight_of_, stall_, *fp32_, step_);
        release_captures(plan_);
        stall_.advance(plan_, weight_of_);
    }
    // Each quantized tensor's amax, scale and counts are its last use's, known
    // every step: written at every log step too (the report's per-layer
    // curves), bit stall only where it was measured.
    const bool log_step = step_ % c_.training.log_interval == 0 || step_ == c_.training.max_steps;
    if (stall_fresh_ || log_step)
        for (run::tensor_line& t : tensor_records(plan_, step_, stall_fresh_)) write_metrics(std::move(t));
    if (stall_fresh_) {
        for (const diagnostic_record& d : records)
            write_metrics(run::diagnostic_line{step_, d.diagnostic, d.tensor, d.role, d.values});
        remember_diagnostics(history_, step_, records);
    }
    history_.trend.push_back(step);
    if (history_.trend.size() > 10) history_.trend.pop_front();
    return step;
}

void training_run::apply_switches(const step_actions& todo) {
    for (const stability::plugin_action& a : todo.switches) {
        for (run::format_switch sw : switch_formats(plan_, a.what.tensor, a.what.format, formats_)) {
            sw.step = step_;
            sw.plugin = a.plugin;
            run::event_line e{step_, "switch_format", a.plugin, a.what.reason};
            e.tensor = sw.tensor, e.from = sw.from, e.to = sw.to;
            event(std::move(e));
            history_.switches.push_back(sw);
            history_.events.push_back("step " + std::to_string(step_) + ": " + a.plugin + " switched " +
                                      sw.tensor + " from " + sw.from + " to " + sw.to + ": " + a.what.reason);
            if (!live_progress_)
                log_ << "step " << step_ << ": " << a.plugin << " switched " << sw.tensor << " " << sw.from
                     << " -> " << sw.to << std::endl;
        }
    }
}

void training_run::report_progress(const run::train_line& step) {
    const int64_t max_steps = c_.training.max_steps;
    const double eta = seconds_since(loop_start_) / static_cast<double>(step_ - first_step_) *
                       static_cast<double>(max_steps - step_);
    const double loss = step.values.get("loss"), tokens_per_s = step.values.get("tokens_per_s");
    if (live_progress_) {
        char line[160];
        std::snprintf(line, sizeof line, "\rstep %lld/%lld | loss %.4f | %.0f tok/s | ETA %s   ",
                      static_cast<long long>(step_), static_cast<long long>(max_steps), loss, tokens_per_s,
                      duration_text(eta).c_str());
        log_ << line << std::flush;
    } else if (step_ % c_.training.log_interval == 0 || step_ == max_steps) {
        log_ << "step " << step_ << "/" << max_steps << " loss " << loss << " lr " << lr_ << " "
             << static_cast<int64_t>(tokens_per_s) << " tok/s ETA " << duration_text(eta) << std::endl;
    }
}

// A collapse leaves an event, a checkpoint and a failure report.
void training_run::collapse(const stability::verdict& v) {
    stop_reason_ = std::string(stability::failure_mode_name(v.mode)) + " at step " +
                   std::to_string(v.evidence_step) + ": " + v.evidence;
    run::event_line e{step_, "collapse", "host", v.evidence};
    e.mode = stability::failure_mode_name(v.mode);
    e.evidence_step = v.evidence_step;
    event(std::move(e));
    checkpoint();
    const fs::path ckpt = fs::relative(run::checkpoint_dir(run_dir_, step_), run_dir_);
    const fs::path report = run::reports_dir(run_dir_) / "failure.md";
    if (ranks_.root()) {
        fs::create_directories(report.parent_path());  // only a collapsed run has reports/
        run::write_file_atomically(report, stability::failure_report_markdown(failure_context_of(
                                               c_, v, ckpt, lr_, plan_, params_, history_, step_)));
    }
    if (live_progress_) log_ << "\n";
    log_ << "collapsed: " << stop_reason_ << "\nfailure report " << report.string() << std::endl;
}

void training_run::evaluate() {
    frozen_scaling keep(plan_);
    torch::NoGradGuard no_grad;
    model_->eval();
    const int64_t B = c_.training.batch_size, T = c_.model.block_size, A = c_.training.grad_accum;
    const int64_t batches = c_.training.eval_batches, M = A * ranks_.size();
    std::vector<int64_t> x(static_cast<size_t>(B * T)), y(x.size());
    // Evaluation batches are the same every time: steps 0..eval_batches-1 of
    // the split, each the whole batch of a step (M micro-batches of B rows,
    // this rank's A of them here), so the validation set does not depend on
    // how a step's batch is split.
    std::vector<double> losses;  // batch-major, then this rank's micro-batches
    for (int64_t i = 0; i < batches; ++i) {
        for (int64_t m = ranks_.rank() * A; m < (ranks_.rank() + 1) * A; ++m) {
            data::fill_batch(data_, data::split::val, static_cast<uint64_t>(c_.training.seed),
                             static_cast<uint64_t>(i), static_cast<uint64_t>(m * B), B, T, x.data(),
                             y.data());
            const auto opts = torch::TensorOptions().dtype(torch::kLong);
            const torch::Tensor xt = torch::from_blob(x.data(), {B, T}, opts).to(device_);
            const torch::Tensor yt = torch::from_blob(y.data(), {B, T}, opts).to(device_);
            losses.push_back(model_->forward(xt, yt).second.item<double>());
        }
    }
    // Summed in the order of one process's loop: batch by batch, micro-batch by micro-batch.
    const std::vector<std::vector<double>> by_rank = ranks_.gather(losses);
    double total = 0;
    for (int64_t i = 0; i < batches; ++i)
        for (const std::vector<double>& rank : by_rank)
            for (int64_t j = 0; j < A; ++j) total += rank[static_cast<size_t>(i * A + j)];
    model_->train();
    const double val = total / static_cast<double>(c_.training.eval_batches * M);
    run::val_line line{step_, {}};
    line.values.set("val_loss", val);
    write_metrics(line);
    history_.last_val_loss = val;
    if (!std::isnan(val) && !(val >= history_.best_val_loss))
        history_.best_val_loss = val;  // NaN best: none yet
    // On a terminal the line overwrites the live progress line, which the next step redraws below it.
    log_ << (live_progress_ ? "\r" : "") << "step " << step_ << ": val loss " << val
         << (live_progress_ ? std::string(40, ' ') : "") << std::endl;
}

void training_run::update_elapsed() {
    history_.elapsed_seconds = seconds_before_ + seconds_since(start_time_);
    history_.elapsed_cpu_seconds = cpu_seconds_before_ + process_cpu_seconds();
}

void training_run::checkpoint() {
    update_elapsed();
    if (ranks_.root())
        save_checkpoint(run_dir_, run_id_, step_, checkpointed_parts(), c_.output.keep_checkpoints);
}

int64_t training_run::parameter_count() const {
    int64_t n = 0;
    for (const auto& p : params_) n += p.second.numel();
    return n;
}

run_result training_run::finish(const std::string& status, const stability::verdict& v) {
    update_elapsed();
    run::summary_record r;
    r.run_id = run_id_;
    r.name = c_.name;
    r.status = status;
    r.failure_mode = stability::failure_mode_name(v.mode);
    if (v.mode != stability::failure_mode::none) r.failure_step = v.evidence_step;
    r.failure_evidence = v.evidence;
    r.steps_done = step_;
    r.max_steps = c_.training.max_steps;
    r.seed = c_.training.seed;
    r.values.set("final_train_loss", history_.trend.empty() ? NAN : history_.trend.back().values.get("loss"));
    r.values.set("final_val_loss", history_.last_val_loss);
    r.values.set("best_val_loss", std::isnan(history_.best_val_loss) ? INFINITY : history_.best_val_loss);
    r.values.set("seconds", history_.elapsed_seconds);
    r.values.set("cpu_seconds", history_.elapsed_cpu_seconds);
    r.formats = {c_.quantization.weight_format, c_.quantization.activation_format,
                 c_.quantization.gradient_format};
    r.parameters = parameter_count();
    const data::corpus_reference ref = data::reference_losses(data_);
    r.corpus = {ref.unigram_entropy, ref.bigram, ref.trigram};
    r.switches = history_.switches;
    r.interventions = history_.interventions;
    if (ranks_.root()) run::write_summary(run_dir_, r);
    if (!ranks_.root()) return {{}, r};  // rank 0 says where the run is
    if (status == "error") return {run_dir_, r};
    const run::metric_values& m = r.values;
    log_ << "done: " << stop_reason_ << ", " << r.steps_done << "/" << r.max_steps
         << " steps, final train loss " << m.get("final_train_loss") << ", final val loss "
         << m.get("final_val_loss") << " (best " << m.get("best_val_loss") << "), "
         << duration_text(m.get("seconds")) << "\n"
         << "run directory " << run_dir_.string()
         << " (config.toml, metrics.jsonl, catalog.json, summary.json, checkpoints/)\n"
         << "corpus unigram entropy " << ref.unigram_entropy << " nats/char; held-out bigram " << ref.bigram
         << ", trigram " << ref.trigram << " nats/char (what n-gram statistics alone reach)\n";
    return {run_dir_, r};
}

// ------------------------------------------------------------------ small pieces

// Linear warm-up, then cosine decay to min_lr at max_steps (nanoGPT's
// schedule), or constant. `step` is 0-based.
double training_run::learning_rate_at(int64_t step) const {
    const config::training_config& t = c_.training;
    if (step < t.warmup_steps)
        return t.learning_rate * static_cast<double>(step + 1) / static_cast<double>(t.warmup_steps + 1);
    if (t.lr_schedule == config::lr_schedule_kind::constant) return t.learning_rate;
    const double span = static_cast<double>(std::max<int64_t>(1, t.max_steps - t.warmup_steps));
    const double ratio = std::min(1.0, static_cast<double>(step - t.warmup_steps) / span);
    return t.min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (t.learning_rate - t.min_lr);
}

bool training_run::is_diagnostic_step(int64_t steps_done) const {
    return steps_done % c_.quantization.diagnostic_interval == 0 || steps_done == c_.training.max_steps;
}

void training_run::event(run::event_line e) { write_metrics(run::metrics_line(std::move(e))); }

void training_run::write_metrics(const run::metrics_line& line) {
    if (metrics_) metrics_->write(line);
}

run_result run_training(const run_request& request, std::ostream& log) {
    std::optional<training_run> run;
    try {
        run.emplace(request, log);
    } catch (const error&) {
        throw;
    } catch (const std::exception& e) {
        // Setting up (the model, the optimizer) ran out of memory or LibTorch refused.
        config::run_config c;
        try {
            c = load_run_config(request);
        } catch (const std::exception&) {
            throw error(first_line(e.what()));
        }
        throw as_host_error(e, c);
    }
    return run->run();
}

}  // namespace altgrad::host::train
