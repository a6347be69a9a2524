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
 * value buffer is the host's and the plugin fills entries in place. Headline
 * declarations (ABI 1.3, below) are static, read-only data in the library,
 * like the vtable that points to them.
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
    uint32_t tensor_index;                  /* Index into the call's tensors,
                                             * or ALTGRAD_ALL_TENSORS. */
    char name[ALTGRAD_VALUE_NAME_CAPACITY]; /* [a-z0-9_.]+, e.g. "stiffness_mean". */
    double value;                           /* NaN allowed ("undefined here"). */
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

/* ---- Headline values (ABI 1.3).
 *
 * A diagnostic writes many values (every name, for every tensor, at every
 * measurement: all of them reach the run's metrics). Its headlines are the few
 * a researcher wants to see over training: each names one value measure()
 * writes, how its values over a measurement's tensors become one number per
 * step, and how a report draws that series (title, axis label, unit, log
 * scale). Reports, tables and the Python package show exactly these.
 *
 * A plugin built against ABI 1.0-1.2 (its vtable ends before the fields), or
 * one with headline_count 0, declares none: the host's report then shows
 * every value it wrote, each summarised by the mean.
 *
 * The host reads the declaration once, when it loads the plugin, and refuses
 * a plugin whose declaration breaks a rule below (listed as broken, with a
 * message naming the headline and the field). */

/* How one measurement's values of `value` over the tensors become one number
 * (the report computes it; the plugin only declares which). With neither an
 * ALTGRAD_ALL_TENSORS value nor a finite per-tensor one, the number is NaN. */
typedef enum altgrad_headline_summary {
    /* The ALTGRAD_ALL_TENSORS value when the plugin wrote one, else the mean
     * of the finite per-tensor values. */
    ALTGRAD_HEADLINE_MEAN = 1,
    /* The ALTGRAD_ALL_TENSORS value when written, else the largest finite
     * per-tensor value. */
    ALTGRAD_HEADLINE_MAX = 2,
    /* The ALTGRAD_ALL_TENSORS value when written, else the smallest finite
     * per-tensor value. */
    ALTGRAD_HEADLINE_MIN = 3
} altgrad_headline_summary;

/* altgrad_headline.flags: draw the series on a logarithmic axis. */
#define ALTGRAD_HEADLINE_LOG_SCALE 1u

/* Bytes a headline's title, label or unit may take, terminating NUL included. */
#define ALTGRAD_HEADLINE_TEXT_CAPACITY 128u

/* The most headlines one diagnostic may declare. */
#define ALTGRAD_HEADLINE_MAX_COUNT 64u

/* One headline. Every string is static, NUL-terminated text in the library. */
typedef struct altgrad_headline {
    size_t struct_size;               /* sizeof(altgrad_headline) as the plugin was
                                       * compiled; the same for every element of the
                                       * array (status.h: arrays are strided by it). */
    const char* value;                /* A value name measure() writes (for some tensor
                                       * or for ALTGRAD_ALL_TENSORS): [a-z0-9_.]+, shorter
                                       * than ALTGRAD_VALUE_NAME_CAPACITY. Several
                                       * headlines may name one value (its mean and its
                                       * max, say). */
    const char* series;               /* The series' name in reports, tables and Python,
                                       * e.g. "stiffness" or "range.dynamic_range": the
                                       * same rule as a value name, unique within the
                                       * plugin, and none of the host's own series
                                       * (loss, val_loss, lr, grad_norm, tokens_per_s,
                                       * grad_sparsity, overflow, underflow, bit_stall).
                                       * Give it the plugin's name as a prefix
                                       * ("<plugin>.<value>") to keep it unique among
                                       * plugins. */
    const char* title;                /* One line: a figure's title, e.g. "Stiffness
                                       * (mean S = 2^(floor(log2|w|) - M))". Not empty,
                                       * shorter than ALTGRAD_HEADLINE_TEXT_CAPACITY,
                                       * UTF-8 without control characters (as label and
                                       * unit). */
    const char* label;                /* A few words: the figure's axis label, e.g.
                                       * "mean stiffness". Not empty. */
    const char* unit;                 /* The value's unit, e.g. "nats"; "" when none
                                       * (never NULL). */
    altgrad_headline_summary summary; /* How the tensors' values become one
                                       * number (above). */
    uint32_t flags;                   /* ALTGRAD_HEADLINE_LOG_SCALE or 0; other bits
                                       * are refused. */
} altgrad_headline;

typedef struct altgrad_diagnostic altgrad_diagnostic;

typedef struct altgrad_diagnostic_vtable {
    size_t struct_size;

    /* Make an instance from a validated parameter list. */
    altgrad_status (*create)(const altgrad_param_list* params, altgrad_diagnostic** out,
                             altgrad_error* error);

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

    /* ABI 1.3: the headline values (above). Static, read-only data in the
     * library: headline_count entries strided by their struct_size; NULL when
     * headline_count is 0. Read them only when ALTGRAD_STRUCT_HAS(vtable,
     * altgrad_diagnostic_vtable, headline_count) holds and the entry reports
     * ABI 1.3 or newer. */
    const altgrad_headline* headlines;
    size_t headline_count;
} altgrad_diagnostic_vtable;

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_DIAGNOSTIC_H */
