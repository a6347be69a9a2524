// nanoGPT's meta.pkl: the input is the file's bytes, through
// parse_nanogpt_meta. An accepted file has 1..65536 entries, one per id.
#include "data/pickle.hpp"
#include "fuzz_support.hpp"

using namespace altgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::refusing_only_with_host_errors([&] {
        const host::data::nanogpt_meta m =
            host::data::parse_nanogpt_meta(fuzz::bytes_of(data, size), "meta.pkl");
        if (m.vocab_size < 1 || m.vocab_size > 65536 || m.itos.size() != static_cast<size_t>(m.vocab_size))
            fuzz::finding("accepted vocab_size " + std::to_string(m.vocab_size) + " with " +
                          std::to_string(m.itos.size()) + " entries");
    });
    return 0;
}
