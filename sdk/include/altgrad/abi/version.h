/* AltGrad plugin ABI: versions.
 *
 * The ABI is versioned major.minor. A host accepts a plugin when the plugin's
 * major equals the host's and the plugin's minor is not newer than the host's.
 * A minor release only appends fields at the end of structs and appends enum
 * values; it never moves, removes or re-types anything (see struct_size in
 * status.h). A major release may change anything and is refused across.
 *
 * The version a plugin reports says which structs it knows, never what it
 * implements: rebuilding old source against newer headers
 * (ALTGRAD_ABI_VERSION_INIT) raises the version without changing the code.
 * So from 1.4 on, a behaviour the host must be able to rely on is a
 * capability the plugin declares (format.h, altgrad_format_info.capabilities),
 * and one it does not declare is absent. Only block scales were ever implied
 * by a version (1.2 and 1.3, see format.h), and remain so for those two.
 */
#ifndef ALTGRAD_ABI_VERSION_H
#define ALTGRAD_ABI_VERSION_H

#include <stdint.h>

#define ALTGRAD_ABI_VERSION_MAJOR 1u
#define ALTGRAD_ABI_VERSION_MINOR 5u

/* History of minors (each adds only; a 1.0 plugin loads in a 1.1 host):
 *   1.0  formats, interventions, diagnostics, parameters, tensor views
 *   1.1  interventions may save and load their state (state.h)
 *   1.2  format calls may carry per-block scales (format.h, block_scales);
 *        tensor views carry the block scales a tensor was quantized with
 *        (tensor.h)
 *   1.3  diagnostics declare their headline values, the few a report draws
 *        (diagnostic.h, altgrad_headline; headlines and headline_count at the
 *        end of altgrad_diagnostic_vtable)
 *   1.4  format plugins declare what they implement beyond 1.0 in
 *        altgrad_format_info.capabilities (format.h) instead of having it
 *        implied by the version they were built against: a 1.1 plugin
 *        rebuilt against these headers claims 1.4 but declares nothing, so
 *        the host still splits its block-scaled calls (1.2 and 1.3 plugins
 *        keep block scales implied); stochastic rounding may use fewer
 *        random bits (random_bits in the quantize and encode args);
 *        transform plugins, a fourth kind: orthogonal transforms along a
 *        product's reduction dimension (transform.h; ALTGRAD_KIND_TRANSFORM,
 *        and the transform table at the end of altgrad_entry); interventions
 *        see the run's length (max_steps at the end of altgrad_observation)
 *   1.5  accumulator plugins, a fifth kind: one matrix-multiply-accumulate
 *        instruction of an accelerator bit for bit, a fused dot-add
 *        (accumulator.h; ALTGRAD_KIND_ACCUMULATOR, and the accumulator table
 *        at the end of altgrad_entry)
 */

#ifdef __cplusplus
extern "C" {
#endif

/* A three-part version. Used for the ABI (patch is 0) and for a plugin's own
 * version (semantic versioning, written "1.2.3" in manifests). */
typedef struct altgrad_version {
    uint32_t major; /* Incompatible changes. */
    uint32_t minor; /* Compatible additions. */
    uint32_t patch; /* Fixes only. */
} altgrad_version;

#ifdef __cplusplus
}
#endif

#define ALTGRAD_ABI_VERSION_INIT \
    { ALTGRAD_ABI_VERSION_MAJOR, ALTGRAD_ABI_VERSION_MINOR, 0u }

#endif /* ALTGRAD_ABI_VERSION_H */
