// ue8m0: OCP Microscaling Formats (MX) v1.0, the E8M0 scale format: an
// unsigned power of two 2^(e-127), e = 0..254, NaN at 0xFF, no zero, no Inf.
#include <altgrad/sdk/codebooks.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {
altgrad::sdk::power_of_two_format make(const altgrad::sdk::param_view&) {
    return altgrad::sdk::power_of_two_codebook(8, 127, true);
}
}  // namespace

ALTGRAD_FORMAT_PLUGIN(make)
