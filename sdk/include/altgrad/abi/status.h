/* AltGrad plugin ABI: status codes, error messages, and how structs grow.
 *
 * Errors: every ABI function that can fail returns an altgrad_status and takes
 * a caller-owned altgrad_error* as its last argument. On a non-OK status the
 * callee writes a NUL-terminated, one-line, human-readable message into it
 * (when it is not NULL). Nothing is thrown across the boundary: a C++ plugin
 * catches every exception at its exported functions and reports
 * ALTGRAD_STATUS_INTERNAL (the SDK's adapters in altgrad/sdk/ do this).
 *
 * Growth: every struct that crosses the boundary starts with `size_t
 * struct_size`, set by whoever fills the struct in to sizeof() of the struct
 * as it was compiled. A reader only touches fields that lie wholly inside
 * struct_size (ALTGRAD_STRUCT_HAS below); a field beyond it reads as zero /
 * NULL. When a callee writes into a caller's struct (format info, quantize
 * results), the caller sets struct_size and the callee writes only fields that
 * fit. So an old plugin works with a new host and the other way round, within
 * one ABI major.
 *
 * Arrays of structs (parameter lists, tensor views, observations, actions,
 * diagnostic values) are strided by the struct_size of their elements: every
 * element of one array has the same struct_size, set by whoever allocated the
 * array, and element i starts i * struct_size bytes after the first. Readers
 * step by that size, never by their own sizeof, so an array of grown structs
 * still reads correctly (ALTGRAD_ARRAY_AT below).
 */
#ifndef ALTGRAD_ABI_STATUS_H
#define ALTGRAD_ABI_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a call did. Values are stable; new ones may be appended in a minor. */
typedef enum altgrad_status {
    /* The call did everything it promises. */
    ALTGRAD_STATUS_OK = 0,
    /* The caller broke the contract: a NULL or too-small struct, a count that
     * does not fit, a non-finite or non-positive scale, a parameter that is out
     * of range. Retrying the same call cannot succeed. */
    ALTGRAD_STATUS_INVALID_ARGUMENT = 1,
    /* A valid request this plugin does not implement: a rounding mode, device
     * memory, a parameter combination it declines. The host reports it to the
     * user as a limitation of the plugin, not as a bug. */
    ALTGRAD_STATUS_UNSUPPORTED = 2,
    /* encode only: a value the format cannot hold at all, such as NaN in a
     * format without a NaN code. The message names the element index. */
    ALTGRAD_STATUS_NOT_REPRESENTABLE = 3,
    /* An allocation failed. Plugin state is unchanged. */
    ALTGRAD_STATUS_OUT_OF_MEMORY = 4,
    /* Anything else: a bug in the plugin, or an exception caught at the
     * boundary. The host treats the instance as unusable. */
    ALTGRAD_STATUS_INTERNAL = 5
} altgrad_status;

/* Bytes in altgrad_error.message, terminating NUL included. */
#define ALTGRAD_ERROR_MESSAGE_CAPACITY 512u

/* A caller-owned error object. The caller allocates it (usually on its stack),
 * sets struct_size and passes it; the callee fills message on failure and
 * leaves it alone on success. A message longer than the capacity is cut. */
typedef struct altgrad_error {
    size_t struct_size;
    char message[ALTGRAD_ERROR_MESSAGE_CAPACITY];
} altgrad_error;

#ifdef __cplusplus
}
#endif

/* True when the struct pointed to by `ptr` (of type `type`) is large enough to
 * contain `field`: use before reading or writing any field added after v1.0. */
#define ALTGRAD_STRUCT_HAS(ptr, type, field) \
    ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* Element i of an ABI array whose first element is `first` (see above). */
#define ALTGRAD_ARRAY_AT(type, first, i) ((type*)((char*)(first) + (size_t)(i) * (first)->struct_size))

#endif /* ALTGRAD_ABI_STATUS_H */
