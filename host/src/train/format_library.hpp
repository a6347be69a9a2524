// The plugins of a run's quantization, created once each by name and
// parameters: the formats of its sites, the scale formats of its blocks, its
// accumulators' formats or instructions and its products' transforms. No
// LibTorch here.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "config/run_config.hpp"
#include "plugins/accumulator_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "plugins/transform_handle.hpp"
#include "quant/block_scales.hpp"

namespace altgrad::host::train {

// The format plugins of a run, created once each by name. "fp32" is no
// plugin here: float32 is what the model computes in, so nothing to do.
class format_library {
public:
    // `where` names the config in errors ("configs/x.toml: quantization");
    // `params` are [quantization.params.NAME], given to plugin NAME.
    format_library(registry& plugins, std::string where, config::plugin_params params = {})
        : plugins_(plugins), where_(std::move(where)), params_(std::move(params)) {}
    // The plugin of format `name`; null for "fp32".
    std::shared_ptr<const format_handle> get(const std::string& name);
    // The values a block scale of scale_format `name` may take: "fp32",
    // "pow2", or a format plugin's positive finite values.
    const quant::scale_grid& scale_format(const std::string& name);
    // The fp32 plugin itself: the format diagnostics see for float32 tensors.
    std::shared_ptr<const format_handle> fp32() { return load("fp32"); }
    // Format `name` as an accumulator: the plugin ("fp32" included) with
    // `params`, or [quantization.params.NAME] when `params` is empty.
    std::shared_ptr<const format_handle> accumulator_format(const std::string& name,
                                                            const host::given_params& params);
    // The accumulator plugin (a GPU instruction) a product table names, created once per (name, params).
    std::shared_ptr<const accumulator_handle> instruction(const std::string& name,
                                                          const host::given_params& params);
    // The transform plugin a product table names, created once per (name, params).
    std::shared_ptr<const transform_handle> transform(const config::transform_config& t);
    // The plugin's own name of format `name` (an alias resolved: "float8_e5m2"
    // is "e5m2"); `name` itself when no format plugin is called that. Reads
    // manifests only.
    std::string own_name(const std::string& name);

private:
    std::shared_ptr<const format_handle> load(const std::string& name);
    registry& plugins_;
    std::string where_;
    config::plugin_params params_;
    std::map<std::string, std::shared_ptr<const format_handle>> handles_;
    std::map<std::pair<std::string, host::given_params>, std::shared_ptr<const format_handle>> with_params_;
    std::map<std::string, std::unique_ptr<quant::scale_grid>> grids_;
    std::map<std::pair<std::string, host::given_params>, std::shared_ptr<const transform_handle>> transforms_;
    std::map<std::pair<std::string, host::given_params>, std::shared_ptr<const accumulator_handle>>
        instructions_;
};

}  // namespace altgrad::host::train
