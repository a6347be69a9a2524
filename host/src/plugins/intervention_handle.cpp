#include "plugins/intervention_handle.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plugins/format_handle.hpp"  // status_name
#include "plugins/params.hpp"
#include "util/error.hpp"

namespace altgrad::host {

const char* action_kind_name(altgrad_action_kind kind) {
    switch (kind) {
        case ALTGRAD_ACTION_CLIP_GRAD_NORM: return "clip_grad_norm";
        case ALTGRAD_ACTION_SWITCH_FORMAT: return "switch_format";
        case ALTGRAD_ACTION_SKIP_STEP: return "skip_step";
    }
    return "unknown";
}

namespace {
altgrad_error empty_error() {
    altgrad_error e{};
    e.struct_size = sizeof e;
    return e;
}

// The text of a fixed-size field, or nullptr when it has no NUL.
const char* field_text(const char (&field)[ALTGRAD_ACTION_TEXT_CAPACITY]) {
    return std::memchr(field, '\0', sizeof field) != nullptr ? field : nullptr;
}
}  // namespace

void intervention_handle::fail(const char* call, altgrad_status s, const altgrad_error& e) const {
    const char* msg = std::memchr(e.message, '\0', sizeof e.message) != nullptr && e.message[0] != '\0'
                          ? e.message
                          : "no message";
    throw error("plugin '" + name() + "': " + call + " failed (" + status_name(s) + "): " + msg);
}

void intervention_handle::bad(const std::string& what) const {
    throw error("plugin '" + name() + "': observe: " + what);
}

std::shared_ptr<intervention_handle> intervention_handle::create(std::shared_ptr<const loaded_plugin> plugin,
                                                                 const std::map<std::string, std::string>& params,
                                                                 const std::string& where) {
    if (plugin->info.kind != ALTGRAD_KIND_INTERVENTION)
        throw error("plugin '" + plugin->info.name + "' is a " + kind_name(plugin->info.kind) +
                    " plugin, not an intervention");
    const param_values values = resolve_params(plugin->info, params, where);
    std::shared_ptr<intervention_handle> h(new intervention_handle());
    h->plugin_ = std::move(plugin);
    h->vtable_ = h->plugin_->entry->intervention;
    altgrad_error e = empty_error();
    const altgrad_status s = h->vtable_->create(values.list(), &h->instance_, &e);
    if (s != ALTGRAD_STATUS_OK) h->fail("create", s, e);
    if (h->instance_ == nullptr) h->fail("create", ALTGRAD_STATUS_INTERNAL, e);
    return h;
}

intervention_handle::~intervention_handle() {
    if (instance_ != nullptr) vtable_->destroy(instance_);
}

std::vector<action> intervention_handle::observe(const altgrad_observation& o) {
    const size_t capacity = std::max(kMinActionCapacity, o.tensor_count + 16);
    buffer_.assign(capacity, altgrad_action{});
    for (altgrad_action& a : buffer_) a.struct_size = sizeof a;
    altgrad_action_buffer actions{sizeof(altgrad_action_buffer), buffer_.data(), buffer_.size(), 0};
    altgrad_error e = empty_error();
    const altgrad_status s = vtable_->observe(instance_, &o, &actions, &e);
    if (s != ALTGRAD_STATUS_OK) fail("observe", s, e);
    if (actions.count > capacity)
        bad("count " + std::to_string(actions.count) + " exceeds the buffer's capacity " + std::to_string(capacity));
    std::vector<action> out;
    out.reserve(actions.count);
    for (size_t i = 0; i < actions.count; ++i) {
        const altgrad_action& a = buffer_[i];
        const std::string at = "action " + std::to_string(i) + ": ";
        const char* reason = field_text(a.reason);
        const char* tensor = field_text(a.tensor);
        const char* format = field_text(a.format);
        if (reason == nullptr || tensor == nullptr || format == nullptr) bad(at + "a text field has no NUL");
        if (reason[0] == '\0') bad(at + "reason is empty");
        action r;
        r.kind = a.kind;
        r.reason = reason;
        switch (a.kind) {
            case ALTGRAD_ACTION_CLIP_GRAD_NORM:
                if (!(std::isfinite(a.value) && a.value > 0.0))
                    bad(at + "clip_grad_norm value must be finite and > 0, got " + std::to_string(a.value));
                r.value = a.value;
                break;
            case ALTGRAD_ACTION_SWITCH_FORMAT:
                if (tensor[0] == '\0' || format[0] == '\0') bad(at + "switch_format needs a tensor and a format");
                r.tensor = tensor;
                r.format = format;
                break;
            case ALTGRAD_ACTION_SKIP_STEP: break;
            default: bad(at + "unknown kind " + std::to_string(static_cast<int>(a.kind)));
        }
        out.push_back(std::move(r));
    }
    return out;
}

bool intervention_handle::saves_state() const {
    return ALTGRAD_STRUCT_HAS(vtable_, altgrad_intervention_vtable, load_state) && vtable_->save_state != nullptr &&
           vtable_->load_state != nullptr;
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
    if (!saves_state()) throw error("plugin '" + name() + "': save_state: the plugin does not save its state");
    std::string bytes;
    const altgrad_state_writer writer{sizeof(altgrad_state_writer), &bytes, &append_to_string};
    altgrad_error e = empty_error();
    const altgrad_status s = vtable_->save_state(instance_, &writer, &e);
    if (s != ALTGRAD_STATUS_OK) fail("save_state", s, e);
    return bytes;
}

void intervention_handle::load_state(const std::string& bytes) {
    if (!saves_state()) throw error("plugin '" + name() + "': load_state: the plugin does not load a state");
    altgrad_error e = empty_error();
    const altgrad_status s = vtable_->load_state(instance_, bytes.data(), bytes.size(), &e);
    if (s != ALTGRAD_STATUS_OK) fail("load_state", s, e);
}

std::vector<action> intervention_handle::observe(const observation& o) {
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
    const altgrad_observation c{sizeof(altgrad_observation),
                                o.step,
                                o.loss,
                                o.grad_norm,
                                o.learning_rate,
                                o.consecutive_nonfinite_steps,
                                tensors.empty() ? nullptr : tensors.data(),
                                tensors.size()};
    return observe(c);
}

}  // namespace altgrad::host
