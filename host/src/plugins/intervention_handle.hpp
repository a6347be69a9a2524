// A created intervention-plugin instance, from the host's side: observe()
// once per step returning the plugin's actions as C++ values, checked (kind
// known, texts NUL-terminated, clip value finite and > 0, tensor and format set
// for a switch), and its saved state. Creation, ownership and a failed call's
// error (a host::error naming the plugin) are plugin_instance's. Not
// thread-safe: like the ABI says, one thread at a time per handle; separate
// handles are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

#include "plugins/loader.hpp"
#include "plugins/plugin_instance.hpp"
#include "util/abi_names.hpp"  // action_kind_name

namespace altgrad::host {

// One action a plugin asked for.
struct action {
    altgrad_action_kind kind = ALTGRAD_ACTION_CLIP_GRAD_NORM;
    double value = 0.0;  // CLIP_GRAD_NORM: the max norm
    std::string tensor;  // SWITCH_FORMAT: name or '*' pattern
    std::string format;  // SWITCH_FORMAT: the new format plugin's name
    std::string reason;  // always
};

// What the host saw of one tensor (owning strings; see altgrad_tensor_observation).
struct tensor_observation {
    std::string name;
    altgrad_tensor_role role = ALTGRAD_TENSOR_WEIGHT;
    std::string format;
    double format_max = 0.0;
    double overflow_rate = 0.0;
    double underflow_rate = 0.0;
    double bit_stall_rate = 0.0;  // NaN: not measured
};

// Everything seen in one step (see altgrad_observation).
struct observation {
    uint64_t step = 0;
    double loss = 0.0;
    double grad_norm = 0.0;
    double learning_rate = 0.0;
    uint32_t consecutive_nonfinite_steps = 0;
    std::vector<tensor_observation> tensors;
    uint64_t max_steps = 0;  // the run's length; 0: no run
};

class intervention_handle : public plugin_instance<intervention_handle, altgrad_intervention_vtable> {
public:
    // The smallest action buffer observe() offers; it offers
    // max(kMinActionCapacity, tensor_count + 16), so a plugin can answer one
    // action per tensor and a few global ones.
    static constexpr size_t kMinActionCapacity = 64;

    // The action buffer observe() offers for `tensor_count` tensors.
    static size_t action_capacity(size_t tensor_count);
    // The ABI's view of `o`: its tensors (pointing into o's strings), and the
    // observation pointing to `tensors` (an array of o.tensors.size(), NULL when empty).
    static std::vector<altgrad_tensor_observation> abi_tensors(const observation& o);
    static altgrad_observation abi_observation(const observation& o,
                                               const altgrad_tensor_observation* tensors);

    std::vector<action> observe(const altgrad_observation& o);
    std::vector<action> observe(const observation& o);
    // observe() into the caller's buffer of `capacity` actions (the conformance
    // kit hands a guarded one); the others use the handle's own.
    std::vector<action> observe(const altgrad_observation& o, altgrad_action* items, size_t capacity);

    // Whether the plugin saves its state (ABI 1.1 save_state/load_state).
    bool saves_state() const;
    // The instance's state as the plugin's own bytes; requires saves_state().
    std::string save_state() const;
    // Give a fresh instance a state from save_state() of the same plugin.
    void load_state(const std::string& bytes);
    // The same from the caller's buffer (the kit's guarded one).
    void load_state(const void* bytes, size_t size);

private:
    friend plugin_instance;
    intervention_handle(std::shared_ptr<const loaded_plugin> plugin, const host::given_params& params,
                        const std::string& where)
        : plugin_instance(std::move(plugin), params, where) {}

    std::vector<altgrad_action> buffer_;
};

}  // namespace altgrad::host
