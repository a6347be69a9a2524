/* AltGrad plugin ABI: number-format plugins.
 *
 * A format plugin describes a number format and converts float32 data to it:
 * fake quantization (float32 -> nearest representable -> float32), encoding to
 * codes and decoding codes. The host creates one instance per distinct set of
 * parameters and shares it between every tensor and thread that uses the
 * format.
 *
 * Threading: create and destroy are never called concurrently with anything
 * else on the same instance. get_info, quantize, encode and decode may be
 * called from many threads at once on the same instance, on distinct output
 * buffers; they must not modify instance state (an instance is immutable
 * after create). Different instances are independent.
 *
 * Ownership: every data buffer is the caller's and is only borrowed for the
 * duration of a call; the plugin keeps no pointer to it. The instance is the
 * plugin's, from create until destroy.
 *
 * The rules every format follows (the conformance kit checks them):
 *  - Scaling: an element x becomes q(fl(x*s)) / s, computed in float32: first
 *    the float32 product x*s, then rounding to the format, then a float32
 *    division by s (exact when s is a power of two).
 *  - Round first, then decide overflow: a value that rounds to max finite is
 *    max finite, not an overflow (so under nearest-even the tie just above max
 *    rounds down to max where max's code is even).
 *  - ALTGRAD_OVERFLOW_SATURATE sends finite overflow and +-Inf to +-max.
 *    ALTGRAD_OVERFLOW_NONFINITE sends overflow to +-Inf where the format has
 *    Inf, else to NaN; a format with neither Inf nor NaN saturates in both
 *    modes. Round-toward-zero never turns a finite input into Inf.
 *  - A NaN input gives a NaN output from quantize in every format (the fake-
 *    quantized float keeps NaN visible), while encode of NaN into a format with
 *    no NaN code fails with ALTGRAD_STATUS_NOT_REPRESENTABLE.
 *  - Stochastic rounding is IEEE P3109's "StochasticA" (round away from zero
 *    when floor(f * 2^32) + R >= 2^32, f in [0, 1) the position of the value
 *    between its two neighbours, R the 32 random bits of the element) with R
 *    drawn from a counter-based generator keyed by (seed, offset + i) for
 *    element i, so the result never depends on chunking or threading.
 *  - Block scaling (ABI 1.2): when a call's block_scales is set, the elements
 *    are cut into blocks of block_size consecutive elements (the last block
 *    may be shorter) and element i uses s = block_scales[i / block_size]
 *    instead of `scale`: it becomes q(fl(x_i * s)) / s, exactly as if each
 *    block were a call of its own with that scale and offset + (its first
 *    index), so stochastic rounding stays keyed by (seed, offset + i) and the
 *    counts are the sums over the blocks. Every block scale must be finite
 *    and > 0, like `scale`.
 *  - Random bits (ABI 1.4): with random_bits = b in 1..31, stochastic
 *    rounding uses only the top b of the element's 32 random bits,
 *    R' = R & ~(2^(32-b) - 1), and rounds away from zero when
 *    floor(f * 2^32) + R' >= 2^32. Then P(away) = floor(f * 2^b) / 2^b: the
 *    result is biased toward zero by less than 2^-b of a step (f = 0.3,
 *    b = 2: 0.25, not 0.3). 0 and 32 mean all 32 bits (the bits of ABI
 *    1.3); any other value is ALTGRAD_STATUS_INVALID_ARGUMENT. The other
 *    roundings ignore it.
 *
 * Capabilities (ABI 1.4): what a plugin implements beyond ABI 1.0's calls is
 * declared in altgrad_format_info.capabilities, never implied by the ABI
 * version it reports (a plugin rebuilt against newer headers reports the
 * newer version with unchanged code). A bit the plugin does not set, or a
 * field its get_info does not write (the host zeroes the struct first), means
 * the capability is absent:
 *  - ALTGRAD_FORMAT_CAPABILITY_BLOCK_SCALES: quantize, encode and decode
 *    honour block_scales and block_size. The host passes block scales only to
 *    a plugin that declares it; to any other it makes one call per block
 *    with that block's scale and offset (the same results, more calls, and
 *    the block scales must then be in host memory). Plugins that report ABI
 *    1.2 or 1.3 predate the declaration: for them, and only them, the
 *    version still implies block scales.
 *  - ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS: quantize and encode honour
 *    random_bits. The host refuses a random_bits of 1..31 for a plugin that
 *    does not declare it, naming the plugin, rather than let it use 32.
 */
#ifndef ALTGRAD_ABI_FORMAT_H
#define ALTGRAD_ABI_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "params.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How values map to codes. */
typedef enum altgrad_format_family {
    /* Sign-magnitude floating point: sign, exponent_bits, mantissa_bits,
     * value (-1)^s * 2^(e - bias) * 1.m, subnormals at e == 0. */
    ALTGRAD_FAMILY_FLOAT = 1,
    /* Two's-complement integer k of total_bits bits, value k * 2^-mantissa_bits. */
    ALTGRAD_FAMILY_FIXED_POINT = 2,
    /* Anything else: a table of representable values (e.g. NF4, posits, logs). */
    ALTGRAD_FAMILY_CODEBOOK = 3
} altgrad_format_family;

