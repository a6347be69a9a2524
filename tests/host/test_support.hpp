// Helpers for host tests: scratch plugin folders and running the binary.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace altgrad::test {

namespace fs = std::filesystem;

inline const fs::path kBundled = ALTGRAD_BUNDLED_PLUGIN_DIR;
inline const fs::path kTestPlugins = ALTGRAD_TEST_PLUGIN_DIR;
inline const std::string kHost = ALTGRAD_HOST_BINARY;

// A fresh folder under the system temp dir, removed at destruction.
class scratch_dir {
public:
    scratch_dir() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = fs::temp_directory_path() / ("altgrad-test-" + std::string(info->test_suite_name()) + "-" +
                                             info->name() + "-" + std::to_string(::getpid()));
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~scratch_dir() { fs::remove_all(path_); }
    const fs::path& path() const { return path_; }

    // <dir>/<folder>/manifest.toml with `text`, plus a copy of `library`
    // (when given) under `library_name` in the same folder.
    fs::path add_plugin(const std::string& folder, const std::string& text, const fs::path& library = {},
                        const std::string& library_name = "") const {
        const fs::path d = path_ / folder;
        fs::create_directories(d);
        std::ofstream(d / "manifest.toml") << text;
        if (!library.empty())
            fs::copy_file(library, d / (library_name.empty() ? library.filename().string() : library_name),
                          fs::copy_options::overwrite_existing);
        return d / "manifest.toml";
    }

private:
    fs::path path_;
};

inline fs::path bundled_library(const std::string& name) {
    return kBundled / name / ("libaltgrad_" + name + ".so");
}

inline std::string format_manifest(const std::string& name, const std::string& library,
                                   const std::string& version = "1.0.0", const std::string& abi = "1.0") {
    return "[plugin]\nkind = \"format\"\nname = \"" + name + "\"\nversion = \"" + version +
           "\"\nabi_version = \"" + abi + "\"\nlibrary = \"" + library + "\"\ndescription = \"test\"\n";
}

// A plugin folder holding e4m3 (good) and the test plugins whose libraries
// crash, hang or exit while loading, plus "truncated": e5m2's library cut to
// half its size, as an interrupted copy leaves it. Names each expected reason.
inline std::vector<std::pair<std::string, std::string>> add_plugins_that_die_loading(const scratch_dir& dir) {
    dir.add_plugin("e4m3", format_manifest("e4m3", "libaltgrad_e4m3.so"), bundled_library("e4m3"));
    for (const char* name : {"broken_load_segv", "broken_entry_abort", "broken_entry_loop",
                             "broken_entry_exit", "broken_entry_data"})
        fs::copy(kTestPlugins / name, dir.path() / name);
    dir.add_plugin("truncated", format_manifest("e5m2", "libaltgrad_e5m2.so"));
    const fs::path whole = bundled_library("e5m2");
    std::ifstream in(whole, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bytes.resize(bytes.size() / 2);
    std::ofstream(dir.path() / "truncated" / "libaltgrad_e5m2.so", std::ios::binary) << bytes;
    return {{"broken_load_segv", "signal 11 (Segmentation fault)"},
            {"broken_entry_abort", "signal 6 (Aborted)"},
            {"broken_entry_loop", "still running after"},
            {"broken_entry_exit", "exited (status 0)"},
            {"broken_entry_data", "signal 11 (Segmentation fault)"},
            {"e5m2", "signal 7 (Bus error)"}};
}

struct run_result {
    int exit_code = -1;
    std::string out;  // stdout and stderr together
};

// Run the host with `args` (shell-quoted by the caller), feeding `input`;
// stderr goes where `stderr_to` says (a shell redirection target: "&1" joins
// it to `out`, "/dev/null" leaves stdout alone, e.g. for output to parse), and
// stdout to `stdout_to` when given (e.g. /dev/full: then `out` holds stderr).
inline run_result run_host(const std::string& args, const std::string& input = "",
                           const std::string& stderr_to = "&1", const std::string& stdout_to = "") {
    const fs::path in = fs::temp_directory_path() / ("altgrad-test-input-" + std::to_string(::getpid()));
    std::ofstream(in) << input;
    const std::string cmd = kHost + " " + args + " < " + in.string() + " 2>" + stderr_to +
                            (stdout_to.empty() ? "" : " > " + stdout_to);
    run_result r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    fs::remove(in);
    return r;
}

}  // namespace altgrad::test
