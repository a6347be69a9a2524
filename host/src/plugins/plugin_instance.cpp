#include "plugins/plugin_instance.hpp"

#include <cstring>

#include "plugins/accumulator_handle.hpp"
#include "plugins/diagnostic_handle.hpp"
#include "plugins/format_handle.hpp"  // and status_name
#include "plugins/intervention_handle.hpp"
#include "plugins/params.hpp"
#include "plugins/transform_handle.hpp"
#include "util/error.hpp"

namespace altgrad::host {

namespace {
// The kind each table serves, and where an entry holds it.
altgrad_plugin_kind kind_of(const altgrad_format_vtable*) { return ALTGRAD_KIND_FORMAT; }
altgrad_plugin_kind kind_of(const altgrad_diagnostic_vtable*) { return ALTGRAD_KIND_DIAGNOSTIC; }
altgrad_plugin_kind kind_of(const altgrad_intervention_vtable*) { return ALTGRAD_KIND_INTERVENTION; }
altgrad_plugin_kind kind_of(const altgrad_transform_vtable*) { return ALTGRAD_KIND_TRANSFORM; }
altgrad_plugin_kind kind_of(const altgrad_accumulator_vtable*) { return ALTGRAD_KIND_ACCUMULATOR; }
void table_of(const altgrad_entry& e, const altgrad_format_vtable*& t) { t = e.format; }
void table_of(const altgrad_entry& e, const altgrad_diagnostic_vtable*& t) { t = e.diagnostic; }
void table_of(const altgrad_entry& e, const altgrad_intervention_vtable*& t) { t = e.intervention; }
// The loader admits a transform plugin only when its entry holds the field (ABI 1.4).
void table_of(const altgrad_entry& e, const altgrad_transform_vtable*& t) { t = e.transform; }
// And an accumulator plugin only when its entry holds that field (ABI 1.5).
void table_of(const altgrad_entry& e, const altgrad_accumulator_vtable*& t) { t = e.accumulator; }

// "a format", "an intervention".
std::string with_article(const char* noun) {
    return std::string(std::strchr("aeiou", noun[0]) != nullptr ? "an " : "a ") + noun;
}
}  // namespace

void throw_call_failed(const std::string& plugin, const char* call, altgrad_status s,
                       const altgrad_error& e) {
    throw error("plugin '" + plugin + "': " + call + " failed (" + status_name(s) +
                "): " + sdk::error_message(e));
}

template <class Handle, class Vtable>
plugin_instance<Handle, Vtable>::plugin_instance(std::shared_ptr<const loaded_plugin> plugin,
                                                 const host::given_params& params, const std::string& where)
    : plugin_(std::move(plugin)) {
    const altgrad_plugin_kind kind = kind_of(vtable_);
    if (plugin_->info.kind != kind)
        throw error("plugin '" + name() + "' is " + with_article(kind_name(plugin_->info.kind)) +
                    " plugin, not " + with_article(kind_name(kind)));
    const param_values values = resolve_params(plugin_->info, params, where);
    table_of(*plugin_->entry, vtable_);
    altgrad_error e = sdk::blank_error();
    const altgrad_status s = [&] {
        const noted_call noted(name(), "create");
        return vtable_->create(values.list(), &instance_, &e);
    }();
    // A failed create gives the host nothing to destroy (format.h: *out is
    // the caller's on success only), and a throw here skips the destructor.
    if (s != ALTGRAD_STATUS_OK) throw_call_failed(name(), "create", s, e);
    if (instance_ == nullptr) bad("create", "returned OK but no instance");
}

template <class Handle, class Vtable>
plugin_instance<Handle, Vtable>::~plugin_instance() {
    if (instance_ == nullptr) return;
    const noted_call noted(name(), "destroy");
    vtable_->destroy(instance_);
}

template <class Handle, class Vtable>
void plugin_instance<Handle, Vtable>::bad(const char* call, const std::string& what) const {
    throw error("plugin '" + name() + "': " + call + ": " + what);
}

template class plugin_instance<format_handle, altgrad_format_vtable>;
template class plugin_instance<diagnostic_handle, altgrad_diagnostic_vtable>;
template class plugin_instance<intervention_handle, altgrad_intervention_vtable>;
template class plugin_instance<transform_handle, altgrad_transform_vtable>;
template class plugin_instance<accumulator_handle, altgrad_accumulator_vtable>;

}  // namespace altgrad::host