/* How many zeros the format has. */
typedef enum altgrad_zero_kind {
    ALTGRAD_ZERO_SIGNED = 1,   /* +0 and -0, as IEEE 754 and OCP FP8. */
    ALTGRAD_ZERO_UNSIGNED = 2, /* A single zero; quantize returns +0. */
    ALTGRAD_ZERO_NONE = 3      /* No zero (e.g. an E8M0 scale format). */
} altgrad_zero_kind;

/* Rounding modes. Bit (1u << mode) in altgrad_format_info.rounding_modes says
 * whether a plugin implements the mode. */
typedef enum altgrad_rounding {
    ALTGRAD_ROUND_NEAREST_EVEN = 0, /* Ties go to the even code (in a codebook
                                     * whose neighbours' codes share parity:
                                     * toward zero unless that code is odd). */
    ALTGRAD_ROUND_STOCHASTIC = 1,   /* P3109 StochasticA with 32 random bits
                                     * (or the top random_bits of them). */
    ALTGRAD_ROUND_TOWARD_ZERO = 2   /* Truncation. */
} altgrad_rounding;

/* What happens to values beyond max finite (see the rules above). */
typedef enum altgrad_overflow {
    ALTGRAD_OVERFLOW_SATURATE = 0,
    ALTGRAD_OVERFLOW_NONFINITE = 1
} altgrad_overflow;

/* Where the data buffers of a call live. Bit (1u << kind) in
 * altgrad_format_info.memory_kinds says whether a plugin accepts them. */
typedef enum altgrad_memory_kind {
    ALTGRAD_MEMORY_HOST = 0, /* Ordinary CPU memory. */
    ALTGRAD_MEMORY_CUDA = 1  /* CUDA device memory on `device_index`; the work
                              * is enqueued on `cuda_stream` (a cudaStream_t,
                              * NULL for the default stream). */
} altgrad_memory_kind;

/* Everything the host and the diagnostics need to know about a format. Filled
 * in by get_info into a caller-owned struct (the caller sets struct_size). */
typedef struct altgrad_format_info {
    size_t struct_size;
    altgrad_format_family family;
    uint32_t total_bits;    /* Bits per code, 1..32. */
    uint32_t code_bytes;    /* Bytes per code in encode/decode buffers: 1, 2 or
                             * 4, the smallest that holds total_bits. Codes are
                             * unsigned integers of that width, native endian. */
    uint32_t exponent_bits; /* FLOAT: exponent field width. Others: 0. */
    uint32_t mantissa_bits; /* FLOAT: trailing significand bits. FIXED_POINT:
                             * fraction bits. CODEBOOK: 0. */
    int32_t bias;           /* FLOAT: exponent bias. Others: 0. */
    uint32_t is_signed;     /* 1 when negative values exist. */
    altgrad_zero_kind zero;
    uint32_t has_subnormals;     /* 1 when values below min_normal exist besides 0. */
    uint32_t has_inf;            /* 1 when +-Inf codes exist. */
    uint32_t nan_code_count;     /* How many codes decode to NaN (0: none). */
    uint32_t canonical_nan_code; /* The code encode writes for NaN; meaningful
                                  * only when nan_code_count > 0. */
    double max_finite;           /* Largest finite value. */
    double lowest_finite;        /* Most negative finite value (-max_finite for a
                                  * sign-symmetric format, -1 for E0M7, 0 or the
                                  * smallest value for an unsigned one). */
    double min_normal;           /* Smallest positive normal value. FIXED_POINT
                                  * and CODEBOOK: the smallest positive value. */
    double min_subnormal;        /* Smallest positive subnormal, 0 when the format
                                  * has none. */
    uint32_t rounding_modes;     /* Bit set of (1u << altgrad_rounding) implemented. */
    uint32_t memory_kinds;       /* Bit set of (1u << altgrad_memory_kind) accepted. */
    /* ABI 1.4: bit set of ALTGRAD_FORMAT_CAPABILITY_* implemented (see
     * Capabilities above). 0, what a plugin that knows nothing of it leaves,
     * means none. */
    uint32_t capabilities;
} altgrad_format_info;

/* Bits of altgrad_format_info.capabilities (ABI 1.4). */
#define ALTGRAD_FORMAT_CAPABILITY_BLOCK_SCALES (1u << 0) /* block_scales, block_size */
#define ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS (1u << 1)  /* random_bits */

/* Arguments and results of quantize. The caller fills the inputs and sets
 * struct_size; the plugin fills the results. */
