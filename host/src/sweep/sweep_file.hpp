// A sweep file (docs/sweeps.md): base run configs, axes of `--set` overrides
// (a grid and explicit points) and seeds, expanded into runs, each an ordinary
// run directory with a stable name derived from its overrides. No LibTorch:
// `sweep` only plans here; the runs are `altgrad-host run` processes.
//
//   name = "formats"
//   configs = ["../e5m2_short.toml"]       # relative to the sweep file's folder
//   seeds = [42, 1]                         # optional: default the config's training.seed
//   set = ["training.threads=1"]            # optional: every run, before the point's
//   [grid]                                  # optional: every combination, keys in file order
//   "quantization.scaling" = ["none", "delayed"]
//   nodes = 1                               # optional: each run's ranks, nodes x
//   ntasks_per_node = 2                     #   ntasks_per_node (docs/distributed.md)
//   [[point]]                               # optional, repeatable
//   set = ["quantization.weight_format=e4m3"]
//   ntasks_per_node = 4                     # optional: this point's runs' own
//
// Errors: one line naming the sweep file and the key (or the point), as
// host::error, e.g.
//   sweeps/x.toml: key 'seeds': value 2: expected an integer 0..9223372036854775807, got "one"
//   sweeps/x.toml: point 3 (quantization.scaling=bad), seed 42: configs/e5m2_short.toml: --set ...: key ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace altgrad::host::sweep {

namespace fs = std::filesystem;

// How many ranks one run trains on (docs/distributed.md), nodes x
// ntasks_per_node: `sweep --slurm` asks Slurm for that many nodes and tasks
// per node and starts the ranks with srun; a sweep on this machine runs them
// all here (`run --nproc`), with the same bits.
struct rank_layout {
    int64_t nodes = 1, ntasks_per_node = 1;  // 1..1024 each
    int64_t ranks() const { return nodes * ntasks_per_node; }
    bool operator==(const rank_layout& o) const {
        return nodes == o.nodes && ntasks_per_node == o.ntasks_per_node;
    }
    bool operator<(const rank_layout& o) const {
        return nodes != o.nodes ? nodes < o.nodes : ntasks_per_node < o.ntasks_per_node;
    }
};

// The file as written (paths resolved against its folder).
struct sweep_spec {
    fs::path file;                  // the sweep file
    std::string name;               // [A-Za-z0-9_.-]+
    std::vector<fs::path> configs;  // >= 1, the sweep file's folder / as written
    // By config: a config written as { path = "...", set = [...] } has
    // overrides of its own, applied after `set` (empty for a plain path).
    std::vector<std::vector<std::string>> config_sets;
    std::vector<int64_t> seeds;    // empty: each config's own training.seed
    std::vector<std::string> set;  // "KEY=VALUE", applied to every run first
    // [grid]: key -> values rendered as --set text, keys in file order.
    std::vector<std::pair<std::string, std::vector<std::string>>> grid;
    std::vector<std::vector<std::string>> points;  // [[point]] set lists, "KEY=VALUE" each
    // [[point]] name = "...", by point: what its runs are called instead of
    // its overrides ([A-Za-z0-9_.=+-]+); "": named from its overrides.
    std::vector<std::string> point_names;
    // nodes = N, ntasks_per_node = T at the top: every run's layout; a
    // [[point]]'s own keys override them for its runs (point_layouts, by
    // point). The grid cannot vary them.
    rank_layout layout;
    std::vector<rank_layout> point_layouts;
};

// Parses the sweep file's text; `file` names it in errors and anchors the
// config paths. Throws host::error.
sweep_spec parse_sweep(const std::string& text, const fs::path& file);
// The same from the file.
sweep_spec load_sweep(const fs::path& file);

// One point of the sweep: its overrides ("KEY=VALUE"), in order.
using point = std::vector<std::string>;
// The grid's combinations (the first key varies slowest), then the explicit
// points; one point without overrides when there are neither. More than
// 10000 combinations or 64 grid keys is an error (host::error naming the key 'grid').
std::vector<point> expand_points(const sweep_spec& spec);

// "point 3 (quantization.scaling=delayed, quantization.shadow_weights=true)", 1-based as people count.
std::string describe_point(const std::vector<point>& points, size_t index);

struct sweep_run {
    size_t index = 0;         // 0-based: config, then point, then seed
    fs::path config;          // the base config file
    std::string config_name;  // its name (the file's stem unless it sets one)
    size_t point = 0;         // into expand_points()
    int64_t seed = 0;
    std::string name;                    // the run directory's name
    std::vector<std::string> overrides;  // every --set of the run, in order
    rank_layout layout;                  // its ranks
};

// Every run: for each config, for each point, for each seed. Loads each base
// config (for its name and seed) and then each run's resolved config, so a
// bad key or value fails the whole sweep before anything runs; two runs of
// one name are an error naming both. Throws host::error.
std::vector<sweep_run> plan_runs(const sweep_spec& spec);

// The run name: config name, "-KEY=VALUE" per override of the point (KEY the
// last dotted component unless that is ambiguous among `all_keys`, the keys
// every point of the sweep sets), or "-NAME" for a point with a name of its
// own (`point_name`), then "-s<seed>"; characters outside [A-Za-z0-9_.=+-]
// become '_'.
std::string run_name(const std::string& config_name, const point& overrides,
                     const std::vector<std::string>& all_keys, int64_t seed,
                     const std::string& point_name = "");

}  // namespace altgrad::host::sweep
