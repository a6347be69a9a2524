// exmy_param: one library for every sign-magnitude ExMy float, with the shape
// chosen by parameters:
//
//   exponent_bits  int     1..8      default 4
//   mantissa_bits  int     0..23     default 3
//   bias           int  -200..200    default 7
//   specials       string            default "ieee": ieee | finite_nan | p3109 | finite
//
// So the defaults are an IEEE-style E4M3 (max 240), and
//   exponent_bits=5 mantissa_bits=2 bias=15                      is OCP E5M2,
//   exponent_bits=4 mantissa_bits=3 bias=7  specials=finite_nan  is OCP E4M3FN,
//   exponent_bits=2 mantissa_bits=1 bias=1  specials=finite      is OCP MX E2M1,
//   exponent_bits=1 mantissa_bits=6 bias=1  specials=p3109       is P3109 binary8p7.
//
// The host has already checked every value against the manifest (type, range,
// choices) before make() runs. What only the plugin can know, whether a
// combination is a valid format, exmy_format's constructor checks; make()
// adds the parameter values to its message.
#include <string>

#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {

// The descriptor's half of each parameter: key and type (and a description).
// Static storage: the host reads these after the entry function returns. The
// manifest's [parameters.*] tables must declare exactly these keys and types.
const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "exponent_bits", ALTGRAD_PARAM_INT, "Exponent field width"},
    {sizeof(altgrad_param_spec), "mantissa_bits", ALTGRAD_PARAM_INT, "Trailing significand field width"},
    {sizeof(altgrad_param_spec), "bias", ALTGRAD_PARAM_INT, "Exponent bias"},
    {sizeof(altgrad_param_spec), "specials", ALTGRAD_PARAM_STRING, "Special-value convention"},
};

altgrad::sdk::exmy_specials parse_specials(const std::string& s) {
    using altgrad::sdk::exmy_specials;
    if (s == "ieee") return exmy_specials::ieee;
    if (s == "finite_nan") return exmy_specials::finite_nan;
    if (s == "p3109") return exmy_specials::p3109;
    if (s == "finite") return exmy_specials::finite;
    // Unreachable through the host (it checks `choices`), but create() may be
    // called by other hosts and tools: never trust a parameter blindly.
    throw altgrad::sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                                     "parameter 'specials': unknown convention \"" + s + "\"");
}

altgrad::sdk::exmy_format make_exmy(const altgrad::sdk::param_view& params) {
    const int64_t e = params.get_int("exponent_bits");
    const int64_t m = params.get_int("mantissa_bits");
    const int64_t bias = params.get_int("bias");
    const std::string specials = params.get_string("specials");
    const std::string given = "exponent_bits=" + std::to_string(e) + " mantissa_bits=" + std::to_string(m) +
                              " bias=" + std::to_string(bias) + " specials=" + specials;
    try {
        return altgrad::sdk::exmy_format(
            {static_cast<int>(e), static_cast<int>(m), static_cast<int>(bias), parse_specials(specials)});
    } catch (const altgrad::sdk::plugin_error& err) {
        // E.g. "exmy: bias 200 puts the smallest normal below float32's".
        throw altgrad::sdk::plugin_error(err.status(), std::string(err.what()) + " (" + given + ")");
    }
}

}  // namespace

// The name, version and description are manifest.toml's (altgrad_add_plugin reads them).
ALTGRAD_FORMAT_PLUGIN_WITH_PARAMS(make_exmy, kParams, sizeof kParams / sizeof kParams[0])