typedef struct altgrad_quantize_args {
    size_t struct_size;
    /* Inputs. */
    const float* input; /* count elements. */
    float* output;      /* count elements; may equal input (in place), must
                         * not otherwise overlap it. */
    size_t count;       /* May be 0 (then input and output may be NULL). */
    float scale;        /* s in q(x*s)/s; finite and > 0. */
    altgrad_rounding rounding;
    altgrad_overflow overflow;
    uint64_t seed; /* Stochastic rounding: element i draws its random
                    * bits from (seed, offset + i). Ignored otherwise. */
    uint64_t offset;
    altgrad_memory_kind memory;
    int32_t device_index;    /* CUDA: the device the buffers are on. */
    void* cuda_stream;       /* CUDA: cudaStream_t to enqueue on. */
    uint64_t* device_counts; /* CUDA, optional: device memory holding two
                              * uint64_t that the plugin atomically adds this
                              * call's overflow and underflow counts to; the call
                              * may then return before the work completes. When
                              * NULL the call completes before returning and
                              * fills the counts below. Ignored for HOST. */
    /* Results. */
    uint64_t overflow_count;  /* Elements whose scaled input is +-Inf, or is
                               * finite and rounded beyond the finite range
                               * (they came out as +-max, +-Inf or NaN). */
    uint64_t underflow_count; /* Elements whose scaled input is finite and
                               * non-zero and whose result is zero. */
    /* ABI 1.2: per-block scales (see the block scaling rule above). A host
     * sets them only for a plugin that takes them (see Capabilities above):
     * another would use `scale` everywhere. */
    const float* block_scales; /* NULL: every element uses `scale` (which is
                                * then ignored otherwise). Else
                                * ceil(count / block_size) scales, in the same
                                * memory as the data, borrowed for the call. */
    size_t block_size;         /* Elements per block, >= 1 when block_scales
                                * is set; ignored when it is NULL. */
    /* ABI 1.4: how many of each element's 32 random bits stochastic rounding
     * uses, 1..32, 0 meaning 32 (see Random bits above). Read only where
     * struct_size covers it (else 32) and the plugin declares
     * ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS. */
    uint32_t random_bits;
} altgrad_quantize_args;

/* Arguments and results of encode: float32 -> codes. Same rounding, overflow,
 * scaling and counting as quantize; the codes represent the rounded x*s. */
typedef struct altgrad_encode_args {
    size_t struct_size;
    const float* input;
    void* codes; /* count codes of info.code_bytes bytes each. */
    size_t count;
    float scale;
    altgrad_rounding rounding;
    altgrad_overflow overflow;
    uint64_t seed;
    uint64_t offset;
    altgrad_memory_kind memory;
    int32_t device_index;
    void* cuda_stream;
    uint64_t* device_counts;
    uint64_t overflow_count;
    uint64_t underflow_count;
    const float* block_scales; /* ABI 1.2: as in altgrad_quantize_args. */
    size_t block_size;
    uint32_t random_bits; /* ABI 1.4: as in altgrad_quantize_args. */
} altgrad_encode_args;

/* Arguments of decode: codes -> float32, value(code) / scale (with block
 * scales: value(code_i) / block_scales[i / block_size]). A code with bits set
 * above total_bits is ALTGRAD_STATUS_INVALID_ARGUMENT. NaN codes decode to a
 * quiet NaN. */
typedef struct altgrad_decode_args {
    size_t struct_size;
    const void* codes;
    float* output;
    size_t count;
    float scale;
    altgrad_memory_kind memory;
    int32_t device_index;
    void* cuda_stream;
    const float* block_scales; /* ABI 1.2: as in altgrad_quantize_args. */
    size_t block_size;
} altgrad_decode_args;

/* An opaque format instance, owned by the plugin. */
typedef struct altgrad_format altgrad_format;

/* The functions of a format plugin. A static table inside the library. */
typedef struct altgrad_format_vtable {
    size_t struct_size;

    /* Make an instance from a validated parameter list (see params.h). On
     * success *out is set and owned by the caller until destroy. */
    altgrad_status (*create)(const altgrad_param_list* params, altgrad_format** out, altgrad_error* error);

    /* Free an instance. No call on it may be running or follow. NULL is a no-op. */
    void (*destroy)(altgrad_format* format);

    /* Describe the instance's format into *info (caller sets struct_size). */
    altgrad_status (*get_info)(const altgrad_format* format, altgrad_format_info* info, altgrad_error* error);

    /* Fake-quantize args->count floats. Thread-safe (see above). */
    altgrad_status (*quantize)(const altgrad_format* format, altgrad_quantize_args* args,
                               altgrad_error* error);

    /* Encode args->count floats into codes. Thread-safe. On
     * ALTGRAD_STATUS_NOT_REPRESENTABLE the codes buffer is unspecified. */
    altgrad_status (*encode)(const altgrad_format* format, altgrad_encode_args* args, altgrad_error* error);

    /* Decode args->count codes into floats. Thread-safe. */
    altgrad_status (*decode)(const altgrad_format* format, altgrad_decode_args* args, altgrad_error* error);
} altgrad_format_vtable;

/* A format as another plugin sees it (a diagnostic is handed the active format
 * of each tensor this way): the table and an instance the host owns. Valid for
 * the duration of the call it is passed to. */
typedef struct altgrad_format_ref {
    size_t struct_size;
    const altgrad_format_vtable* vtable;
    const altgrad_format* instance;
    const char* name; /* The format plugin's name, e.g. "e5m2". */
} altgrad_format_ref;

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_FORMAT_H */
