// Bounded whole-file reads (file_text.hpp).
#include "util/file_text.hpp"

#include <fstream>
#include <system_error>

#include "util/error.hpp"

namespace altgrad::host {

std::string size_text(size_t bytes) {
    if (bytes >= 1024 * kMiB && bytes % (1024 * kMiB) == 0)
        return std::to_string(bytes / (1024 * kMiB)) + " GiB";
    if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
    return std::to_string(bytes) + " bytes";
}

std::string read_file_text(const std::filesystem::path& file, size_t limit, const std::string& what) {
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec))
        throw error(file.string() + ": is a folder, expected " + what);
    std::ifstream in(file, std::ios::binary);
    if (!in) throw error(file.string() + ": cannot read");
    std::string text;
    char buffer[1 << 16];
    while (in) {
        in.read(buffer, sizeof buffer);
        text.append(buffer, static_cast<size_t>(in.gcount()));
        if (text.size() > limit)
            throw error(file.string() + ": more than " + size_text(limit) + " (" + what +
                        " is at most that)");
    }
    if (in.bad()) throw error(file.string() + ": cannot read");
    return text;
}

}  // namespace altgrad::host
