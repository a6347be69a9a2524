// Reading a whole file the host was handed, bounded. Files travel between
// people (run directories, plugin folders, configs), and a manifest that never
// ends (/dev/zero, a FIFO) or a multi-gigabyte "config" must be refused, not
// read until memory runs out or forever. Every whole-file read of the host goes
// through read_file_text with the limit of its kind, below.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace altgrad::host {

// The limits, by kind of file (far above any real one).
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kManifestLimit = 1 * kMiB;        // a plugin's manifest.toml
constexpr size_t kConfigLimit = 16 * kMiB;         // run configs, sweep files, hypotheses files
constexpr size_t kRunRecordLimit = 256 * kMiB;     // summary.json, state.json, catalog.json
constexpr size_t kMetricsLimit = 4096 * kMiB;      // metrics.jsonl
constexpr size_t kPluginStateLimit = 256 * kMiB;   // an intervention's saved state
constexpr size_t kTensorFileLimit = 16384 * kMiB;  // quantize's and gemm's inputs (.npy, raw, text)
constexpr size_t kCorpusFileLimit = 16384 * kMiB;  // a text corpus file, nanoGPT's meta.pkl

// The bytes of `file`. Throws host::error, naming the file: a folder; a file
// that cannot be opened or read; one of more than `limit` bytes ("more than
// 1 MiB: a WHAT is at most that"), found by reading at most limit + 1 bytes.
std::string read_file_text(const std::filesystem::path& file, size_t limit, const std::string& what);

// "1 MiB", "16 GiB": a limit as the messages print it.
std::string size_text(size_t bytes);

}  // namespace altgrad::host
