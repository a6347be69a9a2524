// The loss figures of a report (docs/report.md, "Figures"): a line per group,
// the mean of its seeds, with a band for their range, against its baseline
// drawn the same way; each seed's own curves on request.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "report/plot.hpp"
#include "report/report.hpp"

namespace altgrad::host::report {

// The lowest and highest value of series `name` of `runs` at each step two or more of them logged a
// finite value: the band of a group's seeds.
std::vector<band_point> seed_range(const std::vector<const run_record*>& runs, const std::string& name);

// The mean of series `name` of `runs` at each step, over the runs that logged a finite value there
// (a collapsed run leaves the mean of the later steps to the others).
std::vector<point> seed_mean(const std::vector<const run_record*>& runs, const std::string& name);

// Per group `loss-<group>`: the mean training loss of its seeds (a thin line) and their mean
// validation loss (points) with the band of their range, and its baseline's validation loss the
// same way, dashed; `val_loss-all`, every group's mean validation loss with its band, when there are
// several groups; with `per_seed`, per group `loss_seeds-<group>`: each seed's curves (named by
// `names`) against each of its baseline's. Stems as given, not yet made unique.
std::vector<figure> loss_figures(const std::vector<group_summary>& groups,
                                 const std::map<const run_record*, std::string>& names, bool per_seed);

}  // namespace altgrad::host::report
