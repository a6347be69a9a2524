#include "report/loss_figures.hpp"

#include <algorithm>
#include <cmath>

namespace altgrad::host::report {

namespace {

// The finite values of series `name` of `runs`, by step.
std::map<int64_t, std::vector<double>> values_by_step(const std::vector<const run_record*>& runs,
                                                      const std::string& name) {
    std::map<int64_t, std::vector<double>> at;
    for (const run_record* r : runs)
        for (const point& p : r->series_points(name))
            if (std::isfinite(p.value)) at[p.step].push_back(p.value);
    return at;
}

std::string seeds_text(size_t n) { return std::to_string(n) + (n == 1 ? " seed" : " seeds"); }

// The runs of `g` that logged series `name`.
size_t runs_with(const group_summary& g, const std::string& name) {
    return static_cast<size_t>(std::count_if(
        g.runs.begin(), g.runs.end(), [&](const run_record* r) { return !r->series_points(name).empty(); }));
}

// Group `g`'s mean validation loss (points, titled) and the band of its seeds, in `color` and `dash`.
void add_validation_mean(figure& f, const group_summary& g, int color, int dash, const std::string& title) {
    const std::vector<point> mean = seed_mean(g.runs, "val_loss");
    if (mean.empty()) return;
    f.lines.push_back({title, mean, true, dash, color, {}});
    std::vector<band_point> band = seed_range(g.runs, "val_loss");
    if (!band.empty()) f.lines.push_back({"", {}, false, 0, color, std::move(band)});
}

// The group's loss figure: its seeds' means against its baseline's.
figure group_loss(const std::vector<group_summary>& groups, size_t k) {
    const group_summary& g = groups[k];
    const group_summary* baseline = g.compared_with == kNoGroup ? nullptr : &groups[g.compared_with];
    const bool against = baseline != nullptr && !g.baseline;
    figure f;
    f.stem = "loss-" + g.label;
    f.title = "Loss: " + g.label + (against ? " against " + baseline->label : "") +
              " (mean over seeds; band: their range; thin line: training loss)";
    f.ylabel = "loss (nats/token)";
    const int color = line_color(k);
    const std::vector<point> train = seed_mean(g.runs, "train_loss");
    if (!train.empty()) f.lines.push_back({"", train, false, 0, color, {}});
    add_validation_mean(f, g, color, 0, g.label + " (" + seeds_text(runs_with(g, "val_loss")) + ")");
    if (against)
        add_validation_mean(
            f, *baseline, line_color(g.compared_with), 2,
            baseline->label + " (baseline, " + seeds_text(runs_with(*baseline, "val_loss")) + ")");
    return f;
}

// The group's every seed: training and validation loss, and its baseline's seeds' validation loss dashed.
figure group_seeds(const std::vector<group_summary>& groups, size_t k,
                   const std::map<const run_record*, std::string>& names) {
    const group_summary& g = groups[k];
    const group_summary* baseline = g.compared_with == kNoGroup ? nullptr : &groups[g.compared_with];
    figure f;
    f.stem = "loss_seeds-" + g.label;
    f.title = "Loss of each seed: " + g.label +
              (baseline != nullptr && !g.baseline ? " against " + baseline->label : "");
    f.ylabel = "loss (nats/token)";
    const int color = line_color(k);
    for (const run_record* r : g.runs) {
        f.lines.push_back({names.at(r) + " train", r->train_loss(), false, 0, color, {}});
        f.lines.push_back({names.at(r) + " val", r->val_loss(), true, 0, color, {}});
    }
    if (baseline != nullptr && !g.baseline) {
        const int base_color = line_color(g.compared_with);
        for (const run_record* r : baseline->runs)
            f.lines.push_back({names.at(r) + " val (baseline)", r->val_loss(), true, 2, base_color, {}});
    }
    return f;
}

}  // namespace

std::vector<band_point> seed_range(const std::vector<const run_record*>& runs, const std::string& name) {
    std::vector<band_point> band;
    for (const auto& [step, values] : values_by_step(runs, name))
        if (values.size() >= 2)
            band.push_back({step, *std::min_element(values.begin(), values.end()),
                            *std::max_element(values.begin(), values.end())});
    return band;
}

std::vector<point> seed_mean(const std::vector<const run_record*>& runs, const std::string& name) {
    std::vector<point> mean;
    for (const auto& [step, values] : values_by_step(runs, name)) {
        double sum = 0;
        for (const double v : values) sum += v;
        mean.push_back({step, sum / static_cast<double>(values.size())});
    }
    return mean;
}

std::vector<figure> loss_figures(const std::vector<group_summary>& groups,
                                 const std::map<const run_record*, std::string>& names, bool per_seed) {
    std::vector<figure> figures;
    for (size_t k = 0; k < groups.size(); ++k) {
        figures.push_back(group_loss(groups, k));
        if (per_seed) figures.push_back(group_seeds(groups, k, names));
    }
    if (groups.size() > 1) {
        figure f;
        f.stem = "val_loss-all";
        f.title = "Validation loss: every group, the mean over its seeds (a colour each; band: their range)";
        f.ylabel = "validation loss (nats/token)";
        for (size_t k = 0; k < groups.size(); ++k)
            add_validation_mean(f, groups[k], line_color(k), line_dash(k), groups[k].label);
        figures.push_back(f);
    }
    return figures;
}

}  // namespace altgrad::host::report
