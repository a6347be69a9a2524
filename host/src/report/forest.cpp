// The forest plots of the summary (summary.hpp's forest_figures): a row per
// compared group, top to bottom in the summary's order, its difference from
// its baseline as a point with its 95% interval as a bar, the zero line, and
// a cross at zero for a group whose every run failed; behind each row a grey
// box of its baseline's seed-to-seed spread (± the sd of its final losses).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "report/summary.hpp"

namespace altgrad::host::report {

namespace {

// What one forest plot shows of a row: the difference or the relative error.
struct forest_axis {
    const char* stem;
    const char* title;
    const char* xlabel;
    double summary_row::*value;
    double summary_row::*low;
    double summary_row::*high;
};

constexpr forest_axis kDifference = {"diff-forest",
                                     "Final validation loss minus the baseline's (95% intervals)",
                                     "final validation loss minus the baseline's (nats/token)",
                                     &summary_row::difference,
                                     &summary_row::ci_low,
                                     &summary_row::ci_high};
constexpr forest_axis kRelative = {"relative-forest",
                                   "Relative error: (group - baseline) / baseline (95% intervals)",
                                   "relative error of the final validation loss (%)",
                                   &summary_row::relative,
                                   &summary_row::relative_low,
                                   &summary_row::relative_high};

// The points of one kind of row, "row value low high" a line (a cross at zero: "row 0"; the
// baseline's spread: "row low high").
struct forest_series {
    const char* title;
    const char* style;  // the plot clause after the data file
    std::string data;
};

std::string number(double x) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", x);
    return buf;
}

// The row's label on the y axis: the group, and its failures when it has any; a label with settings
// ("e3m4_uniform [scaling=none, shadow_weights=true]") in two lines, the settings below.
std::vector<std::string> row_label(const summary_row& r) {
    const group_summary& g = *r.group;
    const size_t settings = g.label.find(" [");
    std::string name = g.label.substr(0, settings);
    if (g.failed > 0) name += " (" + std::to_string(g.failed) + "/" + std::to_string(g.decided) + " failed)";
    else if (r.method == comparison::none) name += " (no finished run)";
    if (settings == std::string::npos) return {name};
    return {name, g.label.substr(settings + 1)};
}

// Rows of the compared groups, in order.
std::vector<const summary_row*> compared_rows(const std::vector<summary_row>& rows) {
    std::vector<const summary_row*> out;
    for (const summary_row& r : rows)
        if (r.method != comparison::baseline && r.baseline != nullptr) out.push_back(&r);
    return out;
}

// The baseline's seed-to-seed spread on `axis`: ± its seeds' sample sd (NaN with fewer than 2 seeds).
double baseline_spread(const summary_row& r, const forest_axis& axis) {
    const sample_summary& v = r.baseline->val;
    return axis.value == &summary_row::relative ? 100 * v.sd / v.mean : v.sd;
}

// The rows sorted into their series, the labels on the y axis and the range of x to show.
struct forest_layout {
    std::vector<forest_series> series = {
        {"the baseline's seeds: ± 1 sd",
         "using (0):1:2:3:($1-0.3):($1+0.3) with boxxyerror fs solid 0.25 noborder lc rgb '#999999'", ""},
        {"paired over the seeds shared with the baseline",
         "using 2:1:3:4 with xerrorbars pt 7 ps 1.3 lw 2 lc rgb '#1f4e9c'", ""},
        {"Welch (no shared seeds)", "using 2:1:3:4 with xerrorbars pt 6 ps 1.3 lw 2 lc rgb '#1f4e9c'", ""},
        {"difference of the means (too few runs for an interval)",
         "using 2:1 with points pt 4 ps 1.3 lc rgb '#1f4e9c'", ""},
        {"every run failed (no loss to compare)", "using 2:1 with points pt 2 ps 2 lw 2 lc rgb '#c00000'",
         ""},
    };
    std::string ytics;
    size_t longest = 0;      // the longest line of a label, in bytes
    bool two_lines = false;  // some label has two
    double lo = 0, hi = 0;
};

forest_layout lay_out(const std::vector<const summary_row*>& rows, const forest_axis& axis) {
    forest_layout f;
    for (size_t i = 0; i < rows.size(); ++i) {
        const summary_row& r = *rows[i];
        const std::string row = std::to_string(i + 1);
        const std::vector<std::string> lines = row_label(r);
        std::string label;  // a gnuplot string expression: the lines joined by newlines
        for (const std::string& line : lines) {
            label += (label.empty() ? "" : " . \"\\n\" . ") + gnuplot_quote(line);
            f.longest = std::max(f.longest, line.size());
        }
        f.two_lines = f.two_lines || lines.size() > 1;
        f.ytics += (i ? ", " : "") + label + " " + row;
        const double spread = baseline_spread(r, axis);
        if (std::isfinite(spread)) {
            f.series[0].data += row + "\t" + number(-spread) + "\t" + number(spread) + "\n";
            f.lo = std::min(f.lo, -spread), f.hi = std::max(f.hi, spread);
        }
        const double v = r.*axis.value, l = r.*axis.low, h = r.*axis.high;
        if (std::isnan(v)) {
            if (r.group->failed > 0) f.series[4].data += row + "\t0\n";
            continue;
        }
        f.lo = std::min({f.lo, v, std::isnan(l) ? v : l}), f.hi = std::max({f.hi, v, std::isnan(h) ? v : h});
        if (r.method == comparison::means || std::isnan(l)) f.series[3].data += row + "\t" + number(v) + "\n";
        else
            f.series[r.method == comparison::paired ? 1 : 2].data +=
                row + "\t" + number(v) + "\t" + number(l) + "\t" + number(h) + "\n";
    }
    return f;
}

figure_script forest(const std::vector<const summary_row*>& rows, const forest_axis& axis) {
    const forest_layout layout = lay_out(rows, axis);
    const double pad = layout.hi > layout.lo ? 0.05 * (layout.hi - layout.lo) : 1;
    figure_script f;
    f.stem = axis.stem;
    f.title = axis.title;
    // Room for the labels (about 9 pixels a character) beside a plot of 560 pixels; a row of about 26
    // pixels (40 for labels of two lines), the title, the x axis and the key below it, at the foot.
    f.width = std::clamp(static_cast<int>(9 * layout.longest + 600), 960, 1600);
    f.height = std::clamp(static_cast<int>(210 + (layout.two_lines ? 40 : 26) * rows.size()), 340, 2400);
    std::ostringstream body;
    // The title centred on the figure, not over the plot (the labels push the plot to the right).
    body << "unset title\nset label " << gnuplot_quote(f.title) << " at screen 0.5, screen 0.97 center\n"
         << "set tmargin 3\n"
         << "set xlabel " << gnuplot_quote(axis.xlabel) << "\n"
         << "set xrange [" << number(layout.lo - pad) << ":" << number(layout.hi + pad) << "]\n"
         << "set yrange [" << rows.size() << ".6:0.4]\n"
         << "set ytics (" << layout.ytics << ") nomirror\n"
         << "set grid xtics\n"
         << "set key at screen 0.99, screen 0.01 right bottom Right\n"
         << "set bmargin 8\n"
         << "set arrow from first 0, graph 0 to first 0, graph 1 nohead lw 1.5 lc rgb '#444444'\n";
    size_t drawn = 0;
    for (size_t k = 0; k < layout.series.size(); ++k) {
        const forest_series& s = layout.series[k];
        if (s.data.empty()) continue;
        const std::string name = f.stem + "-" + std::to_string(k) + ".dat";
        f.data.emplace_back(
            name, std::string(k == 0 ? "# row\tlow\thigh\n" : "# row\tvalue\tlow\thigh\n") + s.data);
        body << (drawn++ ? ", \\\n     " : "plot ") << gnuplot_quote("data/" + name) << " " << s.style
             << " title " << gnuplot_quote(s.title);
    }
    body << "\n";
    f.body = body.str();
    return f;
}

}  // namespace

std::vector<figure_script> forest_figures(const std::vector<summary_row>& rows) {
    const std::vector<const summary_row*> compared = compared_rows(rows);
    const bool anything = std::any_of(compared.begin(), compared.end(), [](const summary_row* r) {
        return !std::isnan(r->difference) || r->group->failed > 0;
    });
    if (!anything) return {};
    return {forest(compared, kDifference), forest(compared, kRelative)};
}

}  // namespace altgrad::host::report
