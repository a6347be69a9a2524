#include "scaffold/new_plugin.hpp"

#include <fstream>

#include <altgrad/sdk/names.hpp>

#include "util/abi_names.hpp"
#include "util/error.hpp"

namespace altgrad::host::scaffold {
namespace fs = std::filesystem;

namespace {

// The templates: @NAME@ is the plugin's name, @ABI@ the ABI this host (and
// the SDK installed with it) speaks, @KIND@ the plugin's kind, @SERIES@ the
// diagnostic's headline series.
constexpr const char* kCMakeLists = R"(# @NAME@: an AltGrad @KIND@ plugin, built against the installed SDK.
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=/where/altgrad/is/installed
#   cmake --build build
cmake_minimum_required(VERSION 3.22)
project(altgrad_@NAME@ VERSION 0.1.0 LANGUAGES CXX)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

find_package(AltGrad REQUIRED)   # AltGrad::sdk (headers, C++17) and altgrad_add_plugin()

include(GNUInstallDirs)
# Builds build/plugins/@NAME@/libaltgrad_@NAME@.so beside a copy of manifest.toml:
# build/plugins is a plugin folder for `altgrad-host --plugins`. The plugin's name,
# version and description are read from manifest.toml into its source.
altgrad_add_plugin(NAME @NAME@
  SOURCES @NAME@.cpp
  MANIFEST manifest.toml
  INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/altgrad/plugins")
)";

constexpr const char* kManifest = R"([plugin]
kind = "@KIND@"
name = "@NAME@"
version = "0.1.0"            # name, version and description reach @NAME@.cpp from here
abi_version = "@ABI@"
library = "libaltgrad_@NAME@.so"
description = "@DESCRIPTION@"
)";

constexpr const char* kFormatDescription =
    "A 4-bit table format (as written: OCP MX FP4 E2M1, magnitudes 0..6, no Inf or NaN)";
constexpr const char* kFormatSource =
    R"(// @NAME@: a format plugin. As written it is a 4-bit table of values (the
// OCP MX FP4 E2M1 grid: a sign bit, then the magnitudes 0, 0.5, 1, 1.5, 2, 3,
// 4, 6); change the table (or return an exmy_format, fixed_point_format...)
// to try your own format. codebook_format rounds to the nearest value (ties
// to the even code), saturates or overflows to Inf/NaN, and counts overflow
// and underflow; the adapter does the rest (see docs/writing-a-plugin.md).
#include <altgrad/sdk/codebook.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {
altgrad::sdk::codebook_format make_format(const altgrad::sdk::param_view&) {
    return altgrad::sdk::codebook_format(4, {   // 4 bits: values_by_code[c] is code c's value
        0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,             // codes 0x0..0x7
        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f});   // codes 0x8..0xf
}
}  // namespace

ALTGRAD_FORMAT_PLUGIN(make_format)   // name, version and description: manifest.toml
)";

constexpr const char* kDiagnosticDescription =
    "Mean absolute value and the count of non-finite elements per weight tensor";
// (A raw string with a delimiter: the headline's title holds ")".)
constexpr const char* kDiagnosticSource =
    R"src(// @NAME@: a diagnostic plugin. Each measured step the host hands it the
// tensors of the roles interests() asks for; it answers named values per
// tensor (at most max_values_per_tensor()), which land in metrics.jsonl;
// `headlines` names the few a report draws over training.
// As written: the mean |w| of each weight tensor's finite elements, and how
// many were not finite; the report draws the mean of mean_abs over tensors.
#include <cmath>
#include <limits>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class @NAME@_diagnostic {
public:
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("mean_abs", "@SERIES@")
            .title("Mean |w| (mean over weight tensors of their finite elements' mean |w|)")
            .label("mean |w|")
            .summary(ALTGRAD_HEADLINE_MEAN),
    };

    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 2; }

    void measure(uint64_t /*step*/, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i) {
            const uint64_t nonfinite = sdk::finite_elements(tensors[i], finite_);  // copies the finite ones
            double sum = 0;
            for (const float x : finite_) sum += std::fabs(static_cast<double>(x));
            const double mean = finite_.empty() ? std::numeric_limits<double>::quiet_NaN()
                                                : sum / static_cast<double>(finite_.size());
            out.add(static_cast<uint32_t>(i), "mean_abs", mean);
            out.add(static_cast<uint32_t>(i), "nonfinite_count", static_cast<double>(nonfinite));
        }
    }

private:
    std::vector<float> finite_;
};

