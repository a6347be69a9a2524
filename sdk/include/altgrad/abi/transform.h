/* AltGrad plugin ABI: transform plugins (ABI 1.4).
 *
 * A transform plugin applies an orthogonal transform T along the reduction
 * dimension of a matrix product, to both operands, so that the exact product
 * is unchanged ((T a) . (T b) = a^T T^T T b = a . b) and only the rounding of
 * the transformed operands sees the difference (a Hadamard transform spreads
 * an outlier over its block, so a block scale fits the block better). The
 * host creates one instance per distinct set of parameters and shares it
 * between every product and thread that uses it.
 *
 * The data: a row-major matrix of `rows` x `cols` float32 elements; T acts
 * on each row, on consecutive blocks of info.block_size (d) elements, so cols
 * must be a multiple of d. The rules every transform follows (the
 * conformance kit checks them):
 *  - Orthogonal: T^T T = I, so dot products of rows are preserved up to
 *    float32 rounding; args.inverse = 1 applies T^-1 = T^T.
 *  - Row-local: row r's result depends only on row r's values and args.seed,
 *    never on r, on the other rows or on how the rows are split across calls
 *    and threads. That is what gives both operands of a product the same T
 *    (the host transforms them in separate calls, with different row counts)
 *    and makes results reproducible bit for bit.
 *  - Deterministic: the same values and seed give the same bits, in every
 *    call, on every run of the same build (no clocks, no addresses, a fixed
 *    order of operations).
 *  - Non-finite input is not an error: a NaN or Inf spreads through ordinary
 *    float arithmetic to the elements of its block that it enters.
 *
 * Threading: create and destroy are never called concurrently with anything
 * else on the same instance. get_info and apply may be called from many
 * threads at once on the same instance, on distinct output buffers; they must
 * not modify instance state (an instance is immutable after create).
 * Different instances are independent.
 *
 * Ownership: every data buffer is the caller's and is only borrowed for the
 * duration of a call; the plugin keeps no pointer to it. The instance is the
 * plugin's, from create until destroy.
 *
 * Statuses: ALTGRAD_STATUS_INVALID_ARGUMENT for a broken contract (a NULL or
 * too-small struct, NULL buffers with rows * cols > 0, cols not a multiple of
 * block_size, rows * cols too large for size_t, inverse not 0 or 1, output
 * overlapping input without being it, a parameter out of range at create,
 * named in the message); ALTGRAD_STATUS_UNSUPPORTED for a memory kind the
 * plugin does not list in memory_kinds. On a failed apply the output buffer
 * is unspecified (it may be partly written).
 */
#ifndef ALTGRAD_ABI_TRANSFORM_H
#define ALTGRAD_ABI_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "format.h" /* altgrad_memory_kind */
#include "params.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the host needs to know about a transform instance. Filled in by
 * get_info into a caller-owned struct (the caller sets struct_size). */
typedef struct altgrad_transform_info {
    size_t struct_size;
    uint32_t block_size;   /* d >= 1: T acts on consecutive blocks of d elements
                            * of each row; a row's length must be a multiple
                            * of d. */
    uint32_t self_inverse; /* 1: T^-1 = T (applying it twice is the identity
                            * up to float32 rounding), so inverse is ignored;
                            * 0: inverse = 1 applies a different T^T. */
    uint32_t uses_seed;    /* 1: T depends on args.seed (e.g. random signs
                            * drawn per call); 0: args.seed is ignored. */
    uint32_t memory_kinds; /* Bit set of (1u << altgrad_memory_kind) accepted;
                            * host memory is required. */
} altgrad_transform_info;

/* Arguments of apply. The caller fills every field and sets struct_size. */
typedef struct altgrad_transform_args {
    size_t struct_size;
    const float* input; /* rows * cols elements, row-major. */
    float* output;      /* rows * cols elements; may equal input (in place),
                         * must not otherwise overlap it. */
    size_t rows;        /* May be 0 (then input and output may be NULL). */
    size_t cols;        /* Elements per row: a multiple of block_size (0 is
                         * a multiple: an empty call). */
    uint64_t seed;      /* The host's key for random elements, e.g. a hash of
                         * (run seed, layer, step); both operands of one
                         * product get the same seed. Ignored unless
                         * info.uses_seed. */
    uint32_t inverse;   /* 0: apply T; 1: apply T^-1 = T^T. */
    altgrad_memory_kind memory;
    int32_t device_index; /* CUDA: the device the buffers are on. */
    void* cuda_stream;    /* CUDA: cudaStream_t to enqueue on (the call may
                           * return before the work completes); NULL for the
                           * default stream. */
} altgrad_transform_args;

/* An opaque transform instance, owned by the plugin. */
typedef struct altgrad_transform altgrad_transform;

/* The functions of a transform plugin. A static table inside the library. */
typedef struct altgrad_transform_vtable {
    size_t struct_size;

    /* Make an instance from a validated parameter list (see params.h). On
     * success *out is set and owned by the caller until destroy. */
    altgrad_status (*create)(const altgrad_param_list* params, altgrad_transform** out, altgrad_error* error);

    /* Free an instance. No call on it may be running or follow. NULL is a no-op. */
    void (*destroy)(altgrad_transform* transform);

    /* Describe the instance into *info (caller sets struct_size). */
    altgrad_status (*get_info)(const altgrad_transform* transform, altgrad_transform_info* info,
                               altgrad_error* error);

    /* Transform each row of args->input into args->output. Thread-safe (see
     * above). */
    altgrad_status (*apply)(const altgrad_transform* transform, const altgrad_transform_args* args,
                            altgrad_error* error);
} altgrad_transform_vtable;

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_TRANSFORM_H */
