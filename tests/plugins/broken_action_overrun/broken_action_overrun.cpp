// Test plugin: an intervention that answers no action but writes one element
// past its action buffer (an off-by-one a hand-written loop makes). The kit's
// guard page after the buffer must turn it into a crash naming the call.
#include "../broken_common.hpp"

namespace {
altgrad_status observe_one_past(altgrad_intervention*, const altgrad_observation*,
                                altgrad_action_buffer* actions, altgrad_error*) {
    actions->items[actions->capacity].value = 1.0;
    actions->count = 0;
    return ALTGRAD_STATUS_OK;
}
}  // namespace

BROKEN_INTERVENTION_PLUGIN("broken_action_overrun", &observe_one_past,
                           "Test plugin: an intervention writing one action past its buffer")
