// Parameters: validated against the manifest before the plugin sees them.
#include <cmath>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "plugins/format_handle.hpp"
#include "plugins/params.hpp"
#include "plugins/registry.hpp"
#include "test_support.hpp"
#include "util/error.hpp"

namespace altgrad::test {
namespace {

std::shared_ptr<const host::loaded_plugin> param_plugin() {
    static host::registry reg(kTestPlugins);
    return reg.load("param_format");
}

std::string create_error(const host::given_params& params) {
    try {
        host::format_handle::create(param_plugin(), params);
        return "";
    } catch (const host::error& e) {
        return e.what();
    }
}

TEST(Params, DefaultsFillEveryDeclaredKey) {
    const host::param_values v = host::resolve_params(param_plugin()->info, {}, "--param");
    ASSERT_EQ(v.list()->count, 6u);
    std::map<std::string, const altgrad_param*> by_key;
    for (const altgrad_param& p : v.items()) by_key[p.key] = &p;
    EXPECT_EQ(by_key.at("exponent_bits")->int_value, 4);
    EXPECT_EQ(by_key.at("mantissa_bits")->int_value, 3);
    EXPECT_EQ(by_key.at("bias")->int_value, 7);
    EXPECT_STREQ(by_key.at("specials")->string_value, "finite_nan");
    EXPECT_EQ(by_key.at("scale_hint")->float_value, 1.0);
    EXPECT_EQ(by_key.at("strict")->bool_value, 0);
}

TEST(Params, DefaultsMakeE4M3) {
    const auto f = host::format_handle::create(param_plugin());
    EXPECT_EQ(f->info().max_finite, 448.0);  // OCP E4M3FN
}

TEST(Params, OverridesShapeTheFormat) {
    const auto f = host::format_handle::create(param_plugin(), {{"exponent_bits", "5"},
                                                                {"mantissa_bits", "2"},
                                                                {"bias", "15"},
                                                                {"specials", "ieee"},
                                                                {"strict", "true"},
                                                                {"scale_hint", "0.25"}});
    EXPECT_EQ(f->info().max_finite, 57344.0);  // OCP E5M2
    const float in[3] = {1.1f, 61440.0f, -1e-9f};
    float out[3];
    host::quantize_options o;
    const host::quantize_counts c = f->quantize(in, out, 3, o);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], 57344.0f);
    EXPECT_EQ(out[2], 0.0f);
    EXPECT_TRUE(std::signbit(out[2]));
    EXPECT_EQ(c.overflow, 1u);
    EXPECT_EQ(c.underflow, 1u);
}

TEST(Params, BadValuesNameThePluginAndKey) {
    std::string e = create_error({{"exponent_bits", "9"}});
    EXPECT_NE(e.find("plugin 'param_format': parameter 'exponent_bits' = \"9\": out of range"),
              std::string::npos)
        << e;
    e = create_error({{"exponent_bits", "four"}});
    EXPECT_NE(e.find("'exponent_bits' = \"four\": expected an integer"), std::string::npos) << e;
    e = create_error({{"strict", "yes"}});
    EXPECT_NE(e.find("'strict' = \"yes\": expected true or false"), std::string::npos) << e;
    e = create_error({{"scale_hint", "nan"}});
    EXPECT_NE(e.find("'scale_hint' = \"nan\": expected a finite number"), std::string::npos) << e;
    e = create_error({{"specials", "ocp"}});
    EXPECT_NE(e.find("expected one of ieee, finite_nan, p3109, finite"), std::string::npos) << e;
    e = create_error({{"mantisa_bits", "2"}});
    EXPECT_NE(e.find("unknown parameter 'mantisa_bits' (declared: "), std::string::npos) << e;
}

// A config's value keeps its TOML kind: a string where the manifest says
// integer, float or boolean is refused, and a number where it says string;
// an integer is a float's value too. Untyped text (--param) is read as the
// manifest's type.
TEST(Params, TypedValuesMustMatchTheManifestsType) {
    using host::given_param;
    using host::param_kind;
    std::string e = create_error({{"exponent_bits", given_param("5", param_kind::string)}});
    EXPECT_NE(e.find("parameter 'exponent_bits' = \"5\": expected an integer, got a string"),
              std::string::npos)
        << e;
    e = create_error({{"exponent_bits", given_param("5", param_kind::floating)}});
    EXPECT_NE(e.find("'exponent_bits' = \"5\": expected an integer, got a float"), std::string::npos) << e;
    e = create_error({{"scale_hint", given_param("0.5", param_kind::string)}});
    EXPECT_NE(e.find("'scale_hint' = \"0.5\": expected a number, got a string"), std::string::npos) << e;
    e = create_error({{"strict", given_param("true", param_kind::string)}});
    EXPECT_NE(e.find("'strict' = \"true\": expected a boolean, got a string"), std::string::npos) << e;
    e = create_error({{"specials", given_param("1", param_kind::integer)}});
    EXPECT_NE(e.find("'specials' = \"1\": expected a string, got an integer"), std::string::npos) << e;
    EXPECT_EQ(create_error({{"exponent_bits", given_param("5", param_kind::integer)},
                            {"scale_hint", given_param("2", param_kind::integer)},
                            {"strict", given_param("false", param_kind::boolean)},
                            {"specials", given_param("ieee", param_kind::string)},
                            {"mantissa_bits", "2"}}),
              "");
}

TEST(Params, PluginMayRefuseACombination) {
    // In range for the manifest, but no such ExMy format: the plugin says why.
    const std::string e = create_error({{"mantissa_bits", "0"}, {"specials", "ieee"}});
    EXPECT_NE(e.find("plugin 'param_format': create failed (invalid argument)"), std::string::npos) << e;
    EXPECT_NE(e.find("mantissa bit"), std::string::npos) << e;
}

}  // namespace
}  // namespace altgrad::test
