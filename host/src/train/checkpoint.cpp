#include "train/checkpoint.hpp"

#include <algorithm>
#include <mutex>

#include "run/files.hpp"
#include "util/error.hpp"

namespace altgrad::host::train {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

void save_checkpoint(const fs::path& run_dir, const std::string& run_id, int64_t step, const checkpointed& c,
                     int64_t keep) {
    const fs::path final_dir = run::checkpoint_dir(run_dir, step);
    const fs::path tmp = run::checkpoints_dir(run_dir) / (".tmp-" + final_dir.filename().string());
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    torch::save(c.model, (tmp / "model.pt").string());
    torch::save(c.optimizer, (tmp / "optimizer.pt").string());
    save_generator(torch::Device(torch::kCPU), tmp / "rng.pt");
    if (c.device.is_cuda()) save_generator(c.device, tmp / "rng_cuda.pt");  // dropout on the GPU
    {
        // Undefined entries (non-weights, or before the first snapshot) are saved as empty tensors.
        std::vector<torch::Tensor> snaps;
        for (const torch::Tensor& x : c.stall.snapshots()) snaps.push_back(x.defined() ? x : torch::empty({0}));
        torch::save(snaps, (tmp / "bit_stall.pt").string());
    }
    c.interventions.save_states(tmp);
    run::checkpoint_state state;
    state.run_id = run_id;
    state.step = step;
    state.window_loss_sum = c.window_loss_sum;
    state.window_loss_n = c.window_loss_n;
    state.detector = c.detector.state();
    state.sites = site_records(c.plan);
    state.history = c.history;
    run::write_checkpoint_state(tmp, state);  // last: its presence marks a complete checkpoint
    fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);
    // Keep the newest `keep`.
    std::vector<run::checkpoint_ref> all = run::complete_checkpoints(run_dir);
    for (size_t k = 0; k + static_cast<size_t>(keep) < all.size(); ++k) fs::remove_all(all[k].dir);
}

resumed load_latest_checkpoint(const fs::path& run_dir, const checkpointed& c, format_library& formats,
                               std::ostream& log) {
    const std::optional<run::checkpoint_ref> latest = run::latest_checkpoint(run_dir);
    if (!latest) throw error("--resume " + run_dir.string() + ": no complete checkpoint in checkpoints/");
    const fs::path& dir = latest->dir;
    if (latest->legacy)
        throw error(dir.string() + ": a checkpoint of an older altgrad-host (state.toml, not state.json): finish the run "
                    "with the version that started it, or start it again with: altgrad-host run " +
                    run::config_file(run_dir).string() + " --out NEW_DIR");
    const run::checkpoint_state state = run::read_checkpoint_state(dir);
    const std::string where = run::state_file(dir).string();
    if (state.step != latest->step)
        throw error(where + ": key 'step': " + std::to_string(state.step) + ", but the folder is " +
                    dir.filename().string() + " (a checkpoint moved or edited by hand?)");
    torch::load(c.model, (dir / "model.pt").string());
    torch::load(c.optimizer, (dir / "optimizer.pt").string());
    load_generator(torch::Device(torch::kCPU), dir / "rng.pt");
    if (c.device.is_cuda() && fs::exists(dir / "rng_cuda.pt")) load_generator(c.device, dir / "rng_cuda.pt");
    restore_sites(c.plan, state.sites, formats, where);
    {
        std::vector<torch::Tensor> snaps;
        torch::load(snaps, (dir / "bit_stall.pt").string());
        for (torch::Tensor& x : snaps)
            if (x.numel() == 0) x = torch::Tensor();
        c.stall.restore(std::move(snaps));
    }
    c.window_loss_sum = state.window_loss_sum;
    c.window_loss_n = state.window_loss_n;
    c.detector.restore(state.detector);
    c.history = state.history;
    c.interventions.load_states(dir, log);
    return {state.step, state.run_id};
}

}  // namespace altgrad::host::train
