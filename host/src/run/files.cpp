// The run directory's paths, checked writes, and the checkpoint folders'
// files (listing, sizes and CRC-32s); the records' files have their own
// sources: metrics_file.cpp, summary_file.cpp, state_file.cpp, catalog_file.cpp.
#include "run/files.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <boost/crc.hpp>

namespace altgrad::host::run {

// ---- paths ----------------------------------------------------------------------------

fs::path config_file(const fs::path& run_dir) { return run_dir / "config.toml"; }
fs::path metrics_file(const fs::path& run_dir) { return run_dir / "metrics.jsonl"; }
fs::path summary_file(const fs::path& run_dir) { return run_dir / "summary.json"; }
fs::path reports_dir(const fs::path& run_dir) { return run_dir / "reports"; }
fs::path checkpoints_dir(const fs::path& run_dir) { return run_dir / "checkpoints"; }
fs::path state_file(const fs::path& checkpoint) { return checkpoint / "state.json"; }
fs::path catalog_file(const fs::path& run_dir) { return run_dir / "catalog.json"; }

fs::path checkpoint_dir(const fs::path& run_dir, int64_t step) {
    char name[32];
    std::snprintf(name, sizeof name, "step_%07lld", static_cast<long long>(step));
    return checkpoints_dir(run_dir) / name;
}

std::vector<checkpoint_ref> complete_checkpoints(const fs::path& run_dir) {
    std::vector<checkpoint_ref> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(checkpoints_dir(run_dir), ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("step_", 0) != 0 || n.size() == 5) continue;
        char* end = nullptr;
        const long long step = std::strtoll(n.c_str() + 5, &end, 10);
        if (end == nullptr || *end != '\0' || step < 0) continue;
        if (fs::is_regular_file(state_file(e.path()), ec)) found.push_back({step, e.path(), false});
        else if (fs::is_regular_file(e.path() / "state.toml", ec)) found.push_back({step, e.path(), true});
    }
    std::sort(found.begin(), found.end(),
              [](const checkpoint_ref& a, const checkpoint_ref& b) { return a.step < b.step; });
    return found;
}

std::optional<checkpoint_ref> latest_checkpoint(const fs::path& run_dir) {
    std::vector<checkpoint_ref> all = complete_checkpoints(run_dir);
    if (all.empty()) return std::nullopt;
    return all.back();
}

void write_file(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw error(path.string() + ": cannot write (disk full?)");
}

void write_file_atomically(const fs::path& path, const std::string& text) {
    const fs::path tmp = path.string() + ".tmp";
    try {
        write_file(tmp, text);
    } catch (const error&) {
        std::error_code ec;
        fs::remove(tmp, ec);
        throw error(path.string() + ": cannot write (disk full?)");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw error(path.string() + ": cannot write (" + ec.message() + ")");
}

namespace {

std::optional<file_record> fingerprint(const fs::path& file, const std::string& relative) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return std::nullopt;
    boost::crc_32_type crc;
    file_record r;
    r.path = relative;
    char buf[1 << 16];
    while (in) {
        in.read(buf, sizeof buf);
        const std::streamsize n = in.gcount();
        crc.process_bytes(buf, static_cast<size_t>(n));
        r.bytes += static_cast<uint64_t>(n);
    }
    if (in.bad()) return std::nullopt;
    r.crc32 = crc.checksum();
    return r;
}

}  // namespace

std::vector<file_record> checkpoint_files(const fs::path& checkpoint) {
    std::vector<file_record> out;
    for (const auto& e : fs::recursive_directory_iterator(checkpoint)) {
        if (!e.is_regular_file()) continue;
        const std::string relative = fs::relative(e.path(), checkpoint).generic_string();
        if (relative == "state.json") continue;
        const std::optional<file_record> r = fingerprint(e.path(), relative);
        if (!r) throw error(e.path().string() + ": cannot read");
        out.push_back(*r);
    }
    std::sort(out.begin(), out.end(),
              [](const file_record& a, const file_record& b) { return a.path < b.path; });
    return out;
}

void verify_checkpoint_files(const fs::path& checkpoint, const std::vector<file_record>& files) {
    for (const file_record& want : files) {
        const fs::path file = checkpoint / want.path;
        const std::optional<file_record> got = fingerprint(file, want.path);
        if (!got) throw error(file.string() + ": missing or unreadable (the checkpoint is incomplete)");
        if (got->bytes != want.bytes)
            throw error(file.string() + ": " + std::to_string(got->bytes) +
                        " bytes, but state.json recorded " + std::to_string(want.bytes) +
                        " (the file is damaged or was replaced)");
        if (got->crc32 != want.crc32)
            throw error(file.string() +
                        ": its contents changed since the checkpoint was written (CRC-32 mismatch: the "
                        "file is damaged)");
    }
}

}  // namespace altgrad::host::run
