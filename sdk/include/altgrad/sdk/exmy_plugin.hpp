// AltGrad SDK: a whole ExMy format plugin in one statement.
//
//   #include <altgrad/sdk/exmy_plugin.hpp>
//   ALTGRAD_EXMY_FORMAT_PLUGIN(5, 2, 15, altgrad::sdk::exmy_specials::ieee)
//
// The arguments are an exmy_spec: exponent bits, mantissa bits, bias,
// special-value convention (see exmy.hpp); the name, version and description
// are the manifest's (export.hpp: built with altgrad_add_plugin). The older
// form gives them first:
//
//   ALTGRAD_EXMY_FORMAT_PLUGIN("e5m2", 1, 0, 0, "OCP FP8 E5M2",
//                              5, 2, 15, altgrad::sdk::exmy_specials::ieee)
//
// For a format whose shape depends on parameters, write the factory yourself
// and use ALTGRAD_FORMAT_PLUGIN_WITH_PARAMS.
#pragma once

#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_plugin.hpp>

// The factory both forms define: exmy_format(exmy_spec{SPEC...}).
#define ALTGRAD_SDK_EXMY_FACTORY(...)                                                         \
    namespace {                                                                               \
    ::altgrad::sdk::exmy_format altgrad_make_exmy_format(const ::altgrad::sdk::param_view&) { \
        return ::altgrad::sdk::exmy_format(::altgrad::sdk::exmy_spec{__VA_ARGS__});           \
    }                                                                                         \
    }

#define ALTGRAD_SDK_EXMY_GIVEN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, ...) \
    ALTGRAD_SDK_EXMY_FACTORY(__VA_ARGS__)                                   \
    ALTGRAD_SDK_FORMAT_GIVEN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, altgrad_make_exmy_format)
#define ALTGRAD_SDK_EXMY_MANIFEST(...)    \
    ALTGRAD_SDK_EXMY_FACTORY(__VA_ARGS__) \
    ALTGRAD_SDK_FORMAT_MANIFEST(altgrad_make_exmy_format)

// 1 to 4 arguments: the spec alone; 6 to 9: the identity, then the spec.
#define ALTGRAD_EXMY_FORMAT_PLUGIN(...)                                                                   \
    ALTGRAD_SDK_PICK_13(__VA_ARGS__, ALTGRAD_SDK_BAD_ARITY, ALTGRAD_SDK_BAD_ARITY, ALTGRAD_SDK_BAD_ARITY, \
                        ALTGRAD_SDK_EXMY_GIVEN, ALTGRAD_SDK_EXMY_GIVEN, ALTGRAD_SDK_EXMY_GIVEN,           \
                        ALTGRAD_SDK_EXMY_GIVEN, ALTGRAD_SDK_BAD_ARITY, ALTGRAD_SDK_EXMY_MANIFEST,         \
                        ALTGRAD_SDK_EXMY_MANIFEST, ALTGRAD_SDK_EXMY_MANIFEST, ALTGRAD_SDK_EXMY_MANIFEST,  \
                        ALTGRAD_SDK_BAD_ARITY)                                                            \
    (__VA_ARGS__)
