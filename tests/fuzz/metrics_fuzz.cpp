// A run's metrics.jsonl: the input is the file's text, through parse_metrics
// (read_metrics' parser), which reads what it can and reports the rest as
// problems: it may not throw at all.
#include "fuzz_support.hpp"
#include "run/files.hpp"

using namespace altgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const host::run::metrics_contents m = host::run::parse_metrics(fuzz::bytes_of(data, size));
    if (m.problems.size() > 6)
        fuzz::finding("more than 5 problems and a count: " + std::to_string(m.problems.size()));
    return 0;
}
