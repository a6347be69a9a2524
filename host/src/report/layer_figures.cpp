#include "report/layer_figures.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace altgrad::host::report {

namespace {

// The roles of quantized tensors (weight_gradient: a parameter's gradient
// as [quantization.communication] sends it), and how a title names them.
const char* const kRoles[] = {"weight", "activation", "output_gradient", "weight_gradient"};
std::string plural(const std::string& role) {
    return role == "weight_gradient" ? std::string("gradients as sent") : role + "s";
}

// "blocks.0.mlp.fc.weight" -> "blocks.0.mlp.fc": the layer, as a line's
// title; a sent gradient's "blocks.0.mlp.fc.weight.communication" -> its
// parameter, "blocks.0.mlp.fc.weight".
std::string layer_of(const std::string& tensor) {
    for (const char* suffix : {".communication", ".weight", ".input", ".output_grad"}) {
        const std::string s = suffix;
        if (tensor.size() > s.size() && tensor.compare(tensor.size() - s.size(), s.size(), s) == 0)
            return tensor.substr(0, tensor.size() - s.size());
    }
    return tensor;
}

bool any_finite(const std::vector<point>& pts) {
    return std::any_of(pts.begin(), pts.end(), [](const point& p) { return std::isfinite(p.value); });
}

// A line per tensor of `role`: its values of `metric` ("amax", "scale").
figure per_layer(const run_record& r, const std::string& role, const std::string& metric,
                 const std::string& stem, const std::string& title, const std::string& ylabel) {
    figure f;
    f.stem = stem;
    f.title = title;
    f.ylabel = ylabel;
    f.log_y = true;
    for (const auto& [name, t] : r.tensors) {
        const std::vector<point> values = t.of(metric);
        if (t.role != role || !any_finite(values)) continue;
        const size_t k = f.lines.size();
        f.lines.push_back({layer_of(name), values, false, line_dash(k), line_color(k), {}});
    }
    return f;
}

// The block statistics of a role's tensors at one step, summed.
struct block_sum {
    uint64_t blocks = 0, saturated = 0, underflowed = 0;
    double smallest = NAN, largest = NAN;
};

}  // namespace

std::vector<figure> layer_figures(const run_record& r, const std::string& label) {
    std::vector<figure> out;
    for (const char* role : kRoles) {
        figure amax = per_layer(r, role, "amax", "amax-" + label + "-" + role,
                                "amax per layer: " + plural(role) + " of " + label, "amax");
        if (!amax.lines.empty()) out.push_back(std::move(amax));
        figure scale =
            per_layer(r, role, "scale", "scale-" + label + "-" + role,
                      "Per-tensor scale per layer (q(x*s)/s): " + plural(role) + " of " + label, "scale s");
        if (!scale.lines.empty()) out.push_back(std::move(scale));
    }
    std::map<std::string, std::map<int64_t, block_sum>> by_role;  // role -> step -> sum
    for (const auto& [name, t] : r.tensors)
        for (const run::tensor_line& l : t.lines) {
            if (!l.values.has("blocks.blocks")) continue;  // not block-scaled
            const run::metric_values& b = l.values;
            block_sum& s = by_role[t.role][l.step];
            s.blocks += static_cast<uint64_t>(b.get("blocks.blocks"));
            s.saturated += static_cast<uint64_t>(b.get("blocks.saturated"));
            s.underflowed += static_cast<uint64_t>(b.get("blocks.underflowed"));
            // fmin/fmax: a NaN (none written) is skipped.
            s.smallest = std::fmin(s.smallest, b.get("blocks.smallest_scale"));
            s.largest = std::fmax(s.largest, b.get("blocks.largest_scale"));
        }
    if (by_role.empty()) return out;
    figure fractions, scales;
    fractions.stem = "blocks-" + label;
    fractions.title = "Block scales clamped (fraction of blocks; saturated: elements clip): " + label;
    fractions.ylabel = "fraction of blocks";
    scales.stem = "block_scales-" + label;
    scales.title = "Smallest and largest block scale (decode scale X = 1/s): " + label;
    scales.ylabel = "block scale X";
    scales.log_y = true;
    int color = 0;
    for (const char* role : kRoles) {
        const auto it = by_role.find(role);
        if (it == by_role.end()) continue;
        ++color;
        std::vector<point> saturated, underflowed, smallest, largest;
        for (const auto& [step, s] : it->second) {
            const double n = static_cast<double>(s.blocks);
            saturated.push_back({step, s.blocks ? static_cast<double>(s.saturated) / n : NAN});
            underflowed.push_back({step, s.blocks ? static_cast<double>(s.underflowed) / n : NAN});
            smallest.push_back({step, s.smallest});
            largest.push_back({step, s.largest});
        }
        fractions.lines.push_back({std::string(role) + " saturated", saturated, false, 0, color, {}});
        fractions.lines.push_back({std::string(role) + " underflowed", underflowed, false, 2, color, {}});
        scales.lines.push_back({std::string(role) + " largest", largest, false, 0, color, {}});
        scales.lines.push_back({std::string(role) + " smallest", smallest, false, 2, color, {}});
    }
    out.push_back(std::move(fractions));
    out.push_back(std::move(scales));
    return out;
}

}  // namespace altgrad::host::report
