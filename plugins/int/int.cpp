// int: two's-complement integers k of 2..16 bits, value k * 2^-fraction_bits,
// symmetric (k = -2^(bits-1) left out, its code NaN) or the full range: INT8
// and INT4 baselines, and OCP MX's INT8 element (bits=8 fraction_bits=6).
// fixed_point_format (fixed_point.hpp) does the arithmetic; docs/formats.md
// has the exact encodings.
#include <string>

#include <altgrad/sdk/fixed_point.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {

// The descriptor's half of each parameter; the manifest's [parameters.*]
// tables declare the same keys and types.
const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "bits", ALTGRAD_PARAM_INT, "Code width"},
    {sizeof(altgrad_param_spec), "symmetric", ALTGRAD_PARAM_BOOL, "Leave out -2^(bits-1)"},
    {sizeof(altgrad_param_spec), "fraction_bits", ALTGRAD_PARAM_INT, "The step is 2^-fraction_bits"},
};

[[noreturn]] void refuse(const std::string& why) {
    throw altgrad::sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, why);
}

altgrad::sdk::fixed_point_format make_int(const altgrad::sdk::param_view& p) {
    const int64_t bits = p.get_int("bits"), fraction_bits = p.get_int("fraction_bits");
    // The host checks the manifest's ranges first; another caller may not.
    if (bits < 2 || bits > 16) refuse("parameter 'bits': " + std::to_string(bits) + " is not 2..16");
    if (fraction_bits < 0 || fraction_bits > 120)
        refuse("parameter 'fraction_bits': " + std::to_string(fraction_bits) + " is not 0..120");
    return altgrad::sdk::fixed_point_format(
        {static_cast<int>(bits), static_cast<int>(fraction_bits), p.get_bool("symmetric")});
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_FORMAT_PLUGIN_WITH_PARAMS(make_int, kParams, sizeof kParams / sizeof kParams[0])