@NAME@_diagnostic make(const sdk::param_view&) { return @NAME@_diagnostic(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN(make)   // name, version and description: manifest.toml
)src";

constexpr const char* kInterventionDescription =
    "Clips the gradient norm to 1 in steps where a gradient overflows more than 1%";
constexpr const char* kInterventionSource =
    R"(// @NAME@: an intervention plugin. Once per step it sees the loss, the
// gradient norm and each tensor's overflow, underflow and bit-stall rates,
// and may answer actions: clip the gradient norm, switch a tensor's format,
// skip the step, each with a reason (recorded in the run's metrics).
// As written: clip the gradient norm to 1 when any gradient tensor's
// overflow rate passes 1%.
#include <altgrad/sdk/intervention_plugin.hpp>

namespace {

class @NAME@_intervention {
public:
    void observe(const altgrad_observation& o, altgrad::sdk::action_sink& out) {
        for (size_t i = 0; i < o.tensor_count; ++i) {
            const altgrad_tensor_observation& t = altgrad::sdk::observed_tensor(o, i);
            if (t.role == ALTGRAD_TENSOR_GRADIENT && t.overflow_rate > 0.01) {
                out.clip(1.0, "gradient overflow above 1%");
                return;
            }
        }
    }
};

@NAME@_intervention make(const altgrad::sdk::param_view&) { return @NAME@_intervention(); }
}  // namespace

ALTGRAD_INTERVENTION_PLUGIN(make)   // name, version and description: manifest.toml
)";

constexpr const char* kReadme = R"(# @NAME@: an AltGrad @KIND@ plugin

Written by `altgrad-host new-plugin @NAME@ --kind @KIND@`. Build it against an installed AltGrad
(`cmake --install BUILD --prefix PREFIX` in AltGrad's checkout), check it with the conformance
kit, and use it:

```sh
cmake -S . -B build -DCMAKE_PREFIX_PATH=PREFIX && cmake --build build
PREFIX/bin/altgrad-host --plugins build/plugins conformance @NAME@
cmake --install build --prefix PREFIX    # beside the bundled plugins, which a run needs too
PREFIX/bin/altgrad-host @USE@
```

`manifest.toml` is the plugin's identity: its name, version and description reach the library
through `altgrad_add_plugin` (the macro at the end of `@NAME@.cpp` takes them from there). Its
kind and parameters must agree with the source; the host says what differs. AltGrad's
`docs/writing-a-plugin.md` explains the SDK helpers, parameters and the ABI.
)";

std::string substitute(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
    for (const auto& [key, value] : values)
        for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
            text.replace(at, key.size(), value);
    return text;
}

}  // namespace

std::vector<fs::path> write_plugin_project(const std::string& name, altgrad_plugin_kind kind,
                                           const fs::path& dir) {
    if (!sdk::is_plugin_name(name))
        throw error("new-plugin: \"" + name + "\" is not a valid plugin name (" + sdk::kPluginNamePattern +
                    ", at most " + std::to_string(sdk::kMaxPluginNameLength) + " characters)");
    const fs::path root = (dir / name).lexically_normal();  // "my_fp4", not "./my_fp4"
    std::error_code ec;
    if (fs::exists(root, ec) && !(fs::is_directory(root, ec) && fs::is_empty(root, ec)))
        throw error("new-plugin: " + root.string() +
                    " exists and is not empty (choose another --dir or name)");
    fs::create_directories(root, ec);
    if (ec) throw error("new-plugin: cannot create " + root.string() + ": " + ec.message());

    const char* source = kind == ALTGRAD_KIND_FORMAT       ? kFormatSource
                         : kind == ALTGRAD_KIND_DIAGNOSTIC ? kDiagnosticSource
                                                           : kInterventionSource;
    const char* description = kind == ALTGRAD_KIND_FORMAT       ? kFormatDescription
                              : kind == ALTGRAD_KIND_DIAGNOSTIC ? kDiagnosticDescription
                                                                : kInterventionDescription;
    // How to use it once it passes and is installed beside the bundled
    // plugins (the installed host's default folder): trained with.
    const std::string use = std::string("run CONFIG.toml --set ") +
                            (kind == ALTGRAD_KIND_FORMAT       ? "quantization.weight_format="
                             : kind == ALTGRAD_KIND_DIAGNOSTIC ? "diagnostics.plugins="
                                                               : "stability.interventions=") +
                            name;
    // The diagnostic's headline series, "<name>.mean_abs" while that stays a
    // value name (shorter than 64 bytes).
    const std::string series =
        name.size() + 9 < ALTGRAD_VALUE_NAME_CAPACITY ? name + ".mean_abs" : std::string("mean_abs");
    const std::vector<std::pair<std::string, std::string>> values = {
        {"@DESCRIPTION@", description},
        {"@SERIES@", series},
        {"@NAME@", name},
        {"@KIND@", kind_name(kind)},
        {"@ABI@",
         std::to_string(ALTGRAD_ABI_VERSION_MAJOR) + "." + std::to_string(ALTGRAD_ABI_VERSION_MINOR)},
        {"@USE@", use}};
    const std::vector<std::pair<fs::path, const char*>> files = {{"CMakeLists.txt", kCMakeLists},
                                                                 {"manifest.toml", kManifest},
                                                                 {name + ".cpp", source},
                                                                 {"README.md", kReadme}};
    std::vector<fs::path> written;
    for (const auto& [file, text] : files) {
        const fs::path path = root / file;
        std::ofstream out(path, std::ios::trunc);
        out << substitute(text, values);
        out.close();
        if (!out) throw error("new-plugin: cannot write " + path.string());
        written.push_back(path);
    }
    return written;
}

}  // namespace altgrad::host::scaffold
