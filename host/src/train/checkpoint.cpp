#include "train/checkpoint.hpp"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <optional>
#include <sstream>

#include "run/files.hpp"
#include "util/error.hpp"
#include "util/file_tree.hpp"

namespace altgrad::host::train {

namespace fs = std::filesystem;

namespace {

// LibTorch's default random generator of `device` (dropout draws from it).
at::Generator default_generator(const torch::Device& device) {
    return device.is_cuda() ? at::globalContext().defaultGenerator(device)
                            : at::detail::getDefaultCPUGenerator();
}

// torch::save into memory, then a checked write: LibTorch's archive writer
// throws from a destructor when the disk is full, which no caller can catch.
template <typename T>
void save_archive(const T& value, const fs::path& file) {
    std::ostringstream bytes;
    torch::save(value, bytes);
    run::write_file(file, bytes.str());
}

void save_generator(const torch::Device& device, const fs::path& file) {
    at::Generator gen = default_generator(device);
    torch::Tensor state;
    {
        std::lock_guard<std::mutex> lock(gen.mutex());
        state = gen.get_state();
    }
    save_archive(state, file);
}

void load_generator(const torch::Device& device, const fs::path& file) {
    torch::Tensor state;
    torch::load(state, file.string());
    at::Generator gen = default_generator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
}

}  // namespace

namespace {

void write_checkpoint_files(const fs::path& tmp, const std::string& run_id, int64_t step,
                            const checkpointed& c) {
    fs::create_directories(tmp);
    save_archive(c.model, tmp / "model.pt");
    save_archive(c.optimizer, tmp / "optimizer.pt");
    save_generator(torch::Device(torch::kCPU), tmp / "rng.pt");
    if (c.device.is_cuda()) save_generator(c.device, tmp / "rng_cuda.pt");  // dropout on the GPU
    {
        // Undefined entries (non-weights, or before the first snapshot) are saved as empty tensors.
        std::vector<torch::Tensor> snaps;
        for (const torch::Tensor& x : c.stall.snapshots())
            snaps.push_back(x.defined() ? x : torch::empty({0}));
        save_archive(snaps, tmp / "bit_stall.pt");
    }
    c.interventions.save_states(tmp);
    run::checkpoint_state state;
    state.run_id = run_id;
    state.step = step;
    state.detector = c.detector.state();
    state.sites = site_records(c.plan);
    state.history = c.history;
    state.files = run::checkpoint_files(tmp);  // what resume verifies before it reads anything
    run::write_checkpoint_state(tmp, state);   // last: its presence marks a complete checkpoint
}

// The checkpoint `ref` checked whole: state.json readable and about this
// folder, every other file as state.json recorded it, and its sites those of
// the plan (its formats still the config's), in formats the run can have reached.
run::checkpoint_state verified_state(const run::checkpoint_ref& ref, const fs::path& run_dir,
                                     const quant_plan& plan, format_library& formats) {
    if (ref.legacy)
        throw error(ref.dir.string() +
                    ": a checkpoint of an older altgrad-host (state.toml, not state.json): finish "
                    "the run with the version that started it, or start it again with: altgrad-host run " +
                    run::config_file(run_dir).string() + " --out NEW_DIR");
    run::checkpoint_state state = run::read_checkpoint_state(ref.dir);
    if (state.step != ref.step)
        throw error(run::state_file(ref.dir).string() + ": key 'step': " + std::to_string(state.step) +
                    ", but the folder is " + ref.dir.filename().string() +
                    " (a checkpoint moved or edited by hand?)");
    run::verify_checkpoint_files(ref.dir, state.files);
    check_sites(plan, state.sites, state.history.switches, formats, run::state_file(ref.dir).string());
    return state;
}

}  // namespace

void save_checkpoint(const fs::path& run_dir, const std::string& run_id, int64_t step, const checkpointed& c,
                     int64_t keep) {
    const fs::path final_dir = run::checkpoint_dir(run_dir, step);
    const fs::path tmp = run::checkpoints_dir(run_dir) / (".tmp-" + final_dir.filename().string());
    std::error_code ec;
    remove_tree(tmp, ec);
    try {
        write_checkpoint_files(tmp, run_id, step, c);
        remove_tree(final_dir);
        fs::rename(tmp, final_dir);  // atomic: a crash leaves a .tmp- folder, never a half checkpoint
    } catch (const std::exception& e) {
        // A full disk, most likely: the earlier checkpoints stay as they were.
        remove_tree(tmp, ec);
        throw error(final_dir.string() + ": cannot write the checkpoint (" + first_line(e.what()) +
                    "); the newest earlier checkpoint is intact");
    }
    // Keep the newest `keep`.
    std::vector<run::checkpoint_ref> all = run::complete_checkpoints(run_dir);
    for (size_t k = 0; k + static_cast<size_t>(keep) < all.size(); ++k) remove_tree(all[k].dir, ec);
}

resumed load_latest_checkpoint(const fs::path& run_dir, const checkpointed& c, format_library& formats,
                               std::ostream& log, bool fallback) {
    const std::vector<run::checkpoint_ref> all = run::complete_checkpoints(run_dir);
    if (all.empty()) throw error("--resume " + run_dir.string() + ": no complete checkpoint in checkpoints/");
    std::optional<run::checkpoint_state> state;
    const run::checkpoint_ref* ref = nullptr;
    for (auto it = all.rbegin(); it != all.rend() && !state; ++it) {
        try {
            state = verified_state(*it, run_dir, c.plan, formats);
            ref = &*it;
        } catch (const error& e) {
            const bool older = std::next(it) != all.rend();
            if (!fallback)
                throw error(
                    std::string(e.what()) +
                    (older ? "; `run --resume " + run_dir.string() +
                                 " --fallback` resumes from the newest intact earlier checkpoint instead"
                           : ""));
            log << "--fallback: skipping " << it->dir.filename().string() << ": " << e.what() << "\n";
        }
    }
    if (!state)
        throw error("--resume " + run_dir.string() + " --fallback: no intact checkpoint in checkpoints/");
    const fs::path& dir = ref->dir;
    if (!state->self_checked)
        log << "note: " << run::state_file(dir).string()
            << " records no CRC-32 of itself (a checkpoint of a host before it): its values are taken as "
               "written\n";
    torch::load(c.model, (dir / "model.pt").string());
    torch::load(c.optimizer, (dir / "optimizer.pt").string());
    load_generator(torch::Device(torch::kCPU), dir / "rng.pt");
    if (c.device.is_cuda() && fs::exists(dir / "rng_cuda.pt")) load_generator(c.device, dir / "rng_cuda.pt");
    restore_sites(c.plan, state->sites, formats);
    {
        std::vector<torch::Tensor> snaps;
        torch::load(snaps, (dir / "bit_stall.pt").string());
        for (torch::Tensor& x : snaps)
            if (x.numel() == 0) x = torch::Tensor();
        c.stall.restore(std::move(snaps));
    }
    c.detector.restore(state->detector);
    c.history = state->history;
    c.interventions.load_states(dir, log);
    return {state->step, state->run_id};
}

// ---------------------------------------------------------------- the plan's sites

std::vector<run::site_record> site_records(const quant_plan& plan) {
    std::vector<run::site_record> out;
    for (const quant_site& s : plan.sites)
        out.push_back(
            {s.name(), format_name_of(s), s.bit_stall_rate,
             run::scaling_record{s.scaling.scale(),
                                 {s.scaling.amax_history().begin(), s.scaling.amax_history().end()}}});
    return out;
}

namespace {

// Site `r`'s format checked against its config's (`format`, the plan's) and
// every switch of it that `switches` records, in order.
void check_site_format(const run::site_record& r, const std::string& key, std::string format,
                       const std::vector<run::format_switch>& switches, format_library& formats,
                       const std::string& where) {
    const auto same = [&](const std::string& a, const std::string& b) {
        return a == b || formats.own_name(a) == formats.own_name(b);
    };
    std::string origin = "the run's config (config.toml and --set) makes " + r.name + " \"" + format + "\"";
    bool switched = false;
    for (size_t i = 0; i < switches.size(); ++i) {
        const run::format_switch& sw = switches[i];
        if (sw.tensor != r.name) continue;
        const std::string switch_key = "history.switches[" + std::to_string(i) + "]";
        if (!same(sw.from, format))
            throw error(where + ": key '" + switch_key + ".from': \"" + sw.from +
                        "\", but before that switch " + origin + " (edited by hand?)");
        format = sw.to;
        origin = sw.plugin + " switched " + r.name + " to \"" + sw.to + "\" at step " +
                 std::to_string(sw.step) + " (key '" + switch_key + "')";
        switched = true;
    }
    if (!same(r.format, format))
        throw error(where + ": key '" + key + "': \"" + r.format + "\", but " + origin +
                    (switched ? ", its last switch" : " and key 'history.switches' records no switch of it") +
                    " (edited by hand?)");
}

}  // namespace

void check_sites(const quant_plan& plan, const std::vector<run::site_record>& records,
                 const std::vector<run::format_switch>& switches, format_library& formats,
                 const std::string& where) {
    if (records.size() != plan.sites.size())
        throw error(where + ": key 'sites': " + std::to_string(records.size()) +
                    " sites, but this model has " + std::to_string(plan.sites.size()) +
                    " (a checkpoint of another model?)");
    for (size_t k = 0; k < records.size(); ++k) {
        const quant_site& s = plan.sites[k];
        const run::site_record& r = records[k];
        const std::string key = "sites[" + std::to_string(k) + "]";
        if (r.name != s.name())
            throw error(where + ": key '" + key + ".name': \"" + r.name + "\", but this model's site " +
                        std::to_string(k) + " is \"" + s.name() + "\"");
        check_site_format(r, key + ".format", format_name_of(s), switches, formats, where);
    }
}

void restore_sites(quant_plan& plan, const std::vector<run::site_record>& records, format_library& formats) {
    for (size_t k = 0; k < records.size() && k < plan.sites.size(); ++k) {
        quant_site& s = plan.sites[k];
        const run::site_record& r = records[k];
        // Formats first (an intervention may have switched some), then their scaling.
        if (r.format != format_name_of(s)) {
            set_format(s, formats.get(r.format));
        }
        s.scaling.restore(r.scaling.scale, r.scaling.amax_history);
        s.bit_stall_rate = r.bit_stall_rate;
    }
}

}  // namespace altgrad::host::train
