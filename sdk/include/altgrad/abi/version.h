/* AltGrad plugin ABI: versions.
 *
 * The ABI is versioned major.minor. A host accepts a plugin when the plugin's
 * major equals the host's and the plugin's minor is not newer than the host's.
 * A minor release only appends fields at the end of structs and appends enum
 * values; it never moves, removes or re-types anything (see struct_size in
 * status.h). A major release may change anything and is refused across.
 */
#ifndef ALTGRAD_ABI_VERSION_H
#define ALTGRAD_ABI_VERSION_H

#include <stdint.h>

#define ALTGRAD_ABI_VERSION_MAJOR 1u
#define ALTGRAD_ABI_VERSION_MINOR 4u

/* History of minors (each adds only; a 1.0 plugin loads in a 1.1 host):
 *   1.0  formats, interventions, diagnostics, parameters, tensor views
 *   1.1  interventions may save and load their state (state.h)
 *   1.2  format calls may carry per-block scales (format.h, block_scales);
 *        tensor views carry the block scales a tensor was quantized with
 *        (tensor.h)
 *   1.3  diagnostics declare their headline values, the few a report draws
 *        (diagnostic.h, altgrad_headline; headlines and headline_count at the
 *        end of altgrad_diagnostic_vtable)
 *   1.4  transform plugins, a fourth kind: orthogonal transforms along a
 *        product's reduction dimension (transform.h; ALTGRAD_KIND_TRANSFORM,
 *        and the transform table at the end of altgrad_entry)
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
