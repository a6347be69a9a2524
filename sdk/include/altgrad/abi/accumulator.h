/* AltGrad plugin ABI: accumulator plugins (ABI 1.5).
 *
 * An accumulator plugin computes one matrix-multiply-accumulate instruction
 * of an accelerator bit for bit: D = fused_dot_add(C, a[0..k), b[0..k),
 * block scales), for a tile of M x N outputs at once. The host runs a whole
 * product the way a GPU kernel does, instruction after instruction along the
 * reduction dimension with C = the previous D, and adds the instruction's D
 * into a float32 total wherever its recipe promotes. The host creates one
 * instance per distinct set of parameters and shares it between every
 * product and thread that uses it.
 *
 * The definition (MMA-Sim: Xie et al., arXiv 2511.10909, validated on the
 * GPUs; docs/accumulation.md): for each output,
 *  1. Split C and each product into a significand and an exponent. An
 *     operand x of a format whose smallest normal exponent is m splits into
 *     (|x| / 2^e, e), e = max(floor(log2 |x|), m): a normal value's
 *     significand lies in [1, 2), a subnormal one's in (0, 1) at e = m; a zero
 *     is (0, -126). A product's significand is the product of its operands'
 *     (in [0, 4), not renormalized) and its exponent the sum of theirs, plus
 *     the exponents of its two block scales (a UE8M0 scale is a power of
 *     two). C splits as a float32 (m = -126), or as an FP16 value (m = -14)
 *     when the output is FP16.
 *  2. Align every term to the largest of those exponents, E, and truncate
 *     each toward zero to info.fraction_bits (F) bits below 2^E:
 *     t_i = trunc(s_i * 2^(F + e_i - E)).
 *  3. Add the truncated terms exactly and normalize the sum, sum(t_i) *
 *     2^(E - F), to info.output (altgrad_acc_output). A zero result is +0.
 *  NaN and Inf: when the exact sum of C and the products (with their scales)
 *  holds a NaN, an Inf times 0, or Infs of both signs, D is NaN (float32
 *  0x7FFFFFFF; for FP16 output the FP16 NaN 0x7FFF, as float32 0x7FFFE000);
 *  else when it holds an Inf, D is that Inf. Overflow of a finite sum gives
 *  Inf of its sign.
 *  Block-scaled FP4 (info.group_size = g > 0, E2M1 operands): the products
 *  are first summed exactly in groups of g consecutive ones; each group is
 *  one term of step 1 whose significand is its sum times the significands of
 *  its two scales (a UE4M3 scale by magnitude) and whose exponent is the sum
 *  of the scales' exponents.
 *  Halves (info.halves = 2, Ampere and Ada): the instruction is two fused
 *  dot-adds in sequence, products [0, depth/2) onto C, then [depth/2, k) onto
 *  the first one's result (rounded to the output as any result is).
 *  A call with k < depth is the instruction with fewer products (what zero
 *  operands padding it would give; block-scaled groups past the last product
 *  are absent, not zero groups with scales).
 *
 * The data: a is M x k and b is N x k, both row-major with the reduction
 * dimension contiguous (row i of a and row j of b are output (i, j)'s
 * operands); c and d are M x N, row-major. Every value is float32 holding a
 * value of its format: the operands of the formats whose smallest normal
 * exponents the call names, c of the output's format, the block scales of
 * their scale kind. The host promises this; a plugin need not check it, and
 * a value outside its format gives some result (never a crash).
 *
 * Threading: create and destroy are never called concurrently with anything
 * else on the same instance. get_info and dot_add may be called from many
 * threads at once on the same instance, on distinct output buffers; they
 * must not modify instance state (an instance is immutable after create).
 * Different instances are independent.
 *
 * Ownership: every data buffer is the caller's and is only borrowed for the
 * duration of a call; the plugin keeps no pointer to it. The instance is the
 * plugin's, from create until destroy.
 *
 * Statuses: ALTGRAD_STATUS_INVALID_ARGUMENT for a broken contract (a NULL or
 * too-small struct, k larger than info.depth, NULL buffers for a non-empty
 * call, sizes too large for size_t, d overlapping c without being it or
 * overlapping any input, a minimum exponent outside [-149, 127], an unknown
 * scale kind or memory kind, scales missing for a scale kind or given
 * without one, a parameter out of range at create), named in the message;
 * ALTGRAD_STATUS_UNSUPPORTED for a scale kind not in info.scale_kinds, a
 * memory kind not in info.memory_kinds, or (group_size > 0) operands that are
 * not E2M1 (a minimum exponent other than 0). On a failed call d is
 * unspecified (it may be partly written).
 */
#ifndef ALTGRAD_ABI_ACCUMULATOR_H
#define ALTGRAD_ABI_ACCUMULATOR_H

#include <stddef.h>
#include <stdint.h>

#include "format.h" /* altgrad_memory_kind */
#include "params.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the exact sum becomes D (step 3). 0 is none of them: a plugin must
 * say. */
