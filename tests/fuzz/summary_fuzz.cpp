// A run's summary.json: the input is the file's text, through parse_summary
// (read_summary's parser); summary_error (a host::error) refuses it.
#include "fuzz_support.hpp"
#include "run/files.hpp"

using namespace altgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::refusing_only_with_host_errors(
        [&] { (void)host::run::parse_summary(fuzz::bytes_of(data, size), "summary.json"); });
    return 0;
}
