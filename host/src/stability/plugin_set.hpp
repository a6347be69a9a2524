// The intervention and diagnostic plugins a run config enables, created once
// with their [stability.params.NAME] / [diagnostics.params.NAME] parameters
// (validated against each manifest; errors name the config file and key).
// No LibTorch here: the trainer builds the observations and tensor views.
#pragma once

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "config/run_config.hpp"
#include "plugins/diagnostic_handle.hpp"
#include "plugins/intervention_handle.hpp"
#include "plugins/registry.hpp"
#include "run/records.hpp"

namespace altgrad::host::stability {

// An action with the plugin that asked for it.
struct plugin_action {
    std::string plugin;
    action what;
};

class intervention_set {
public:
    intervention_set(const config::run_config& c, registry& plugins);
    bool empty() const { return handles_.empty(); }

    // Every plugin, in config order, sees the same observation (the ABI's
    // view): `o`'s step with `tensors`, each at its last use (bit stall where
    // it was measured at the end of the previous step), and its format's
    // largest value from `format_max` (by format name). Their actions in that order.
    std::vector<plugin_action> observe(observation o, const std::vector<run::tensor_line>& tensors,
                                       const std::map<std::string, double>& format_max);

    // Checkpoint folder `dir` gets interventions/NAME.state for each plugin
    // that saves its state (ABI 1.1). Throws host::error naming the file.
    void save_states(const std::filesystem::path& dir) const;
    // Each instance (fresh, nothing observed yet) gets the state saved in
    // `dir`; one line of `log` for each that starts afresh, saying why. A
    // state its plugin cannot load is an error naming the file.
    void load_states(const std::filesystem::path& dir, std::ostream& log);

private:
    std::vector<std::shared_ptr<intervention_handle>> handles_;
};

class diagnostic_set {
public:
    diagnostic_set(const config::run_config& c, registry& plugins);
    bool empty() const { return handles_.empty(); }
    const std::vector<std::shared_ptr<diagnostic_handle>>& handles() const { return handles_; }

    // The union of the plugins' interests (bit set of 1u << altgrad_tensor_role).
    uint32_t interests() const;

    // Each plugin's declared headline values (ABI 1.3) into the run's
    // catalog, as series of the report drawn from the values it measures. A
    // series another metric has taken is a host::error naming both.
    void describe_headlines(run::metric_catalog& catalog) const;

private:
    std::vector<std::shared_ptr<diagnostic_handle>> handles_;
};

}  // namespace altgrad::host::stability
