#include "plugins/diagnostic_handle.hpp"

#include <cstring>

#include "plugins/format_handle.hpp"  // status_name
#include "plugins/params.hpp"
#include "util/error.hpp"

namespace altgrad::host {

namespace {
altgrad_error empty_error() {
    altgrad_error e{};
    e.struct_size = sizeof e;
    return e;
}

bool valid_value_name(const char* s, size_t capacity) {
    const void* end = std::memchr(s, '\0', capacity);
    if (end == nullptr || s[0] == '\0') return false;
    for (; *s != '\0'; ++s)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '.')) return false;
    return true;
}
}  // namespace

void diagnostic_handle::fail(const char* call, altgrad_status s, const altgrad_error& e) const {
    throw error("plugin '" + name() + "': " + call + " failed (" + status_name(s) + "): " +
                (e.message[0] != '\0' ? e.message : "no message"));
}

void diagnostic_handle::bad(const std::string& what) const { throw error("plugin '" + name() + "': " + what); }

std::shared_ptr<diagnostic_handle> diagnostic_handle::create(std::shared_ptr<const loaded_plugin> plugin,
                                                             const std::map<std::string, std::string>& params,
                                                             const std::string& where) {
    if (plugin->info.kind != ALTGRAD_KIND_DIAGNOSTIC)
        throw error("plugin '" + plugin->info.name + "' is a " + kind_name(plugin->info.kind) +
                    " plugin, not a diagnostic");
    const param_values values = resolve_params(plugin->info, params, where);
    std::shared_ptr<diagnostic_handle> h(new diagnostic_handle());
    h->plugin_ = std::move(plugin);
    h->vtable_ = h->plugin_->entry->diagnostic;
    altgrad_error e = empty_error();
    const altgrad_status s = h->vtable_->create(values.list(), &h->instance_, &e);
    if (s != ALTGRAD_STATUS_OK) h->fail("create", s, e);
    if (h->instance_ == nullptr) h->fail("create", ALTGRAD_STATUS_INTERNAL, e);
    h->interests_ = h->vtable_->interests(h->instance_);
    h->max_values_ = h->vtable_->max_values_per_tensor(h->instance_);
    constexpr uint32_t known = (1u << ALTGRAD_TENSOR_WEIGHT) | (1u << ALTGRAD_TENSOR_GRADIENT) |
                               (1u << ALTGRAD_TENSOR_ACTIVATION) | (1u << ALTGRAD_TENSOR_ATTENTION_PROBS) |
                               (1u << ALTGRAD_TENSOR_OUTPUT_GRADIENT);
    if ((h->interests_ & ~known) != 0) h->bad("interests: unknown tensor roles " + std::to_string(h->interests_));
    if (h->max_values_ > (size_t{1} << 20))
        h->bad("max_values_per_tensor " + std::to_string(h->max_values_) + " is unreasonably large");
    return h;
}

diagnostic_handle::~diagnostic_handle() {
    if (instance_ != nullptr) vtable_->destroy(instance_);
}

std::vector<diagnostic_value> diagnostic_handle::measure(uint64_t step,
                                                         const std::vector<altgrad_tensor_view>& tensors) {
    return measure(step, tensors.data(), tensors.size());
}

std::vector<diagnostic_value> diagnostic_handle::measure(uint64_t step, const altgrad_tensor_view* tensors,
                                                         size_t n) {
    const size_t capacity = max_values_ * (n + 1);
    buffer_.assign(capacity, altgrad_diagnostic_value{});
    for (altgrad_diagnostic_value& v : buffer_) v.struct_size = sizeof v;
    altgrad_value_buffer values{sizeof(altgrad_value_buffer), buffer_.data(), capacity, 0};
    altgrad_error e = empty_error();
    const altgrad_status s = vtable_->measure(instance_, step, tensors, n, &values, &e);
    if (s != ALTGRAD_STATUS_OK) fail("measure", s, e);
    if (values.count > capacity)
        bad("measure: count " + std::to_string(values.count) + " exceeds the capacity " + std::to_string(capacity));
    std::vector<diagnostic_value> out;
    out.reserve(values.count);
    for (size_t i = 0; i < values.count; ++i) {
        const altgrad_diagnostic_value& v = buffer_[i];
        if (!valid_value_name(v.name, sizeof v.name))
            bad("measure: value " + std::to_string(i) + " has a name that is not [a-z0-9_.]+");
        if (v.tensor_index != ALTGRAD_ALL_TENSORS && v.tensor_index >= n)
            bad("measure: value '" + std::string(v.name) + "' names tensor " + std::to_string(v.tensor_index) +
                " of " + std::to_string(n));
        out.push_back({v.tensor_index, v.name, v.value});
    }
    return out;
}

}  // namespace altgrad::host
