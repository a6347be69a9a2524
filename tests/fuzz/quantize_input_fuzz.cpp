// The quantize command's standard input: whitespace-separated numbers through
// read_floats. Every number read must print (as quantize prints, "%a") and
// parse back to the same float32.
#include <cmath>
#include <cstring>
#include <sstream>

#include "fuzz_support.hpp"
#include "util/numbers.hpp"

using namespace altgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::istringstream in(fuzz::bytes_of(data, size));
    fuzz::refusing_only_with_host_errors([&] {
        for (const float x : host::read_floats(in, "quantize: standard input", size_t{1} << 20)) {
            const std::string printed = host::hex_float(static_cast<double>(x));
            const std::optional<float> back = host::parse_float(printed);
            if (!back) fuzz::finding("parse_float refuses the printed " + printed);
            if (std::isnan(x) ? !std::isnan(*back) : std::memcmp(&x, &*back, sizeof x) != 0)
                fuzz::finding(printed + " does not read back as the value printed");
        }
    });
    return 0;
}
