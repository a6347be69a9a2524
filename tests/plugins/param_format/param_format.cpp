// Test plugin: an ExMy format shaped by parameters of every type, to test the
// host's parameter validation end to end. `specials` picks the convention;
// `exponent_bits`, `mantissa_bits`, `bias` the shape; `scale_hint` (float)
// and `strict` (bool) are accepted and checked only for type.
#include <string>

#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {

altgrad::sdk::exmy_format make(const altgrad::sdk::param_view& p) {
    using altgrad::sdk::exmy_specials;
    const std::string s = p.get_string("specials");
    const exmy_specials specials = s == "ieee"         ? exmy_specials::ieee
                                   : s == "finite_nan" ? exmy_specials::finite_nan
                                   : s == "p3109"      ? exmy_specials::p3109
                                                       : exmy_specials::finite;
    (void)p.get_float("scale_hint");
    (void)p.get_bool("strict");
    return altgrad::sdk::exmy_format({static_cast<int>(p.get_int("exponent_bits")),
                                      static_cast<int>(p.get_int("mantissa_bits")),
                                      static_cast<int>(p.get_int("bias")), specials});
}

const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "exponent_bits", ALTGRAD_PARAM_INT, "exponent field width"},
    {sizeof(altgrad_param_spec), "mantissa_bits", ALTGRAD_PARAM_INT, "mantissa field width"},
    {sizeof(altgrad_param_spec), "bias", ALTGRAD_PARAM_INT, "exponent bias"},
    {sizeof(altgrad_param_spec), "specials", ALTGRAD_PARAM_STRING, "special-value convention"},
    {sizeof(altgrad_param_spec), "scale_hint", ALTGRAD_PARAM_FLOAT, "unused"},
    {sizeof(altgrad_param_spec), "strict", ALTGRAD_PARAM_BOOL, "unused"},
};

}  // namespace

ALTGRAD_FORMAT_PLUGIN_WITH_PARAMS("param_format", 1, 0, 0, "Test plugin: an ExMy format shaped by parameters",
                                  make, kParams, 6)
