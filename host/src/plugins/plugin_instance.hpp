// What every created plugin instance shares, whatever its kind: the checks
// before create (the plugin is of this kind; the user's parameters resolve
// against its manifest), the create call, the one destroy, and turning a
// failed call's status and message into a host::error naming the plugin.
// format_handle, diagnostic_handle, intervention_handle, transform_handle and
// accumulator_handle derive from it
// (plugin_instance<the handle, its ABI table>) and add their typed calls.
//
// Ownership: a plugin_instance owns its plugin instance (destroyed exactly
// once, when the handle goes) and shares the loaded_plugin, so the library
// stays loaded while the instance lives. Neither copyable nor movable.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/call_args.hpp>

#include "plugins/call_record.hpp"
#include "plugins/loader.hpp"
#include "plugins/params.hpp"

namespace altgrad::host {

// The opaque instance type a kind's vtable creates and destroys
// (altgrad_format, altgrad_diagnostic, altgrad_intervention, altgrad_transform,
// altgrad_accumulator).
template <class Destroy>
struct instance_of;
template <class Instance>
struct instance_of<void (*)(Instance*)> {
    using type = Instance;
};

// "plugin 'NAME': CALL failed (STATUS): MESSAGE" ("no message" when the
// plugin left it empty or unterminated).
[[noreturn]] void throw_call_failed(const std::string& plugin, const char* call, altgrad_status s,
                                    const altgrad_error& e);

template <class Handle, class Vtable>
class plugin_instance {
public:
    using instance_type = typename instance_of<decltype(Vtable::destroy)>::type;

    // Create an instance of `plugin` with user parameters (key -> text);
    // `where` names their source in errors. Throws host::error when the
    // plugin is of another kind, a parameter is refused (create is then never
    // called), create fails or returns no instance, or Handle's own checks of
    // the new instance fail (the instance is then destroyed).
    static std::shared_ptr<Handle> create(std::shared_ptr<const loaded_plugin> plugin,
                                          const host::given_params& params = {},
                                          const std::string& where = "--param") {
        return std::shared_ptr<Handle>(new Handle(std::move(plugin), params, where));
    }

    plugin_instance(const plugin_instance&) = delete;
    plugin_instance& operator=(const plugin_instance&) = delete;

    const std::string& name() const { return plugin_->info.name; }
    const loaded_plugin& plugin() const { return *plugin_; }

protected:
    // See create().
    plugin_instance(std::shared_ptr<const loaded_plugin> plugin, const host::given_params& params,
                    const std::string& where);
    ~plugin_instance();

    const Vtable& vtable() const { return *vtable_; }
    instance_type* instance() const { return instance_; }

    // fn(instance, args..., &error) with a fresh error object; any status
    // but OK throws (see throw_call_failed). The call is noted for a crash
    // report (plugins/call_record.hpp).
    template <class Fn, class... Args>
    void call(const char* call_name, Fn fn, Args... args) const {
        altgrad_error e = sdk::blank_error();
        const altgrad_status s = [&] {
            const noted_call noted(name(), call_name);
            return fn(instance_, args..., &e);
        }();
        if (s != ALTGRAD_STATUS_OK) throw_call_failed(name(), call_name, s, e);
    }

    // "plugin 'NAME': CALL: WHAT": a call whose result breaks the ABI's rules.
    [[noreturn]] void bad(const char* call, const std::string& what) const;

private:
    std::shared_ptr<const loaded_plugin> plugin_;  // keeps the code loaded
    const Vtable* vtable_ = nullptr;
    instance_type* instance_ = nullptr;
};

// Instantiated in plugin_instance.cpp for the five handles.
class format_handle;
class diagnostic_handle;
class intervention_handle;
class transform_handle;
class accumulator_handle;
extern template class plugin_instance<format_handle, altgrad_format_vtable>;
extern template class plugin_instance<diagnostic_handle, altgrad_diagnostic_vtable>;
extern template class plugin_instance<intervention_handle, altgrad_intervention_vtable>;
extern template class plugin_instance<transform_handle, altgrad_transform_vtable>;
extern template class plugin_instance<accumulator_handle, altgrad_accumulator_vtable>;

}  // namespace altgrad::host
