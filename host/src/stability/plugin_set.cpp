#include "stability/plugin_set.hpp"

#include <cmath>
#include <fstream>
#include <iterator>

#include "util/abi_names.hpp"
#include "util/error.hpp"
#include "util/file_text.hpp"

namespace altgrad::host::stability {

namespace {

// Load `name` and create it with its parameters; errors say where it was enabled.
template <class Handle>
std::shared_ptr<Handle> create_from_config(const config::run_config& c, registry& plugins,
                                           const std::string& name, const config::plugin_params& params,
                                           const std::string& list_key, const std::string& params_key) {
    const std::string file = c.source.string();
    std::shared_ptr<const loaded_plugin> plugin;
    try {
        plugin = plugins.load(name);
    } catch (const error& e) {
        throw error(file + ": key '" + list_key + "': " + e.what());
    }
    const auto it = params.find(name);
    static const host::given_params none;
    try {
        return Handle::create(plugin, it == params.end() ? none : it->second,
                              file + ": " + params_key + "." + name);
    } catch (const error& e) {
        const std::string what = e.what();
        // Handle::create names the params source itself; a kind mismatch does not.
        throw error(what.rfind(file, 0) == 0 ? what : file + ": key '" + list_key + "': " + what);
    }
}

}  // namespace

intervention_set::intervention_set(const config::run_config& c, registry& plugins) {
    for (const std::string& name : c.stability.interventions)
        handles_.push_back(create_from_config<intervention_handle>(
            c, plugins, name, c.stability.params, "stability.interventions", "stability.params"));
}

std::vector<plugin_action> intervention_set::observe(observation o,
                                                     const std::vector<run::tensor_line>& tensors,
                                                     const std::map<std::string, double>& format_max) {
    o.tensors.clear();
    for (const run::tensor_line& t : tensors) {
        tensor_observation seen;
        seen.name = t.tensor;
        seen.role = tensor_role_names().value(t.role).value_or(ALTGRAD_TENSOR_WEIGHT);
        seen.format = t.format;
        const auto max = format_max.find(t.format);
        seen.format_max = max == format_max.end() ? NAN : max->second;
        seen.overflow_rate = t.overflow_rate();
        seen.underflow_rate = t.underflow_rate();
        seen.bit_stall_rate = t.bit_stall_rate();
        o.tensors.push_back(std::move(seen));
    }
    std::vector<plugin_action> out;
    for (const auto& h : handles_)
        for (action& a : h->observe(o)) out.push_back({h->name(), std::move(a)});
    return out;
}

diagnostic_set::diagnostic_set(const config::run_config& c, registry& plugins) {
    for (const std::string& name : c.diagnostics.plugins)
        handles_.push_back(create_from_config<diagnostic_handle>(
            c, plugins, name, c.diagnostics.params, "diagnostics.plugins", "diagnostics.params"));
}

void diagnostic_set::describe_headlines(run::metric_catalog& catalog) const {
    for (const auto& h : handles_)
        for (const diagnostic_headline& d : h->headlines()) {
            run::metric m;
            m.name = m.summary_of = d.value;
            m.record = run::metric_record::diagnostic;
            m.unit = d.unit;
            m.source = h->name();
            m.title = d.title;
            m.series = d.series;
            m.label = d.label;
            m.summary = d.summary == ALTGRAD_HEADLINE_MAX   ? run::tensor_summary::max
                        : d.summary == ALTGRAD_HEADLINE_MIN ? run::tensor_summary::min
                                                            : run::tensor_summary::mean;
            m.log_scale = d.log_scale;
            catalog.add(m);
        }
}

uint32_t diagnostic_set::interests() const {
    uint32_t all = 0;
    for (const auto& h : handles_) all |= h->interests();
    return all;
}

namespace {
std::filesystem::path state_file(const std::filesystem::path& dir, const intervention_handle& h) {
    return dir / "interventions" / (h.name() + ".state");
}
}  // namespace

void intervention_set::save_states(const std::filesystem::path& dir) const {
    for (const auto& h : handles_) {
        if (!h->saves_state()) continue;
        const std::filesystem::path file = state_file(dir, *h);
        std::filesystem::create_directories(file.parent_path());
        const std::string bytes = h->save_state();
        std::ofstream out(file, std::ios::binary);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!out.flush()) throw error(file.string() + ": cannot write the intervention's state");
    }
}

void intervention_set::load_states(const std::filesystem::path& dir, std::ostream& log) {
    for (const auto& h : handles_) {
        const std::filesystem::path file = state_file(dir, *h);
        if (std::filesystem::exists(file)) {
            if (!h->saves_state())
                throw error(file.string() + ": intervention '" + h->name() +
                            "' saved a state, but this build of the plugin cannot load one (no load_state)");
            try {
                h->load_state(read_file_text(file, kPluginStateLimit, "an intervention's saved state"));
            } catch (const error& e) {
                throw error(file.string() + ": " + e.what());
            }
        } else if (h->saves_state()) {
            log << "intervention " << h->name() << ": no saved state in " << dir.string()
                << " (it was not enabled then); it starts afresh\n";
        } else {
            log << "intervention " << h->name()
                << ": the plugin saves no state (ABI 1.0 or stateless); it starts afresh\n";
        }
    }
}

}  // namespace altgrad::host::stability