typedef enum altgrad_acc_output {
    /* float32, truncated toward zero to 23 fractional bits; subnormals at
     * 2^-126 (multiples of 2^-149). */
    ALTGRAD_ACC_OUTPUT_FLOAT32 = 1,
    /* float32's exponent range, truncated toward zero to 13 fractional bits
     * (subnormals multiples of 2^-139): Hopper's and Ada's FP8 paths. */
    ALTGRAD_ACC_OUTPUT_E8M13 = 2,
    /* IEEE binary16, rounded to nearest, ties to even; subnormals at 2^-14. */
    ALTGRAD_ACC_OUTPUT_FLOAT16 = 3
} altgrad_acc_output;

/* The block scales a call carries. Bit (1u << kind) in
 * altgrad_accumulator_info.scale_kinds says whether a plugin takes them. */
typedef enum altgrad_acc_scale_kind {
    /* No block scales: a_scales and b_scales are NULL. */
    ALTGRAD_ACC_SCALE_NONE = 0,
    /* OCP MX UE8M0 (a power of two, 2^-127..2^127, or NaN), one per 32
     * consecutive elements along k. */
    ALTGRAD_ACC_SCALE_UE8M0_32 = 1,
    /* NVFP4's E4M3 taken by magnitude (its sign is ignored), one per 16
     * consecutive elements along k; only with info.group_size > 0. */
    ALTGRAD_ACC_SCALE_UE4M3_16 = 2
} altgrad_acc_scale_kind;

/* What the host needs to know about an accumulator instance. Filled in by
 * get_info into a caller-owned struct (the caller sets struct_size). */
typedef struct altgrad_accumulator_info {
    size_t struct_size;
    uint32_t depth;         /* K, 1..1024: products per instruction; a call's k
                             * is at most this. */
    uint32_t group_size;    /* 0, or g > 0 dividing 16 and depth: E2M1 products
                             * are summed exactly in groups of g before their
                             * scales apply (16 for Blackwell's mxf4nvf4). */
    uint32_t fraction_bits; /* F, 1..46: the bits kept below the largest
                             * exponent when the terms are aligned. */
    uint32_t halves;        /* 1, or 2: two fused dot-adds of depth/2 in
                             * sequence (depth even, group_size 0). */
    altgrad_acc_output output;
    uint32_t scale_kinds;  /* Bit set of (1u << altgrad_acc_scale_kind)
                            * accepted; UE4M3_16 only with group_size > 0,
                            * NONE only with group_size 0. */
    uint32_t memory_kinds; /* Bit set of (1u << altgrad_memory_kind) accepted;
                            * host memory is required. */
} altgrad_accumulator_info;

/* Arguments of dot_add. The caller fills every field and sets struct_size. */
typedef struct altgrad_accumulator_args {
    size_t struct_size;
    const float* a;         /* m x k operands, row-major (k contiguous). */
    const float* b;         /* n x k operands, row-major (k contiguous). */
    const float* c;         /* m x n input accumulators, row-major. */
    float* d;               /* m x n results, row-major; may equal c, must not otherwise
                             * overlap c, and must not overlap a, b or the scales. */
    size_t m;               /* Rows of a and of c, d; may be 0. */
    size_t n;               /* Rows of b, columns of c, d; may be 0. */
    size_t k;               /* Products per output, 0..info.depth (0: D is C normalized
                             * to the output). */
    int32_t a_min_exponent; /* The smallest normal exponent of a's format, where
                             * its subnormals split (e4m3 -6, e5m2 -14, fp16 -14,
                             * bf16 and fp32 -126, e2m1 0, e3m2 -2, e2m3 0). */
    int32_t b_min_exponent; /* The same for b's format. */
    altgrad_acc_scale_kind scale_kind;
    const float* a_scales; /* m x ceil(k / block) scales, row-major (block 32
                            * for UE8M0_32, 16 for UE4M3_16); NULL for NONE. */
    const float* b_scales; /* n x ceil(k / block); NULL for NONE. */
    altgrad_memory_kind memory;
    int32_t device_index; /* CUDA: the device the buffers are on. */
    void* cuda_stream;    /* CUDA: cudaStream_t to enqueue on (the call may
                           * return before the work completes); NULL for the
                           * default stream. */
} altgrad_accumulator_args;

/* An opaque accumulator instance, owned by the plugin. */
typedef struct altgrad_accumulator altgrad_accumulator;

/* The functions of an accumulator plugin. A static table inside the library. */
typedef struct altgrad_accumulator_vtable {
    size_t struct_size;

    /* Make an instance from a validated parameter list (see params.h). On
     * success *out is set and owned by the caller until destroy. */
    altgrad_status (*create)(const altgrad_param_list* params, altgrad_accumulator** out,
                             altgrad_error* error);

    /* Free an instance. No call on it may be running or follow. NULL is a no-op. */
    void (*destroy)(altgrad_accumulator* accumulator);

    /* Describe the instance into *info (caller sets struct_size). */
    altgrad_status (*get_info)(const altgrad_accumulator* accumulator, altgrad_accumulator_info* info,
                               altgrad_error* error);

    /* One instruction for every output of the m x n tile: d = fused_dot_add(c,
     * a, b, scales). Thread-safe (see above). */
    altgrad_status (*dot_add)(const altgrad_accumulator* accumulator, const altgrad_accumulator_args* args,
                              altgrad_error* error);
} altgrad_accumulator_vtable;

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_ACCUMULATOR_H */
