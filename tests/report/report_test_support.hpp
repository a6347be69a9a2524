// What the report's tests share: a scratch folder per test, files written and
// read whole, and EXPECT_CONTAINS.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

// gtest only (gmock is a separate Debian package): "haystack contains needle".
#define EXPECT_CONTAINS(haystack, needle)                                                  \
    do {                                                                                   \
        const std::string h_ = (haystack), n_ = (needle);                                  \
        EXPECT_NE(h_.find(n_), std::string::npos) << "missing: " << n_ << "\nin:\n" << h_; \
    } while (0)

namespace altgrad::host::report::test_support {

namespace fs = std::filesystem;

// A folder of the test's own under the temporary folder, removed with it.
class scratch {
public:
    scratch() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = fs::temp_directory_path() / ("altgrad-report-" + std::string(info->test_suite_name()) + "-" +
                                             info->name() + "-" + std::to_string(::getpid()));
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~scratch() { fs::remove_all(path_); }
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

inline void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

inline std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

inline bool have_gnuplot() { return std::system("gnuplot --version > /dev/null 2>&1") == 0; }

}  // namespace altgrad::host::report::test_support
