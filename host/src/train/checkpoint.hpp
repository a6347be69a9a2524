// Checkpoints: everything a resumed run needs to repeat the uninterrupted one.
// A checkpoint is a folder checkpoints/step_N/ (run/files.hpp names it):
//   model.pt, optimizer.pt          the model and AdamW state (LibTorch archives)
//   rng.pt, rng_cuda.pt             LibTorch's default generators (dropout; CUDA only on a GPU run)
//   bit_stall.pt                    the bit-stall meter's weight snapshots
//   interventions/NAME.state        each intervention's own bytes (ABI 1.1)
//   state.json                      run::checkpoint_state: the quantization plan, the loop's
//                                   counters, the failure detector, the run history
// written into a hidden .tmp- folder, state.json last, then renamed into
// place: a crash leaves a .tmp- folder, never a half checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>

#include <torch/torch.h>

#include "run/records.hpp"
#include "stability/failure.hpp"
#include "stability/plugin_set.hpp"
#include "train/measure.hpp"
#include "train/model.hpp"
#include "train/quant_plan.hpp"

namespace altgrad::host::train {

// What a checkpoint saves and restores, by reference into the training run.
struct checkpointed {
    GPT& model;
    torch::optim::AdamW& optimizer;
    quant_plan& plan;
    bit_stall_meter& stall;
    stability::failure_detector& detector;
    stability::intervention_set& interventions;
    run::run_history& history;
    torch::Device device;  // where the model trains (a GPU run saves the GPU's generator too)
};

// Saves checkpoints/step_<step>/ and keeps the newest `keep` checkpoints. A
// failed write (a full disk) removes the .tmp- folder and throws host::error
// naming the checkpoint; the earlier checkpoints are untouched.
void save_checkpoint(const std::filesystem::path& run_dir, const std::string& run_id, int64_t step,
                     const checkpointed& c, int64_t keep);

// Restores the newest complete checkpoint of `run_dir`; returns its step and
// the run id. Every file is verified against state.json's sizes and CRC-32s
// before any is read. A damaged checkpoint (or one of an older host, or one
// whose state.json does not match its folder or this model) is refused with
// a host::error naming the file, or, with `fallback`, skipped (a line on
// `log`) for the newest intact earlier one.
struct resumed {
    int64_t step = 0;
    std::string run_id;
};
resumed load_latest_checkpoint(const std::filesystem::path& run_dir, const checkpointed& c,
                               format_library& formats, std::ostream& log, bool fallback);

// Each site's format, scaling and bit-stall rate, for checkpoints, and back.
std::vector<run::site_record> site_records(const quant_plan& plan);

// Refuses (host::error naming `where`, a checkpoint's state.json, and the key)
// records that do not name the plan's sites in order, or give a site a format
// the run cannot have reached: with the plan's formats freshly assigned from
// the run's config, each site's format must be its config's, or the `to` of
// the last of the format switches `switches` records for it, each of which
// must switch from the format before it. What an intervention did is thus
// resumed; a format edited by hand (or changed by --set on resume) is not.
void check_sites(const quant_plan& plan, const std::vector<run::site_record>& records,
                 const std::vector<run::format_switch>& switches, format_library& formats,
                 const std::string& where);
// Restores records check_sites accepted.
void restore_sites(quant_plan& plan, const std::vector<run::site_record>& records, format_library& formats);

}  // namespace altgrad::host::train
