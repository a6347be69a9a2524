// float: any binary floating-point format of at most 32 bits, its shape given
// by parameters (manifest.toml; docs/formats.md has the exact encodings and
// every bundled float format as a set of them). exmy_format (exmy.hpp) does
// all the arithmetic; this file maps the parameters onto an exmy_spec, picks
// the standard bias, and words what exmy_format refuses in terms of them.
#include <string>

#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {

using altgrad::sdk::exmy_specials;

// The descriptor's half of each parameter; the manifest's [parameters.*]
// tables declare the same keys and types.
const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "exponent_bits", ALTGRAD_PARAM_INT, "Exponent field width E"},
    {sizeof(altgrad_param_spec), "mantissa_bits", ALTGRAD_PARAM_INT, "Trailing significand field width M"},
    {sizeof(altgrad_param_spec), "bias", ALTGRAD_PARAM_INT, "Exponent bias; 128: the standard one"},
    {sizeof(altgrad_param_spec), "subnormals", ALTGRAD_PARAM_BOOL, "Subnormals in exponent field 0"},
    {sizeof(altgrad_param_spec), "specials", ALTGRAD_PARAM_STRING, "ieee, fn, fnuz, none or p3109"},
    {sizeof(altgrad_param_spec), "signed", ALTGRAD_PARAM_BOOL, "A sign bit"},
};

// bias = 128 asks for the standard bias: no float32 format can have it (its
// smallest normal, 2^(1 - 128), is below float32's).
constexpr int64_t kStandardBias = 128;

[[noreturn]] void refuse(const std::string& why) {
    throw altgrad::sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, why);
}

exmy_specials parse_specials(const std::string& s) {
    if (s == "ieee") return exmy_specials::ieee;
    if (s == "fn") return exmy_specials::finite_nan;
    if (s == "fnuz") return exmy_specials::fnuz;
    if (s == "none") return exmy_specials::finite;
    if (s == "p3109") return exmy_specials::p3109;
    // The host checks `choices` first; another caller may not.
    refuse("parameter 'specials': \"" + s + "\" is none of ieee, fn, fnuz, none, p3109");
}

// IEEE 754's 2^(E-1) - 1 where there are two zeros; 2^(E-1) where -0's code
// is NaN, as ml_dtypes' float8_e4m3fnuz (bias 8) and float8_e5m2fnuz (16) and
// P3109's binary8 formats (E1M6: 1, E7M0: 64) have it.
int standard_bias(int exponent_bits, exmy_specials s) {
    const int one_zero = s == exmy_specials::fnuz || s == exmy_specials::p3109 ? 1 : 0;
    return (1 << (exponent_bits - 1)) - 1 + one_zero;
}

altgrad::sdk::exmy_format make_float(const altgrad::sdk::param_view& p) {
    const int64_t e = p.get_int("exponent_bits"), m = p.get_int("mantissa_bits"), b = p.get_int("bias");
    const bool subnormals = p.get_bool("subnormals"), has_sign = p.get_bool("signed");
    const std::string specials_name = p.get_string("specials");
    if (e < 1 || e > 8) refuse("parameter 'exponent_bits': " + std::to_string(e) + " is not 1..8");
    if (m < 0 || m > 23) refuse("parameter 'mantissa_bits': " + std::to_string(m) + " is not 0..23");
    if (b < -127 || b > kStandardBias) refuse("parameter 'bias': " + std::to_string(b) + " is not -127..128");
    const exmy_specials specials = parse_specials(specials_name);
    if (specials == exmy_specials::fnuz && !has_sign)
        refuse("specials=fnuz needs signed=true: fnuz's NaN is the code of -0, which has a sign bit");
    if (specials == exmy_specials::ieee && m == 0)
        refuse(
            "specials=ieee needs mantissa_bits >= 1: its NaNs are the top exponent with a non-zero mantissa");
    const int bias = b == kStandardBias ? standard_bias(static_cast<int>(e), specials) : static_cast<int>(b);
    try {
        return altgrad::sdk::exmy_format(
            {static_cast<int>(e), static_cast<int>(m), bias, specials, subnormals, has_sign});
    } catch (const altgrad::sdk::plugin_error& err) {
        // E.g. "max finite exceeds float32's range": say which parameters made it so.
        std::string why = err.what();
        if (why.rfind("exmy: ", 0) == 0) why.erase(0, 6);
        refuse(why + " (exponent_bits=" + std::to_string(e) + " mantissa_bits=" + std::to_string(m) +
               " bias=" + std::to_string(bias) + (b == kStandardBias ? " (standard)" : "") +
               " subnormals=" + (subnormals ? "true" : "false") + " specials=" + specials_name +
               " signed=" + (has_sign ? "true" : "false") + ")");
    }
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_FORMAT_PLUGIN_WITH_PARAMS(make_float, kParams, sizeof kParams / sizeof kParams[0])
