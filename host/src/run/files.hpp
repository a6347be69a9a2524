// One writer and one reader for each file of a run directory (run/records.hpp
// says what each holds). JSON goes through nlohmann-json. Writers check every
// write and throw host::error naming the file; readers throw host::error
// naming the file, the line where there is one, and the key, except
// read_metrics, which reads what it can (a run may have been killed mid-line)
// and says what it skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "run/records.hpp"
#include "util/error.hpp"

namespace altgrad::host::run {

namespace fs = std::filesystem;

// ---- paths ------------------------------------------------------------------------

fs::path config_file(const fs::path& run_dir);                   // config.toml
fs::path metrics_file(const fs::path& run_dir);                  // metrics.jsonl
fs::path summary_file(const fs::path& run_dir);                  // summary.json
fs::path reports_dir(const fs::path& run_dir);                   // reports/
fs::path checkpoints_dir(const fs::path& run_dir);               // checkpoints/
fs::path checkpoint_dir(const fs::path& run_dir, int64_t step);  // checkpoints/step_NNNNNNN
fs::path state_file(const fs::path& checkpoint);                 // step_N/state.json
fs::path catalog_file(const fs::path& run_dir);                  // catalog.json

// A complete checkpoint folder: step_N holding state.json (written last). A
// folder holding the state.toml of hosts before state.json is `legacy`: the
// report counts it, a resume refuses it.
struct checkpoint_ref {
    int64_t step = 0;
    fs::path dir;
    bool legacy = false;
};
std::vector<checkpoint_ref> complete_checkpoints(const fs::path& run_dir);  // oldest first
std::optional<checkpoint_ref> latest_checkpoint(const fs::path& run_dir);

// Writes `bytes` to `path`, checked: a short write (a full disk) throws
// host::error naming the file.
void write_file(const fs::path& path, const std::string& bytes);

// The same through a temporary file and a rename, so a reader sees the old
// file or the new one, never half of one.
void write_file_atomically(const fs::path& path, const std::string& text);

// ---- metrics.jsonl ---------------------------------------------------------------

class metrics_writer {
public:
    // Opens `file` for appending (a resume) or truncates it (a new run);
    // lines hold `catalog`'s metrics, in its order.
    metrics_writer(fs::path file, std::string run_id, bool append, metric_catalog catalog = {});
    // One line, flushed: a line a killed run wrote is on disk.
    void write(const metrics_line& line);

private:
    fs::path file_;
    std::string run_id_;
    metric_catalog catalog_;
    std::ofstream out_;
};

// The text of one metrics line (without the newline).
std::string metrics_line_text(const metrics_line& line, const std::string& run_id,
                              const metric_catalog& catalog = {});

struct metrics_contents {
    std::vector<metrics_line> lines;  // in file order
    std::string run_id;               // of the last line that has one
    // One line each, "metrics.jsonl: line 7 truncated (skipped)": the first
    // few bad lines, then a count.
    std::vector<std::string> problems;
};
// Lines without "kind" (hosts before it) are told apart by their keys; lines
// of a kind this host does not know (a newer one) are skipped silently.
metrics_contents read_metrics(const fs::path& file);
// The same from the file's text.
metrics_contents parse_metrics(const std::string& text);

// What a metrics event adds to a run's history where no summary gives it:
// a format switch, an intervention's action.
void tally_event(const event_line& e, std::vector<format_switch>& switches,
                 std::map<std::string, std::map<std::string, int64_t>>& interventions);

// Keeps the lines of steps <= last_step (a resumed run rewrites what follows);
// a half-written line goes too.
void truncate_metrics(const fs::path& file, int64_t last_step);

// ---- catalog.json -----------------------------------------------------------------

// The metrics a run writes (run/catalog.hpp), written when it starts.
void write_catalog(const fs::path& run_dir, const metric_catalog& catalog);
// Throws host::error naming the file and key.
metric_catalog read_catalog(const fs::path& file);
// The same from the file's text; `name` stands for the file in errors.
metric_catalog parse_catalog(const std::string& text, const std::string& name);
// The catalog of a run directory: its catalog.json, or for a run of a host
// before it, the host's metrics. A damaged catalog.json is a line in `problems`.
metric_catalog catalog_of(const fs::path& run_dir, std::vector<std::string>& problems);

// ---- summary.json -----------------------------------------------------------------

void write_summary(const fs::path& run_dir, const summary_record& s);
// Throws summary_error "DIR/summary.json: ..." naming the line or key;
// `truncated` tells a half-written file (a run killed while writing it).
struct summary_error : error {
    summary_error(const std::string& what, bool cut_short) : error(what), truncated(cut_short) {}
    bool truncated;
};
summary_record read_summary(const fs::path& file);
// The same from the file's text; `name` stands for the file in errors.
summary_record parse_summary(const std::string& text, const std::string& name);

// ---- checkpoints/step_N/state.json ---------------------------------------------------

// Size and CRC-32 of every file below `checkpoint` but state.json, sorted by path.
std::vector<file_record> checkpoint_files(const fs::path& checkpoint);
// Throws host::error naming the first file that is missing, of another size,
// or whose contents changed since `files` was taken.
void verify_checkpoint_files(const fs::path& checkpoint, const std::vector<file_record>& files);

void write_checkpoint_state(const fs::path& checkpoint, const checkpoint_state& s);
// Refuses (host::error naming the file and key) a state that is malformed,
// of another layout version, or whose step is not the folder's.
checkpoint_state read_checkpoint_state(const fs::path& checkpoint);
// The same from state.json's text; `name` stands for the file in errors.
checkpoint_state parse_checkpoint_state(const std::string& text, const std::string& name);

}  // namespace altgrad::host::run
