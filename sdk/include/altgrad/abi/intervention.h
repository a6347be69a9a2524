/* AltGrad plugin ABI: stability-intervention plugins.
 *
 * Once per training step the host hands each enabled intervention what it
 * observed (loss, gradient norm, per-tensor overflow, underflow and bit-stall
 * rates, the active formats) and applies the actions the plugin answers with:
 * clip the gradient, switch a tensor's format, skip the step. Every action
 * becomes an event in the run's metrics with the plugin's reason.
 *
 * Threading: an instance is called by one thread at a time; the host never
 * calls observe concurrently on one instance. Instances are independent.
 *
 * Ownership: observations are the host's and valid only during the call; the
 * action buffer is the host's and the plugin fills entries in place.
 */
#ifndef ALTGRAD_ABI_INTERVENTION_H
#define ALTGRAD_ABI_INTERVENTION_H

#include <stddef.h>
#include <stdint.h>

#include "params.h"
#include "state.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the host saw of one quantized tensor during the step. Rates are
 * fractions of the tensor's elements in [0, 1]; NaN means "not measured this
 * step". */
typedef struct altgrad_tensor_observation {
    size_t struct_size;
    const char* name; /* Stable parameter/tensor name,
                       * e.g. "blocks.0.attn.qkv.weight". */
    altgrad_tensor_role role;
    const char* format; /* Active format plugin name, e.g. "e7m0". */
    double format_max;  /* Its max finite value. */
    double overflow_rate;
    double underflow_rate;
    double bit_stall_rate; /* Weights: updates that left the quantized
                            * weight unchanged, of those with a non-zero
                            * update. */
} altgrad_tensor_observation;

/* Everything observed in one step. */
typedef struct altgrad_observation {
    size_t struct_size;
    uint64_t step;    /* 0-based optimizer step. */
    double loss;      /* May be NaN or Inf. */
    double grad_norm; /* Global L2 norm before clipping. */
    double learning_rate;
    uint32_t consecutive_nonfinite_steps; /* Steps in a row, this one included,
                                           * whose loss or gradient was not finite. */
    const altgrad_tensor_observation* tensors;
    size_t tensor_count;
    /* ABI 1.4: the run's length, steps 0 .. max_steps - 1 (training.max_steps;
     * 0 when the caller has no run, as the conformance kit). A host before 1.4
     * passes a struct_size that ends before it: read it through the SDK's
     * observed_max_steps, which gives 0 then. */
    uint64_t max_steps;
} altgrad_observation;

/* What an intervention may ask for. */
typedef enum altgrad_action_kind {
    /* Clip the global gradient norm to `value` before the optimizer step. */
    ALTGRAD_ACTION_CLIP_GRAD_NORM = 1,
    /* From the next step on, quantize tensor `tensor` (a name or a pattern with
     * '*' wildcards) in format `format`; the host resets its scaling state. */
    ALTGRAD_ACTION_SWITCH_FORMAT = 2,
    /* Do not apply this step's update. */
    ALTGRAD_ACTION_SKIP_STEP = 3
} altgrad_action_kind;

#define ALTGRAD_ACTION_TEXT_CAPACITY 256u

/* One action, written by the plugin into a host-owned buffer entry. */
typedef struct altgrad_action {
    size_t struct_size;
    altgrad_action_kind kind;
    double value;                              /* CLIP_GRAD_NORM: max norm. */
    char tensor[ALTGRAD_ACTION_TEXT_CAPACITY]; /* SWITCH_FORMAT: target. */
    char format[ALTGRAD_ACTION_TEXT_CAPACITY]; /* SWITCH_FORMAT: new format. */
    char reason[ALTGRAD_ACTION_TEXT_CAPACITY]; /* Always: one line, why. */
} altgrad_action;

/* A host-owned buffer of `capacity` actions (each with struct_size set by the
 * host); the plugin writes entries [0, count) and sets count. Asking for more
 * than capacity is ALTGRAD_STATUS_INVALID_ARGUMENT. */
typedef struct altgrad_action_buffer {
    size_t struct_size;
    altgrad_action* items;
    size_t capacity;
    size_t count;
} altgrad_action_buffer;

typedef struct altgrad_intervention altgrad_intervention;

typedef struct altgrad_intervention_vtable {
    size_t struct_size;

    /* Make an instance from a validated parameter list. */
    altgrad_status (*create)(const altgrad_param_list* params, altgrad_intervention** out,
                             altgrad_error* error);

    /* Free an instance. NULL is a no-op. */
    void (*destroy)(altgrad_intervention* intervention);

    /* Look at one step and answer zero or more actions. The same sequence of
     * observations must give the same actions (no hidden randomness). */
    altgrad_status (*observe)(altgrad_intervention* intervention, const altgrad_observation* observation,
                              altgrad_action_buffer* actions, altgrad_error* error);

    /* Since ABI 1.1. Both set, or both NULL (the host refuses a plugin with
     * one of them). NULL, or a vtable whose struct_size ends before them (an
     * ABI 1.0 plugin), means the instance has no state to save: on resume it
     * starts afresh, and the host says so. Same threading as observe. */

    /* Write the instance's state (see state.h) through `writer`, without
     * changing the instance. On a non-OK status the host keeps no part of it. */
    altgrad_status (*save_state)(const altgrad_intervention* intervention, const altgrad_state_writer* writer,
                                 altgrad_error* error);

    /* Give an instance that has observed nothing yet the state in the `size`
     * bytes at `data` (host-owned, valid during the call), as written by
     * save_state of this plugin. Bytes it cannot read (cut short, an unknown
     * layout version) are INVALID_ARGUMENT, with a message saying what; the
     * host then stops the resume and destroys the instance. */
    altgrad_status (*load_state)(altgrad_intervention* intervention, const void* data, size_t size,
                                 altgrad_error* error);
} altgrad_intervention_vtable;

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_INTERVENTION_H */
