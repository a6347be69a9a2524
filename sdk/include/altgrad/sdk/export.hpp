// AltGrad SDK: the one exported entry symbol, for every plugin kind.
//
// The kind-specific macros (ALTGRAD_FORMAT_PLUGIN, ALTGRAD_DIAGNOSTIC_PLUGIN,
// ALTGRAD_INTERVENTION_PLUGIN and their _WITH_PARAMS forms) expand to this:
// a static descriptor and entry inside the library, returned by
// altgrad_plugin_entry (abi/entry.h). Exactly one of the three tables is set.
#pragma once

#include <utility>

#include <altgrad/altgrad.h>

// The plugin class a factory makes: FACTORY(const param_view&) -> class.
#define ALTGRAD_SDK_CLASS_OF(FACTORY) decltype(FACTORY(std::declval<const ::altgrad::sdk::param_view&>()))

// The tables are passed parenthesised, since they hold template commas.
#define ALTGRAD_SDK_ENTRY(KIND, NAME, MAJOR, MINOR, PATCH, DESCRIPTION, PARAM_SPECS, PARAM_COUNT, FORMAT_TABLE,   \
                          INTERVENTION_TABLE, DIAGNOSTIC_TABLE)                                                   \
    extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {                                  \
        static const altgrad_descriptor descriptor = {                                                           \
            sizeof(altgrad_descriptor), KIND, NAME, {MAJOR, MINOR, PATCH}, DESCRIPTION, PARAM_SPECS, PARAM_COUNT}; \
        static const altgrad_entry entry = {sizeof(altgrad_entry), ALTGRAD_ABI_VERSION_INIT, &descriptor,         \
                                            FORMAT_TABLE, INTERVENTION_TABLE, DIAGNOSTIC_TABLE};                 \
        return &entry;                                                                                           \
    }
