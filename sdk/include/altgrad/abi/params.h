/* AltGrad plugin ABI: typed parameters.
 *
 * A plugin declares its parameters twice: in its descriptor (key and type, so
 * the host can check the library against its manifest) and in its manifest
 * (type, default, range, description). Before a plugin's create() runs, the
 * host validates the user's values against the manifest and then passes a
 * complete list: every declared key exactly once, of its declared type, within
 * its declared range, defaults filled in, and no undeclared key, sorted by
 * key (find parameters by key, not by position). A plugin may
 * still refuse a combination with ALTGRAD_STATUS_INVALID_ARGUMENT and a
 * message naming the key.
 */
#ifndef ALTGRAD_ABI_PARAMS_H
#define ALTGRAD_ABI_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The four parameter types; manifests spell them "bool", "int", "float",
 * "string". */
typedef enum altgrad_param_type {
    ALTGRAD_PARAM_BOOL = 1,
    ALTGRAD_PARAM_INT = 2,   /* int64_t */
    ALTGRAD_PARAM_FLOAT = 3, /* double, always finite */
    ALTGRAD_PARAM_STRING = 4 /* UTF-8, NUL-terminated */
} altgrad_param_type;

/* What a plugin declares about one parameter, in its descriptor. All pointers
 * point to static storage inside the plugin library. */
typedef struct altgrad_param_spec {
    size_t struct_size;
    const char* key; /* [a-z][a-z0-9_]*, unique within the plugin. */
    altgrad_param_type type;
    const char* description; /* One line; may be NULL. */
} altgrad_param_spec;

/* One parameter value, as the host passes it. Only the field matching `type`
 * is meaningful; the others are zero. */
typedef struct altgrad_param {
    size_t struct_size;
    const char* key;
    altgrad_param_type type;
    int32_t bool_value; /* 0 or 1 */
    int64_t int_value;
    double float_value;
    const char* string_value; /* Never NULL for a string parameter. */
} altgrad_param;

/* A host-owned list of parameters. It and every string in it stay valid only
 * for the duration of the call it is passed to: a plugin copies what it keeps. */
typedef struct altgrad_param_list {
    size_t struct_size;
    const altgrad_param* items;
    size_t count;
} altgrad_param_list;

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_PARAMS_H */
