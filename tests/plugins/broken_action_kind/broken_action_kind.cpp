// Test plugin: an intervention that answers every step with an action of kind
// 1000, no altgrad_action_kind. The host must read the kind as an integer and
// refuse it naming the plugin and the field: a C++ load of it as the enum is
// undefined behaviour (UBSan reports it).
#include <cstdio>
#include <cstring>

#include "../broken_common.hpp"

namespace {
altgrad_status observe_kind_1000(altgrad_intervention*, const altgrad_observation*,
                                 altgrad_action_buffer* actions, altgrad_error*) {
    altgrad_action& a = actions->items[0];
    const int32_t kind = 1000;  // stored as the integer: the plugin loads no out-of-range enum either
    std::memcpy(&a.kind, &kind, sizeof kind);
    std::snprintf(a.reason, sizeof a.reason, "an action of no known kind");
    actions->count = 1;
    return ALTGRAD_STATUS_OK;
}
}  // namespace

BROKEN_INTERVENTION_PLUGIN("broken_action_kind", &observe_kind_1000,
                           "Test plugin: an intervention answering an action of kind 1000")
