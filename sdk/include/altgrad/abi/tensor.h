/* AltGrad plugin ABI: borrowed views of host tensors.
 *
 * Used by diagnostic plugins (and named by intervention observations). A view
 * borrows host memory for the duration of one call; the plugin never frees it,
 * never writes it, and keeps no pointer to it afterwards.
 */
#ifndef ALTGRAD_ABI_TENSOR_H
#define ALTGRAD_ABI_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a tensor is in the model. Diagnostics declare interest as a bit set of
 * (1u << role). */
typedef enum altgrad_tensor_role {
    ALTGRAD_TENSOR_WEIGHT = 0,            /* A parameter (the master copy). */
    ALTGRAD_TENSOR_GRADIENT = 1,          /* A parameter's gradient. */
    ALTGRAD_TENSOR_ACTIVATION = 2,        /* A quantized layer's input. */
    ALTGRAD_TENSOR_ATTENTION_PROBS = 3,   /* Softmax output, [batch, head, query, key]. */
    ALTGRAD_TENSOR_OUTPUT_GRADIENT = 4    /* A quantized layer's output gradient. */
} altgrad_tensor_role;

#define ALTGRAD_TENSOR_MAX_DIMS 8u

/* A dense, contiguous, row-major float32 tensor. */
typedef struct altgrad_tensor_view {
    size_t struct_size;
    const char* name;              /* Stable name, e.g. "blocks.0.mlp.fc.weight". */
    altgrad_tensor_role role;
    const float* data;             /* count elements. */
    const float* previous;         /* WEIGHT: the same tensor before this step's
                                    * update, or NULL when not available. */
    size_t count;
    uint32_t ndim;                 /* <= ALTGRAD_TENSOR_MAX_DIMS */
    int64_t shape[ALTGRAD_TENSOR_MAX_DIMS];
    altgrad_memory_kind memory;    /* Where data and previous live. */
    altgrad_format_ref format;     /* The tensor's active format. */
    float scale;                   /* Its current per-tensor scale (q(x*s)/s). */
} altgrad_tensor_view;

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_TENSOR_H */
