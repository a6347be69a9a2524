// A checkpoint's state.json (what --resume restores and the file list it
// verifies): the input is the file's text, through parse_checkpoint_state
// (read_checkpoint_state's parser). No accepted file path may leave the
// checkpoint folder.
#include "fuzz_support.hpp"
#include "run/files.hpp"

using namespace altgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::refusing_only_with_host_errors([&] {
        const host::run::checkpoint_state s =
            host::run::parse_checkpoint_state(fuzz::bytes_of(data, size), "state.json");
        for (const host::run::file_record& f : s.files)
            if (f.path.empty() || f.path[0] == '/' || f.path.find("..") != std::string::npos)
                fuzz::finding("accepted a file path outside the checkpoint folder: " + f.path);
    });
    return 0;
}
