/* AltGrad plugin ABI: diagnostic plugins.
 *
 * At the diagnostic interval the host hands a diagnostic the tensors whose
 * roles it declared interest in, each with its active format, and writes the
 * named scalars it returns to the run's metrics. A diagnostic that needs q(w)
 * calls the format it is handed (altgrad_tensor_view.format), never private
 * arithmetic, so it measures what training actually does.
 *
 * Threading: an instance is called by one thread at a time. It may keep state
 * between calls (e.g. the previous step's values for movement statistics).
 *
 * Ownership: tensor views are the host's, valid only during the call; the
 * value buffer is the host's and the plugin fills entries in place.
 */
#ifndef ALTGRAD_ABI_DIAGNOSTIC_H
#define ALTGRAD_ABI_DIAGNOSTIC_H

#include <stddef.h>
#include <stdint.h>

#include "params.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ALTGRAD_VALUE_NAME_CAPACITY 64u

/* Applies to all tensors of the call rather than to one. */
#define ALTGRAD_ALL_TENSORS UINT32_MAX

/* One named scalar result. */
typedef struct altgrad_diagnostic_value {
    size_t struct_size;
    uint32_t tensor_index;                    /* Index into the call's tensors,
                                               * or ALTGRAD_ALL_TENSORS. */
    char name[ALTGRAD_VALUE_NAME_CAPACITY];   /* [a-z0-9_.]+, e.g. "stiffness_mean". */
    double value;                             /* NaN allowed ("undefined here"). */
} altgrad_diagnostic_value;

/* A host-owned buffer of `capacity` values; the plugin writes entries
 * [0, count) and sets count. Needing more than capacity is
 * ALTGRAD_STATUS_INVALID_ARGUMENT (the host sizes it from max_values). */
typedef struct altgrad_value_buffer {
    size_t struct_size;
    altgrad_diagnostic_value* items;
    size_t capacity;
    size_t count;
} altgrad_value_buffer;

typedef struct altgrad_diagnostic altgrad_diagnostic;

typedef struct altgrad_diagnostic_vtable {
    size_t struct_size;

    /* Make an instance from a validated parameter list. */
    altgrad_status (*create)(const altgrad_param_list* params,
                             altgrad_diagnostic** out, altgrad_error* error);

    /* Free an instance. NULL is a no-op. */
    void (*destroy)(altgrad_diagnostic* diagnostic);

    /* Which tensors to pass: a bit set of (1u << altgrad_tensor_role). */
    uint32_t (*interests)(const altgrad_diagnostic* diagnostic);

    /* The most values one measure call writes per tensor passed (and at most
     * as many again for the ALTGRAD_ALL_TENSORS entries): the host sizes the
     * value buffer to max_values_per_tensor * (tensor_count + 1). */
    size_t (*max_values_per_tensor)(const altgrad_diagnostic* diagnostic);

    /* Measure. Empty tensors (count 0) and NaN/Inf elements must be handled. */
    altgrad_status (*measure)(altgrad_diagnostic* diagnostic, uint64_t step,
                              const altgrad_tensor_view* tensors, size_t tensor_count,
                              altgrad_value_buffer* values, altgrad_error* error);
} altgrad_diagnostic_vtable;

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_DIAGNOSTIC_H */
