// A run's catalog.json: the input is the file's text, through parse_catalog
// (read_catalog's parser); a host::error refuses it.
#include "fuzz_support.hpp"
#include "run/files.hpp"

using namespace altgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::refusing_only_with_host_errors(
        [&] { (void)host::run::parse_catalog(fuzz::bytes_of(data, size), "catalog.json"); });
    return 0;
}
