// AltGrad SDK: a whole ExMy format plugin in one statement.
//
//   #include <altgrad/sdk/exmy_plugin.hpp>
//   ALTGRAD_EXMY_FORMAT_PLUGIN("e5m2", 1, 0, 0, "OCP FP8 E5M2",
//                              5, 2, 15, altgrad::sdk::exmy_specials::ieee)
//
// The trailing arguments are an exmy_spec: exponent bits, mantissa bits, bias,
// special-value convention (see exmy.hpp). For a format whose shape depends on
// parameters, write the factory yourself and use ALTGRAD_FORMAT_PLUGIN_WITH_PARAMS.
#pragma once

#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_plugin.hpp>

#define ALTGRAD_EXMY_FORMAT_PLUGIN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, ...)                   \
    namespace {                                                                                   \
    ::altgrad::sdk::exmy_format altgrad_make_exmy_format(const ::altgrad::sdk::param_view&) {     \
        return ::altgrad::sdk::exmy_format(::altgrad::sdk::exmy_spec{__VA_ARGS__});               \
    }                                                                                             \
    }                                                                                             \
    ALTGRAD_FORMAT_PLUGIN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, altgrad_make_exmy_format)
