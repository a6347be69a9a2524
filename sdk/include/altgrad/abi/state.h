/* AltGrad plugin ABI: saved plugin state (since ABI 1.1).
 *
 * An instance that learns from what it observes (an intervention that has
 * switched clipping on, the format switches it has already asked for) saves
 * that state into each checkpoint and loads it into a fresh instance when the
 * run resumes, so the resumed run acts as the uninterrupted one would.
 *
 * The bytes are the plugin's own layout: the host stores them unread and hands
 * them back unchanged, only to an instance of the same plugin, created with
 * the same parameters, that has observed nothing yet. A plugin should begin
 * its bytes with a version of that layout, so a later release of it can read
 * an older checkpoint or refuse it with a clear message.
 */
#ifndef ALTGRAD_ABI_STATE_H
#define ALTGRAD_ABI_STATE_H

#include <stddef.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a plugin writes its state: a host-owned byte sink, valid only during
 * the save call it is passed to, and used only on the thread of that call. */
typedef struct altgrad_state_writer altgrad_state_writer;
struct altgrad_state_writer {
    size_t struct_size;
    /* The host's; the plugin never reads it. */
    void* context;
    /* Append `size` bytes from `data` (the plugin's memory, read during the
     * call only; may be NULL when size is 0). OK, or OUT_OF_MEMORY when the
     * host could not keep them: the plugin then stops and returns that status. */
    altgrad_status (*write)(const altgrad_state_writer* writer, const void* data, size_t size);
};

#ifdef __cplusplus
}
#endif

#endif /* ALTGRAD_ABI_STATE_H */
