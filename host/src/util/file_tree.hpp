// Removing a folder and everything in it, without std::filesystem::remove_all.
#pragma once

#include <filesystem>
#include <system_error>

namespace altgrad::host {

// Removes `path` and, if it is a folder, everything below it; symbolic links
// are removed, never followed. A path that does not exist is no error. On an
// error `ec` holds the first one and the rest of the tree may remain.
//
// Why not std::filesystem::remove_all: PyTorch's wheels (the LibTorch of the
// GPU machines) export their own copies of libstdc++'s directory iterators,
// compiled by an older GCC (pytorch/pytorch#133437). libstdc++'s remove_all
// then runs partly on those copies, and the host crashed in it at its first
// checkpoint rotation (docs/cuda.md). This walks the tree with POSIX nftw.
void remove_tree(const std::filesystem::path& path, std::error_code& ec) noexcept;

// The same; throws std::filesystem::filesystem_error naming the path.
void remove_tree(const std::filesystem::path& path);

}  // namespace altgrad::host
