// altgrad._train: the trainer's quantized linear layer for PyTorch models
// (altgrad.torch, docs/python.md). A Plan is the trainer's quant_plan for a
// model's linear layers, built from a recipe by the trainer's own
// train::assign_formats; Plan.linear is train::quantized_linear, the
// trainer's autograd function, called on PyTorch's tensors (Debian's torch
// is built on the LibTorch the trainer links). So a QuantLinear computes what
// the trainer's layer computes, by the same code: one quantized linear.
// The one module of the package that includes LibTorch.
#include <torch/python.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <ATen/Parallel.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/run_config.hpp"
#include "plugins/registry.hpp"
#include "train/format_library.hpp"
#include "train/quant_plan.hpp"
#include "util/error.hpp"

namespace py = pybind11;

namespace altgrad::host::python {

namespace {

// One registry per plugin folder for the process: loading probes every
// plugin in a child process, which a model's plans need not repeat.
std::shared_ptr<registry> registry_for(const std::string& folder) {
    static std::mutex m;
    static std::map<std::string, std::shared_ptr<registry>> loaded;
    const std::lock_guard<std::mutex> lock(m);
    std::shared_ptr<registry>& r = loaded[folder];
    if (!r) r = std::make_shared<registry>(folder);
    return r;
}

// The trainer's plan for `layers` (a model's linear layers, in its order:
// layer k's random streams are the trainer's layer k's) from a recipe's text.
class python_plan {
public:
    python_plan(const std::string& plugin_dir, const std::string& toml_text, const std::string& source,
                const std::vector<std::string>& overrides, const std::vector<std::string>& layers,
                std::optional<uint64_t> seed)
        : plugins_(registry_for(plugin_dir)),
          config_(config::parse_config_for_layers(toml_text, source, layers, overrides)),
          formats_(*plugins_, config_.source.string() + ": quantization", config_.quantization.params) {
        for (const std::string& layer : layers) plan_.add_linear(layer);
        train::assign_formats(plan_, config_, formats_);
        plan_.seed = seed ? *seed : static_cast<uint64_t>(config_.training.seed);
    }

    // y = the layer's quantized linear of x (its last dimension in_features), w and b (None: no bias),
    // differentiable: its backward is the trainer's. `step` keys its random bits.
    torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w,
                         const std::optional<torch::Tensor>& b, size_t layer, uint64_t step) {
        check_layer(layer);
        plan_.step = step;
        plan_.gemm_threads = static_cast<unsigned>(std::max(1, at::get_num_threads()));
        return train::quantized_linear(x, w, b ? *b : torch::Tensor(), plan_, 3 * layer);
    }

    // The layer's quantized tensors at their last use (the run's tensor lines: name, role, format,
    // scale, amax, overflow, underflow, count, block statistics).
    py::list statistics(size_t layer) const {
        check_layer(layer);
        py::list out;
        for (const train::quant_site& s : plan_.sites) {
            if (s.layer != plan_.sites[3 * layer].layer) continue;
            const run::tensor_line t = train::record_of(s, static_cast<int64_t>(plan_.step), false);
            py::dict d;
            d["tensor"] = t.tensor;
            d["role"] = t.role;
            d["format"] = t.format;
            for (const auto& [name, value] : t.values.entries()) d[py::str(name)] = value;
            out.append(d);
        }
        return out;
    }

    uint64_t seed() const { return plan_.seed; }
    size_t layers() const { return plan_.second_uses.size(); }

private:
    void check_layer(size_t layer) const {
        if (layer >= layers())
            throw py::index_error("layer " + std::to_string(layer) + ": the plan has " +
                                  std::to_string(layers()) + " layers");
    }

    std::shared_ptr<registry> plugins_;
    config::run_config config_;
    train::format_library formats_;
    train::quant_plan plan_;
};

}  // namespace

}  // namespace altgrad::host::python

PYBIND11_MODULE(_train, m) {
    using altgrad::host::python::python_plan;
    m.doc() = "The trainer's quantized linear layer for PyTorch (use altgrad.torch, not this module)";
    // The host's errors as altgrad.Error, the package's one error type (held for the
    // process's life: never released after the interpreter has gone).
    static PyObject* error_type =
        py::object(py::module_::import("altgrad._native").attr("Error")).release().ptr();
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const altgrad::host::error& e) {
            PyErr_SetString(error_type, e.what());
        }
    });
    py::class_<python_plan>(m, "Plan")
        .def(py::init<const std::string&, const std::string&, const std::string&,
                      const std::vector<std::string>&, const std::vector<std::string>&,
                      std::optional<uint64_t>>(),
             py::arg("plugin_dir"), py::arg("toml_text"), py::arg("source"), py::arg("overrides"),
             py::arg("layers"), py::arg("seed"))
        .def("linear", &python_plan::linear, py::arg("x"), py::arg("w"), py::arg("b"), py::arg("layer"),
             py::arg("step"), py::call_guard<py::gil_scoped_release>())
        .def("statistics", &python_plan::statistics, py::arg("layer"))
        .def_property_readonly("seed", &python_plan::seed)
        .def_property_readonly("layers", &python_plan::layers);
}
