#include "report/plot.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.hpp"
#include "util/process.hpp"

namespace altgrad::host::report {

namespace fs = std::filesystem;

int run_program(const std::vector<std::string>& argv, const fs::path& log, double timeout_seconds) {
    if (argv.empty()) return 127;
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return 127;
    pid_t pid = -1;
    try {
        // A group of its own: a wrapper script's children are killed with it (they would
        // otherwise go on drawing, or hanging, after the report); it dies with the report.
        pid = spawn_process(argv, log_fd, /*die_with_parent=*/true, -1, /*own_group=*/true);
    } catch (const error&) {  // not found, not executable: the caller names the program
        ::close(log_fd);
        return 127;
    }
    ::close(log_fd);
    // A program that never returns must not hang the report: poll, then kill it.
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
    for (;;) {
        const pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        if (done < 0 && errno != EINTR) return 127;
        if (std::chrono::steady_clock::now() > deadline) {
            kill(-pid, SIGKILL);  // the group: it and every process it started
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
            return kTimedOut;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return exit_code(status);
}

namespace {
std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g s", s);
    return buf;
}
}  // namespace

std::string gnuplot_text(const std::string& s) {
    std::string out;
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        out += u < 0x20 || u == 0x7f ? ' ' : c;
    }
    // A comment line ending in a backslash would swallow the next line.
    while (!out.empty() && out.back() == '\\') out.back() = ' ';
    return out;
}

std::string gnuplot_quote(const std::string& s) {
    std::string out = "'";
    for (const char c : gnuplot_text(s)) {
        if (c == '\'') out += "''";
        else out += c;
    }
    return out + "'";
}

plotter::plotter(fs::path figures_dir, std::string program, double timeout_seconds)
    : dir_(std::move(figures_dir)), program_(std::move(program)), timeout_(timeout_seconds) {}

const std::string& plotter::unavailable() {
    if (probed_) return unavailable_;
    probed_ = true;
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) {
        unavailable_ = dir_.string() + ": cannot create the folder (" + ec.message() + ")";
        return unavailable_;
    }
    const fs::path log = dir_ / ".probe.log";
    // The first image terminal this gnuplot has: gnuplot-nox has pngcairo; a
    // build without cairo may have libgd's png; every gnuplot has svg.
    for (const auto& [terminal, extension] :
         {std::pair<std::string, std::string>{"pngcairo", "png"}, {"png", "png"}, {"svg", "svg"}}) {
        const int rc = run_program({program_, "-e", "set terminal " + terminal}, log, timeout_);
        if (rc == kTimedOut) {
            unavailable_ = "'" + program_ + "' did not answer within " + seconds_text(timeout_) + " (killed)";
            break;
        }
        if (rc == 127) {
            unavailable_ = "gnuplot not found ('" + program_ + "' could not be run; install gnuplot-nox)";
            break;
        }
        if (rc == 0) {
            terminal_ = terminal;
            extension_ = extension;
            break;
        }
    }
    if (unavailable_.empty() && terminal_.empty())
        unavailable_ = "'" + program_ + "' has none of the terminals pngcairo, png, svg";
    fs::remove(log, ec);
    return unavailable_;
}

int figure_height(size_t key_entries) {
    // The key sits below the plot, one entry a line of about 20 pixels at gnuplot's default font: a
    // figure of many groups grows so that its key does not cover the plot.
    if (key_entries <= 8) return 540;
    return static_cast<int>(std::min<size_t>(380 + 20 * key_entries, 2400));
}

