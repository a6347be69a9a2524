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
    ALTGRAD_TENSOR_WEIGHT = 0,          /* A parameter (the master copy). */
    ALTGRAD_TENSOR_GRADIENT = 1,        /* A parameter's gradient. */
    ALTGRAD_TENSOR_ACTIVATION = 2,      /* A quantized layer's input. */
    ALTGRAD_TENSOR_ATTENTION_PROBS = 3, /* Softmax output, [batch, head, query, key]. */
    ALTGRAD_TENSOR_OUTPUT_GRADIENT = 4  /* A quantized layer's output gradient. */
} altgrad_tensor_role;

#define ALTGRAD_TENSOR_MAX_DIMS 8u

/* A dense, contiguous, row-major float32 tensor. */
typedef struct altgrad_tensor_view {
    size_t struct_size;
    const char* name; /* Stable name, e.g. "blocks.0.mlp.fc.weight". */
    altgrad_tensor_role role;
    const float* data;     /* count elements. */
    const float* previous; /* WEIGHT: the same tensor before this step's
                            * update, or NULL when not available. */
    size_t count;
    uint32_t ndim; /* <= ALTGRAD_TENSOR_MAX_DIMS */
    int64_t shape[ALTGRAD_TENSOR_MAX_DIMS];
    altgrad_memory_kind memory; /* Where data and previous live. */
    altgrad_format_ref format;  /* The tensor's active format. */
    float scale;                /* Its current per-tensor scale (q(x*s)/s);
                                 * 1 when block_scales is set. */

    /* ABI 1.2: per-block scales. Read them only when ALTGRAD_STRUCT_HAS(view,
     * altgrad_tensor_view, block_count) holds (a 1.0/1.1 host's view ends
     * before them; a 1.1 plugin never sees them and uses `scale`). */
    const float* block_scales; /* Owned by the host, borrowed for the call
                                * like data. NULL: the tensor is scaled per
                                * tensor by `scale` (and block_size and
                                * block_count are 0). Otherwise the encode
                                * scales the trainer quantizes `data` with,
                                * blocks of block_size elements along the
                                * last dimension (K = shape[ndim - 1]), row
                                * by row, a row's last block possibly
                                * short: ceil(K / block_size) per row, and
                                * element i (row r = i / K, column
                                * c = i % K) uses
                                * block_scales[r * ceil(K / block_size)
                                * + c / block_size], each finite and > 0.
                                * A tensor quantized in two copies (a
                                * block-scaled weight, activation or output
                                * gradient is quantized again along its
                                * columns for the backward pass) gives its
                                * forward (rowwise) copy's scales. Set only
                                * when `format` reads block scales itself
                                * (a format plugin of ABI >= 1.2). */
    size_t block_size;         /* Elements per block, >= 1 when block_scales
                                * is set (<= K); 0 otherwise. */
    size_t block_count;        /* Number of block_scales: rows *
                                * ceil(K / block_size); 0 when NULL. */
} altgrad_tensor_view;

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_TENSOR_H */
