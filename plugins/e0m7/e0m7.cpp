// e0m7: two's-complement Q0.7 fixed point. No exponent at all, so not an
// ExMy format: codes are int8 values k, the value is k / 128.
#include <altgrad/sdk/fixed_point.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {
altgrad::sdk::fixed_point_format make(const altgrad::sdk::param_view&) {
    return altgrad::sdk::fixed_point_format({8, 7});
}
}  // namespace

ALTGRAD_FORMAT_PLUGIN(make)