namespace {

// A series' data file: a line per step, "step value" (or "step low high" for
// a band), leaving out what cannot be plotted (non-finite, or not positive on
// a log scale); the lines written.
size_t write_series_data(std::ostream& out, const series& s, bool log_y) {
    size_t n = 0;
    out << "# step\t" << gnuplot_text(s.title) << (s.band.empty() ? "" : " (low\thigh)") << "\n";
    auto plottable = [&](double v) { return std::isfinite(v) && (!log_y || v > 0); };
    char buf[96];
    for (const point& p : s.points) {
        if (!s.band.empty() || !plottable(p.value)) continue;
        std::snprintf(buf, sizeof buf, "%lld\t%.9g\n", static_cast<long long>(p.step), p.value);
        out << buf;
        ++n;
    }
    for (const band_point& b : s.band) {
        if (!plottable(b.low) || !plottable(b.high)) continue;
        std::snprintf(buf, sizeof buf, "%lld\t%.9g\t%.9g\n", static_cast<long long>(b.step), b.low, b.high);
        out << buf;
        ++n;
    }
    return n;
}

// A series' clause of the plot command: its data file, its style and its title in the key.
std::string plot_clause(const std::string& data, const series& s) {
    std::ostringstream plot;
    plot << gnuplot_quote(data);
    if (!s.band.empty()) plot << " using 1:2:3 with filledcurves fs transparent solid 0.2 noborder";
    else plot << " using 1:2 with " << (s.with_points ? "linespoints pt 7 ps 0.6 lw 2" : "lines lw 1.2");
    if (s.color > 0) plot << " lc " << s.color;
    if (s.dash > 1) plot << " dt " << s.dash;
    if (s.title.empty()) plot << " notitle";
    else plot << " title " << gnuplot_quote(s.title);
    return plot.str();
}

}  // namespace

bool plotter::draw(const figure& f, std::string& image, std::string& why) {
    figure_script script{f.stem, f.title, 960, 540, {}, {}};
    std::ostringstream plot;
    size_t drawn = 0, keyed = 0;
    for (size_t i = 0; i < f.lines.size(); ++i) {
        const series& s = f.lines[i];
        const std::string data = f.stem + "-" + std::to_string(i) + ".dat";
        std::ostringstream out;
        const size_t n = write_series_data(out, s, f.log_y);
        script.data.emplace_back(data, out.str());
        if (n == 0) continue;  // gnuplot refuses a file with no points
        plot << (drawn++ ? ", \\\n     " : "plot ") << plot_clause("data/" + data, s);
        if (!s.title.empty()) ++keyed;
    }
    if (drawn == 0) {
        timed_out_ = false;
        why = "no data to plot";
        return false;
    }
    script.height = figure_height(keyed);
    script.body = "set xlabel 'step'\nset ylabel " + gnuplot_quote(f.ylabel) + "\nset grid\nset key below\n" +
                  (f.log_y ? "set logscale y 2\n" : "") + plot.str() + "\n";
    return draw(script, image, why);
}

bool plotter::draw(const figure_script& f, std::string& image, std::string& why) {
    timed_out_ = false;
    if (!unavailable().empty()) {
        why = unavailable_;
        return false;
    }
    std::error_code ec;
    fs::create_directories(dir_ / "data", ec);
    for (const auto& [name, text] : f.data) {
        std::ofstream out(dir_ / "data" / name);
        out << text;
        if (!out) {
            why = (dir_ / "data" / name).string() + ": cannot write";
            return false;
        }
    }
    image = f.stem + "." + extension_;
    const std::string script = f.stem + ".gp";
    {
        std::ofstream gp(dir_ / script);
        // noenhanced: run names hold '_', which enhanced text would subscript.
        gp << "# " << gnuplot_text(f.title) << " (altgrad-host report). Redraw: cd into this folder, gnuplot "
           << script << "\n"
           << "set terminal " << terminal_ << " size " << f.width << "," << f.height << " noenhanced\n"
           << "set output " << gnuplot_quote(image) << "\n"
           << "set title " << gnuplot_quote(f.title) << "\n"
           << f.body;
        if (!gp) {
            why = (dir_ / script).string() + ": cannot write";
            return false;
        }
    }
    const fs::path log = dir_ / (f.stem + ".log");
    // The -e cd makes the script's relative paths work wherever the report is.
    const fs::path abs_dir = fs::absolute(dir_, ec);
    const int rc =
        run_program({program_, "-e", "cd " + gnuplot_quote(abs_dir.string()), script}, log, timeout_);
    timed_out_ = rc == kTimedOut;
    if (rc == kTimedOut) {
        why = "gnuplot did not finish " + script + " within " + seconds_text(timeout_) + " (killed)";
        return false;
    }
    if (rc != 0) {
        why = "gnuplot failed on " + script + " (exit status " + std::to_string(rc) + "; see " +
              (f.stem + ".log") + ")";
        return false;
    }
    if (!fs::exists(dir_ / image, ec) || fs::file_size(dir_ / image, ec) == 0) {
        why = "gnuplot wrote no " + image + " (see " + f.stem + ".log)";
        return false;
    }
    fs::remove(log, ec);
    return true;
}

}  // namespace altgrad::host::report
