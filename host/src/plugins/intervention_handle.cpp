#include "plugins/intervention_handle.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace altgrad::host {

namespace {
// The text of a fixed-size field, or nullptr when it has no NUL.
const char* field_text(const char (&field)[ALTGRAD_ACTION_TEXT_CAPACITY]) {
    return std::memchr(field, '\0', sizeof field) != nullptr ? field : nullptr;
}
}  // namespace

size_t intervention_handle::action_capacity(size_t tensor_count) {
    return std::max(kMinActionCapacity, tensor_count + 16);
}

std::vector<action> intervention_handle::observe(const altgrad_observation& o) {
    buffer_.resize(action_capacity(o.tensor_count));
    return observe(o, buffer_.data(), buffer_.size());
}

std::vector<action> intervention_handle::observe(const altgrad_observation& o, altgrad_action* items,
                                                 size_t capacity) {
    for (size_t i = 0; i < capacity; ++i) {
        items[i] = altgrad_action{};
        items[i].struct_size = sizeof(altgrad_action);
    }
    altgrad_action_buffer actions{sizeof(altgrad_action_buffer), items, capacity, 0};
    call("observe", vtable().observe, &o, &actions);
    if (actions.count > capacity)
        bad("observe", "count " + std::to_string(actions.count) + " exceeds the buffer's capacity " +
                           std::to_string(capacity));
    std::vector<action> out;
    out.reserve(actions.count);
    for (size_t i = 0; i < actions.count; ++i) {
        const altgrad_action& a = items[i];
        auto bad_action = [&](const std::string& what) {
            bad("observe", "action " + std::to_string(i) + ": " + what);
        };
        const char* reason = field_text(a.reason);
        const char* tensor = field_text(a.tensor);
        const char* format = field_text(a.format);
        if (reason == nullptr || tensor == nullptr || format == nullptr)
            bad_action("a text field has no NUL");
        if (reason[0] == '\0') bad_action("reason is empty");
        const std::optional<altgrad_action_kind> kind = plugin_enum(a.kind, action_kind_names());
        if (!kind) bad_action(plugin_enum_error("kind", a.kind, action_kind_names()));
        action r;
        r.kind = *kind;
        r.reason = reason;
        switch (*kind) {
            case ALTGRAD_ACTION_CLIP_GRAD_NORM:
                if (!(std::isfinite(a.value) && a.value > 0.0))
                    bad_action("clip_grad_norm value must be finite and > 0, got " + std::to_string(a.value));
                r.value = a.value;
                break;
            case ALTGRAD_ACTION_SWITCH_FORMAT:
                if (tensor[0] == '\0' || format[0] == '\0')
                    bad_action("switch_format needs a tensor and a format");
                r.tensor = tensor;
                r.format = format;
                break;
            case ALTGRAD_ACTION_SKIP_STEP: break;
        }
        out.push_back(std::move(r));
    }
    return out;
}

bool intervention_handle::saves_state() const {
    return ALTGRAD_STRUCT_HAS(&vtable(), altgrad_intervention_vtable, load_state) &&
           vtable().save_state != nullptr && vtable().load_state != nullptr;
}

namespace {
altgrad_status append_to_string(const altgrad_state_writer* w, const void* data, size_t size) {
    if (size == 0) return ALTGRAD_STATUS_OK;
    if (data == nullptr) return ALTGRAD_STATUS_INVALID_ARGUMENT;
    try {
        static_cast<std::string*>(w->context)->append(static_cast<const char*>(data), size);
        return ALTGRAD_STATUS_OK;
    } catch (...) {
        return ALTGRAD_STATUS_OUT_OF_MEMORY;
    }
}
}  // namespace

std::string intervention_handle::save_state() const {
    if (!saves_state()) bad("save_state", "the plugin does not save its state");
    std::string bytes;
    const altgrad_state_writer writer{sizeof(altgrad_state_writer), &bytes, &append_to_string};
    call("save_state", vtable().save_state, &writer);
    return bytes;
}

void intervention_handle::load_state(const std::string& bytes) { load_state(bytes.data(), bytes.size()); }

void intervention_handle::load_state(const void* bytes, size_t size) {
    if (!saves_state()) bad("load_state", "the plugin does not load a state");
    call("load_state", vtable().load_state, bytes, size);
}

std::vector<altgrad_tensor_observation> intervention_handle::abi_tensors(const observation& o) {
    std::vector<altgrad_tensor_observation> tensors(o.tensors.size());
    for (size_t i = 0; i < o.tensors.size(); ++i) {
        const tensor_observation& t = o.tensors[i];
        tensors[i] = altgrad_tensor_observation{sizeof(altgrad_tensor_observation),
                                                t.name.c_str(),
                                                t.role,
                                                t.format.c_str(),
                                                t.format_max,
                                                t.overflow_rate,
                                                t.underflow_rate,
                                                t.bit_stall_rate};
    }
    return tensors;
}

altgrad_observation intervention_handle::abi_observation(const observation& o,
                                                         const altgrad_tensor_observation* tensors) {
    return altgrad_observation{sizeof(altgrad_observation),
                               o.step,
                               o.loss,
                               o.grad_norm,
                               o.learning_rate,
                               o.consecutive_nonfinite_steps,
                               o.tensors.empty() ? nullptr : tensors,
                               o.tensors.size(),
                               o.max_steps};
}

std::vector<action> intervention_handle::observe(const observation& o) {
    const std::vector<altgrad_tensor_observation> tensors = abi_tensors(o);
    return observe(abi_observation(o, tensors.data()));
}

}  // namespace altgrad::host
