// The report's per-layer figures: how each quantized tensor's amax and scale
// moved over a run, and for block-scaled runs how its block scales did. One
// run per group (its first: the seeds of a group share a configuration, and a
// figure per seed would bury the report), small multiples by role.
#pragma once

#include <string>
#include <vector>

#include "report/plot.hpp"
#include "report/run_record.hpp"

namespace altgrad::host::report {

// The figures of run `r`, titled and stemmed with `label` (its group's),
// from its `tensor` lines (run_record::tensors); none when it has none.
// Per role (weight, activation, output_gradient), a line per layer:
//   amax-<label>-<role>    amax over time (log scale)
//   scale-<label>-<role>   the per-tensor scale over time (log scale; tensors scaled per tensor only)
// and over the block-scaled tensors of each role, summed:
//   blocks-<label>         fraction of blocks whose scale saturated, and underflowed
//   block_scales-<label>   the smallest and the largest block scale (log scale)
// Stems are not unique across groups: the caller makes them so.
std::vector<figure> layer_figures(const run_record& r, const std::string& label);

}  // namespace altgrad::host::report
