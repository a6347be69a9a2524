// Plugin manifests: the input is a manifest.toml's text, through
// parse_manifest (read_manifest's parser) in a scratch folder that holds an
// empty file for each bundled plugin's library, so the bundled manifests in
// the corpus get past the library check.
#include <filesystem>
#include <fstream>

#include "fuzz_support.hpp"
#include "plugins/manifest.hpp"

using namespace altgrad;
namespace fs = std::filesystem;

namespace {
fs::path manifest_path;  // in the scratch folder

void remove_scratch_folder() {
    std::error_code ec;
    fs::remove_all(manifest_path.parent_path(), ec);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    std::string folder = (fs::temp_directory_path() / "altgrad-fuzz-manifest-XXXXXX").string();
    if (mkdtemp(folder.data()) == nullptr) fuzz::finding("cannot create a scratch folder in " + folder);
    manifest_path = fs::path(folder) / "manifest.toml";
    std::atexit(remove_scratch_folder);
    const std::string libraries = ALTGRAD_FUZZ_PLUGIN_LIBRARIES;  // "a.so,b.so,"
    for (size_t pos = 0, comma; (comma = libraries.find(',', pos)) != std::string::npos; pos = comma + 1)
        std::ofstream(fs::path(folder) / libraries.substr(pos, comma - pos));
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::refusing_only_with_host_errors(
        [&] { (void)host::parse_manifest(fuzz::bytes_of(data, size), manifest_path); });
    return 0;
}
