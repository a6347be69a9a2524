// Figures for `altgrad-host report`, drawn by gnuplot (Debian's gnuplot-nox):
// one .dat file per series and one .gp script per figure, both kept beside
// the image so a figure can be restyled and redrawn by hand. A missing gnuplot
// or a failing script is a reason string, never an exception.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "report/run_record.hpp"

namespace altgrad::host::report {

// The spread of a group's seeds at one step: the lowest and the highest value.
struct band_point {
    int64_t step = 0;
    double low = 0, high = 0;
};

struct series {
    std::string title;          // empty: not in the key (the other seeds of a group titled once)
    std::vector<point> points;  // non-finite values are left out (a gap in the line)
    bool with_points = false;   // lines and points (sparse series: validation loss)
    int dash = 0;               // gnuplot's dash type: 0 or 1 solid, 2 dashed, 3 dotted, ...
    int color = 0;  // 0: the next of gnuplot's colours; N > 0: colour N (the series of one group share it)
    // When not empty the series is this shaded band (translucent, in `color`) instead of `points`.
    std::vector<band_point> band;
};

// The k-th of many lines told apart: gnuplot's colours 1-8 in turn, solid for the first 8, then
// dashed, dotted, ... (8 colours alone repeat in a study of 28 groups or a model of 17 layers).
inline int line_color(size_t k) { return static_cast<int>(k % 8) + 1; }
inline int line_dash(size_t k) { return static_cast<int>(k / 8 % 5) + 1; }

// A figure's height in pixels (its width is 960) for a key of `key_entries` lines below the plot:
// 540 up to 8 entries, then 20 more per entry (at most 2400).
int figure_height(size_t key_entries);

struct figure {
    std::string stem;  // file name without extension, [A-Za-z0-9._-]
    std::string title, ylabel;
    bool log_y = false;
    std::vector<series> lines;
};

// A figure that is not lines against step (the forest plots of summary.hpp): its data files and the
// gnuplot commands after the terminal and output lines, which the plotter writes itself. Every text in
// `body` from a run directory must have gone through gnuplot_quote.
struct figure_script {
    std::string stem;  // file name without extension, [A-Za-z0-9._-]
    std::string title;
    int width = 960, height = 540;                          // pixels
    std::vector<std::pair<std::string, std::string>> data;  // a file name under data/ and its text
    std::string body;
};

class plotter {
public:
    // `program`: the gnuplot to run (a name looked up in PATH, or a path);
    // each run of it is killed after `timeout_seconds`.
    plotter(std::filesystem::path figures_dir, std::string program, double timeout_seconds = 60);

    // Empty when figures can be drawn; else why not (gnuplot missing, no
    // image terminal). Probes gnuplot once: pngcairo, else png, else svg.
    const std::string& unavailable();
    // The image file extension chosen ("png" or "svg").
    const std::string& extension() const { return extension_; }

    // Draws `f` into figures_dir/<stem>.<ext>; returns the image's file name,
    // or throws nothing and sets `why` on failure.
    bool draw(const figure& f, std::string& image, std::string& why);
    bool draw(const figure_script& f, std::string& image, std::string& why);
    // Whether the last draw failed because gnuplot ran past the time limit
    // (and was killed): the next figure would most likely wait as long.
    bool timed_out() const { return timed_out_; }

private:
    std::filesystem::path dir_;
    std::string program_;
    double timeout_;
    bool probed_ = false, timed_out_ = false;
    std::string unavailable_;
    std::string terminal_, extension_;
};

// Runs `argv` (argv[0] looked up in PATH when it has no '/') with stdin from
// /dev/null and stdout and stderr into `log`, in a process group of its own;
// the exit status, 127 when it could not be started, 128+N when killed by
// signal N, kTimedOut when it ran past `timeout_seconds` and was killed with
// SIGKILL, it and every process of its group (a wrapper's children too).
constexpr int kTimedOut = 1000;
int run_program(const std::vector<std::string>& argv, const std::filesystem::path& log,
                double timeout_seconds);

// Text read from a run directory (run names, config values) made safe to
// stand in a gnuplot script or data file: control characters become spaces
// (a newline would end a comment or string and start a command of the
// attacker's choosing) and a trailing backslash goes (it continues a comment
// onto the next line). Every such text reaches a script through this.
std::string gnuplot_text(const std::string& s);

// A gnuplot single-quoted string literal of gnuplot_text(s). Inside single
// quotes gnuplot substitutes neither `backquotes` nor @macros (checked with
// gnuplot 5.4), so the rest is literal; a quote is doubled.
std::string gnuplot_quote(const std::string& s);

}  // namespace altgrad::host::report
