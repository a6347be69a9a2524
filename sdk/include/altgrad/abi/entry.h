/* AltGrad plugin ABI: the entry point and the plugin descriptor.
 *
 * A plugin library exports exactly one symbol, the C function
 * `altgrad_plugin_entry` (ALTGRAD_ENTRY_SYMBOL), and holds exactly one plugin.
 * The host loads the library with RTLD_NOW | RTLD_LOCAL, calls the function
 * once, checks entry->abi_version (the first two fields of altgrad_entry are
 * frozen across all ABI majors so this check is always possible), then checks
 * the descriptor against the plugin's manifest. The library stays loaded until
 * the host exits, so nothing a plugin hands out outlives its code.
 *
 * The function must be callable at any time, from any thread, any number of
 * times, and return the same pointer each time. Everything it returns is
 * static, read-only data inside the library.
 */
#ifndef ALTGRAD_ABI_ENTRY_H
#define ALTGRAD_ABI_ENTRY_H

#include <stddef.h>

#include "accumulator.h"
#include "diagnostic.h"
#include "format.h"
#include "intervention.h"
#include "params.h"
#include "transform.h"
#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The kinds of plugin. Manifests spell them "format", "intervention",
 * "diagnostic", "transform", "accumulator". */
typedef enum altgrad_plugin_kind {
    ALTGRAD_KIND_FORMAT = 1,
    ALTGRAD_KIND_INTERVENTION = 2,
    ALTGRAD_KIND_DIAGNOSTIC = 3,
    ALTGRAD_KIND_TRANSFORM = 4,  /* ABI 1.4 (transform.h) */
    ALTGRAD_KIND_ACCUMULATOR = 5 /* ABI 1.5 (accumulator.h) */
} altgrad_plugin_kind;

/* Who the plugin is. Must equal what its manifest says. */
typedef struct altgrad_descriptor {
    size_t struct_size;
    altgrad_plugin_kind kind;
    const char* name;                 /* [a-z0-9][a-z0-9_]*, unique in a plugin folder. */
    altgrad_version version;          /* The plugin's own version. */
    const char* description;          /* One line. */
    const altgrad_param_spec* params; /* param_count entries, may be NULL if 0. */
    size_t param_count;
} altgrad_descriptor;

/* What the entry function returns. Exactly one of the tables is non-NULL:
 * the one matching descriptor->kind. The transform table exists from ABI 1.4
 * on, the accumulator table from 1.5: a host reads one only when abi_version
 * is that minor or newer and struct_size covers it (an older entry has no
 * such field), and refuses a transform plugin whose entry claims an ABI
 * before 1.4, an accumulator plugin one before 1.5. */
typedef struct altgrad_entry {
    size_t struct_size;          /* Frozen position. */
    altgrad_version abi_version; /* Frozen position: ALTGRAD_ABI_VERSION_INIT
                                  * as the plugin was compiled. */
    const altgrad_descriptor* descriptor;
    const altgrad_format_vtable* format;
    const altgrad_intervention_vtable* intervention;
    const altgrad_diagnostic_vtable* diagnostic;
    const altgrad_transform_vtable* transform;     /* ABI 1.4 */
    const altgrad_accumulator_vtable* accumulator; /* ABI 1.5 */
} altgrad_entry;

#define ALTGRAD_ENTRY_SYMBOL "altgrad_plugin_entry"

/* The type of the exported function. */
typedef const altgrad_entry* (*altgrad_entry_fn)(void);

#if defined(_WIN32)
#define ALTGRAD_EXPORT __declspec(dllexport)
#else
#define ALTGRAD_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_ENTRY_H */
