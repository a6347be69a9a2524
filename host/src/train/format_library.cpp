#include "train/format_library.hpp"

#include "util/error.hpp"

namespace altgrad::host::train {

std::shared_ptr<const format_handle> format_library::get(const std::string& name) {
    if (name == "fp32") return nullptr;
    return load(name);
}

namespace {
// What a parameter's error names its source as: the config's key (or a params
// table) precedes it, as Python's registry says it ("params").
const char* const kParams = "params";
}  // namespace

std::shared_ptr<const format_handle> format_library::load(const std::string& name) {
    auto it = handles_.find(name);
    if (it != handles_.end()) return it->second;
    const auto params = params_.find(name);
    try {
        return handles_[name] = format_handle::create(
                   plugins_.load(name), params == params_.end() ? host::given_params{} : params->second,
                   kParams);
    } catch (const error& e) {
        throw error(where_ + ": format '" + name + "': " + e.what());
    }
}

std::shared_ptr<const format_handle> format_library::accumulator_format(const std::string& name,
                                                                        const host::given_params& params) {
    if (params.empty()) return load(name);
    std::shared_ptr<const format_handle>& f = with_params_[{name, params}];
    if (f) return f;
    try {
        return f = format_handle::create(plugins_.load(name), params, kParams);
    } catch (const error& e) {
        throw error("accumulator format '" + name + "': " + e.what());
    }
}

std::shared_ptr<const accumulator_handle> format_library::instruction(const std::string& name,
                                                                      const host::given_params& params) {
    std::shared_ptr<const accumulator_handle>& h = instructions_[{name, params}];
    if (!h) h = accumulator_handle::create(plugins_.load(name, ALTGRAD_KIND_ACCUMULATOR), params, kParams);
    return h;
}

std::shared_ptr<const transform_handle> format_library::transform(const config::transform_config& t) {
    std::shared_ptr<const transform_handle>& h = transforms_[{t.name, t.params}];
    if (!h) h = transform_handle::create(plugins_.load(t.name, ALTGRAD_KIND_TRANSFORM), t.params, kParams);
    return h;
}

const quant::scale_grid& format_library::scale_format(const std::string& name) {
    std::unique_ptr<quant::scale_grid>& grid = grids_[name];
    if (grid) return *grid;
    bool loaded = false;  // load()'s errors name the config already
    try {
        grid = std::make_unique<quant::scale_grid>(quant::scale_grid_named(name, [&] {
            std::shared_ptr<const format_handle> f = load(name);
            loaded = true;
            return f;
        }));
    } catch (const error& e) {
        grids_.erase(name);
        if (!loaded) throw;
        throw error(where_ + ": " + e.what());
    }
    return *grid;
}

std::string format_library::own_name(const std::string& name) {
    if (name == "fp32") return name;
    try {
        return plugins_.name_of(name, ALTGRAD_KIND_FORMAT);
    } catch (const error&) {
        return name;  // no format plugin: equal to no other name
    }
}

}  // namespace altgrad::host::train
