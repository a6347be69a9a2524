#include "util/file_tree.hpp"

#include <cerrno>
#include <cstdio>

#include <ftw.h>
#include <sys/stat.h>

namespace altgrad::host {

namespace {

// nftw visits a folder's entries before the folder itself (FTW_DEPTH), so each
// folder is empty when its turn comes. A non-zero return stops the walk.
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
    return std::remove(path) == 0 ? 0 : errno;
}

}  // namespace

void remove_tree(const std::filesystem::path& path, std::error_code& ec) noexcept {
    ec.clear();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno != ENOENT) ec.assign(errno, std::generic_category());
        return;
    }
    const int r = ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (r > 0) ec.assign(r, std::generic_category());
    else if (r < 0) ec.assign(errno, std::generic_category());
}

void remove_tree(const std::filesystem::path& path) {
    std::error_code ec;
    remove_tree(path, ec);
    if (ec) throw std::filesystem::filesystem_error("cannot remove", path, ec);
}

}  // namespace altgrad::host
