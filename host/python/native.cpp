// altgrad._native: the host's plugin code for Python (the package `altgrad`,
// docs/python.md). Everything numeric happens in the plugins, called through
// format_handle exactly as the CLI and the trainer call them; this file only
// checks buffers, releases the GIL and turns host errors into exceptions.
// No LibTorch: altgrad.torch hands tensors over as NumPy views (CPU) or raw
// device pointers (CUDA).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "native_matmul.hpp"
#include "native_runs.hpp"

#include "config/recipe.hpp"
#include "config/run_config.hpp"
#include "plugins/accumulator_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/plugin_json.hpp"
#include "plugins/registry.hpp"
#include "plugins/transform_handle.hpp"
#include "quant/accumulate.hpp"
#include "quant/block_scales.hpp"
#include "quant/scaling.hpp"
#include "quant/seeds.hpp"
#include "quant/vocabulary.hpp"
#include "util/abi_names.hpp"
#include "util/cpu_kernels.hpp"
#include "util/error.hpp"

namespace py = pybind11;
using namespace altgrad::host;

namespace {

// Plugin parameters from Python keep their type, as a config's do, so a
// string where the manifest says integer is refused: bool, int (or any
// integer with __index__, numpy's too), float (or anything with __float__),
// str.
given_params params_from_python(const py::dict& given) {
    given_params out;
    for (const auto& [k, item] : given) {
        const std::string key = py::str(k);
        const py::object v = py::reinterpret_borrow<py::object>(item);
        if (PyBool_Check(v.ptr()))
            out[key] = given_param(v.ptr() == Py_True ? "true" : "false", param_kind::boolean);
        else if (py::isinstance<py::str>(v))
            out[key] = given_param(v.cast<std::string>(), param_kind::string);
        else if (PyIndex_Check(v.ptr())) out[key] = given_param(py::str(py::int_(v)), param_kind::integer);
        else if (py::hasattr(v, "__float__"))
            out[key] = given_param(std::string(py::repr(py::float_(v))), param_kind::floating);
        else
            throw py::type_error("params['" + key + "']: expected a string, number or boolean, got " +
                                 std::string(py::str(py::type::of(v).attr("__name__"))));
    }
    return out;
}

// A registry that Python may close: afterwards every call on it is an error.
// Formats made before keep their plugin loaded (they share it).
class python_registry {
public:
    explicit python_registry(const std::string& dir, double probe_seconds) : folder_(dir) {
        py::gil_scoped_release unlocked;
        reg_ = std::make_unique<registry>(dir, probe_seconds);
    }

    registry& get() {
        if (!reg_) throw py::value_error("altgrad.Registry('" + folder_ + "') is closed");
        return *reg_;
    }
    void close() { reg_.reset(); }
    bool closed() const { return !reg_; }
    const std::string& folder() const { return folder_; }

    // Every plugin as `list --json` reports it (probing each, in a child process).
    std::vector<std::string> records_json() {
        registry& r = get();
        {
            py::gil_scoped_release unlocked;
            r.probe_all();
        }
        std::vector<std::string> out;
        for (const plugin_record& rec : r.records()) out.push_back(json_output(plugin_record_json(rec)));
        return out;
    }

    std::string describe_json(const std::string& name, const py::dict& given, bool table) {
        const given_params params = params_from_python(given);
        registry& r = get();
        std::shared_ptr<const loaded_plugin> plugin;
        {
            py::gil_scoped_release unlocked;
            plugin = r.load(name);
        }
        std::shared_ptr<format_handle> f;
        if (plugin->info.kind == ALTGRAD_KIND_FORMAT) f = format_handle::create(plugin, params, "params");
        else if (table) throw py::value_error("describe(table=True): '" + name + "' is not a format plugin");
        if (table && f->info().total_bits > 16)
            throw py::value_error("describe(table=True): '" + name + "' has " +
                                  std::to_string(f->info().total_bits) +
                                  " bits; tables are limited to formats of at most 16 bits");
        std::shared_ptr<transform_handle> t;
        if (plugin->info.kind == ALTGRAD_KIND_TRANSFORM)
            t = transform_handle::create(plugin, params, "params");
        return json_output(altgrad::host::describe_json(*plugin, f.get(), table, t.get()));
    }

    // A transform plugin's instance (ABI 1.4).
    std::shared_ptr<transform_handle> transform(const std::string& name, const py::dict& given) {
        const given_params params = params_from_python(given);
        registry& r = get();
        std::shared_ptr<const loaded_plugin> plugin;
        {
            py::gil_scoped_release unlocked;
            plugin = r.load(name);
        }
        if (plugin->info.kind != ALTGRAD_KIND_TRANSFORM)
            throw error("plugin '" + name + "' is a " + kind_name(plugin->info.kind) +
                        " plugin, not a transform");
        return transform_handle::create(plugin, params, "params");
    }

    // The kind of the plugin called `name` ("format", "accumulator", ...; "unknown" for an unreadable
    // manifest).
    std::string kind(const std::string& name) {
        const std::optional<altgrad_plugin_kind> k = get().kind_of(name);
        return k ? kind_name(*k) : "unknown";
    }

    // An accumulator plugin's instance (ABI 1.5).
    std::shared_ptr<accumulator_handle> accumulator(const std::string& name, const py::dict& given) {
        const given_params params = params_from_python(given);
        registry& r = get();
        std::shared_ptr<const loaded_plugin> plugin;
        {
            py::gil_scoped_release unlocked;
            plugin = r.load(name, ALTGRAD_KIND_ACCUMULATOR);
        }
        return accumulator_handle::create(plugin, params, "params");
    }

    std::shared_ptr<format_handle> format(const std::string& name, const py::dict& given) {
        const given_params params = params_from_python(given);
        registry& r = get();
        std::shared_ptr<const loaded_plugin> plugin;
        {
            py::gil_scoped_release unlocked;
            plugin = r.load(name);
        }
        if (plugin->info.kind != ALTGRAD_KIND_FORMAT)
            throw error("plugin '" + name + "' is a " + kind_name(plugin->info.kind) +
                        " plugin, not a format");
        return format_handle::create(plugin, params, "params");
    }

private:
    std::string folder_;
    std::unique_ptr<registry> reg_;
};

template <class E>
E parse_choice(const name_table<E>& names, const char* what, const std::string& s) {
    if (const std::optional<E> v = names.value(s)) return *v;
    throw py::value_error(std::string(what) + " '" + s + "': expected one of " + names.list());
}

std::string dtype_name(const py::dtype& d) { return py::str(py::handle(d)).cast<std::string>(); }

// A C-contiguous array of exactly `dtype`, writable when it is an output.
void check_array(const py::array& a, const py::dtype& dtype, const char* what, bool writable) {
    if (!a.dtype().is(dtype))
        throw py::type_error(std::string(what) + ": expected a " + dtype_name(dtype) + " array, got " +
                             dtype_name(a.dtype()) + " (convert it first; altgrad never copies)");
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(what) +
                              ": the array is not contiguous (pass a contiguous copy, e.g. "
                              "numpy.ascontiguousarray(x) or tensor.contiguous())");
    if (writable && !a.writeable()) throw py::value_error(std::string(what) + ": the array is read-only");
}

const py::dtype& float32() {
    static const py::dtype d = py::dtype::of<float>();
    return d;
}

// Output and input are the same buffer (in place) or apart, as the ABI requires.
void check_no_partial_overlap(const void* in, size_t in_bytes, const void* out, size_t out_bytes) {
    const auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
    if (a != b && a < b + out_bytes && b < a + in_bytes)
        throw py::value_error("out overlaps the input without being the input itself (in place: pass out=x)");
}

// The input and output of one call: each of its dtype, C-contiguous, the
// output writable, both of one size, which is returned.
size_t checked_pair(const char* call, const py::array& in, const py::dtype& in_type, const char* in_name,
                    const py::array& out, const py::dtype& out_type, const char* out_name) {
    check_array(in, in_type, (std::string(call) + " " + in_name).c_str(), false);
    check_array(out, out_type, (std::string(call) + " " + out_name).c_str(), true);
    if (in.size() != out.size())
        throw py::value_error(std::string(call) + ": " + out_name + " has " + std::to_string(out.size()) +
                              " elements, the " + in_name + " " + std::to_string(in.size()));
    return static_cast<size_t>(in.size());
}

struct conversion {
    quantize_options mode;
    int threads = 1;
};

conversion conversion_of(const std::string& rounding, const std::string& overflow, float scale, uint64_t seed,
                         uint64_t offset, const std::optional<py::array>& block_scales, size_t block_size,
                         size_t count, int threads, int64_t sr_bits = 32) {
    conversion c;
    if (sr_bits < 1 || sr_bits > 32)
        throw py::value_error("sr_bits " + std::to_string(sr_bits) + ": expected 1 .. 32 random bits");
    c.mode.random_bits = static_cast<uint32_t>(sr_bits);
    c.mode.rounding = parse_choice(rounding_names(), "rounding", rounding);
    c.mode.overflow = parse_choice(overflow_names(), "overflow", overflow);
    c.mode.scale = scale;
    c.mode.seed = seed;
    c.mode.offset = offset;
    if (threads < 1) throw py::value_error("threads " + std::to_string(threads) + ": expected at least 1");
    c.threads = threads;
    if (block_scales) {
        check_array(*block_scales, float32(), "block_scales", false);
        if (block_size == 0)
            throw py::value_error("block_scales given without block_size (elements per scale)");
        const size_t blocks = (count + block_size - 1) / block_size;
        if (static_cast<size_t>(block_scales->size()) != blocks)
            throw py::value_error("block_scales: expected " + std::to_string(blocks) + " scales (one per " +
                                  std::to_string(block_size) + " of " + std::to_string(count) +
                                  " elements), got " + std::to_string(block_scales->size()));
        c.mode.block_scales = static_cast<const float*>(block_scales->data());
        c.mode.block_size = block_size;
    } else if (block_size != 0) {
        throw py::value_error("block_size given without block_scales");
    }
    return c;
}

// call(begin, count, mode) over `threads` chunks, as the trainer chunks a
// tensor: each chunk carries its offset in the random stream (and its first
// block scale), so the result does not depend on the chunking. Chunks are
// whole blocks when block scales are set. Runs without the GIL.
template <class Call>
quantize_counts chunked(size_t n, const conversion& c, Call&& call) {
    py::gil_scoped_release unlocked;
    const size_t unit = c.mode.block_size > 0 ? c.mode.block_size : 1;
    const size_t units = (n + unit - 1) / unit;
    const size_t parts = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(c.threads), units));
    auto piece = [&](size_t p) {
        const size_t begin = std::min(n, units * p / parts * unit),
                     end = std::min(n, units * (p + 1) / parts * unit);
        quantize_options m = c.mode;
        m.offset = c.mode.offset + begin;
        if (m.block_scales != nullptr) m.block_scales += begin / unit;
        return call(begin, end - begin, m);
    };
    if (parts == 1) return piece(0);
    std::atomic<uint64_t> overflow{0}, underflow{0};
    std::vector<std::thread> workers;
    std::vector<std::exception_ptr> errors(parts);
    for (size_t p = 0; p < parts; ++p)
        workers.emplace_back([&, p] {
            try {
                const quantize_counts k = piece(p);
                overflow += k.overflow;
                underflow += k.underflow;
            } catch (...) {
                errors[p] = std::current_exception();
            }
        });
    for (std::thread& t : workers) t.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
    return {overflow, underflow};
}

std::pair<uint64_t, uint64_t> counts_pair(const quantize_counts& k) { return {k.overflow, k.underflow}; }

std::pair<uint64_t, uint64_t> quantize_arrays(const format_handle& f, const py::array& in, py::array& out,
                                              const std::string& rounding, const std::string& overflow,
                                              float scale, uint64_t seed, uint64_t offset,
                                              const std::optional<py::array>& block_scales, size_t block_size,
                                              int threads, int64_t sr_bits) {
    const size_t n = checked_pair("quantize", in, float32(), "input", out, float32(), "out");
    check_no_partial_overlap(in.data(), n * 4, out.data(), n * 4);
    const conversion c =
        conversion_of(rounding, overflow, scale, seed, offset, block_scales, block_size, n, threads, sr_bits);
    const auto* src = static_cast<const float*>(in.data());
    auto* dst = static_cast<float*>(out.mutable_data());
    return counts_pair(chunked(n, c, [&](size_t begin, size_t count, const quantize_options& m) {
        return f.quantize(src + begin, dst + begin, count, m);
    }));
}

// Format.quantize(block_size= or block_shape=, no block_scales): the
// trainer's block scaling (quant::quantize_blocked) on `in` as [rows, k],
// blocks of block_rows x block_cols; `scale_plugin` the format plugin
// named `scale_format` (None for "fp32" and "pow2").
std::pair<uint64_t, uint64_t> quantize_blocked_arrays(
    const format_handle& f, const py::array& in, py::array& out, size_t rows, size_t k, size_t block_rows,
    size_t block_cols, const std::string& scale_rule, const std::string& scale_format,
    std::shared_ptr<format_handle> scale_plugin, float pre_scale, const std::string& rounding,
    const std::string& overflow, uint64_t seed, uint64_t offset, int threads, int64_t sr_bits) {
    const size_t n = checked_pair("quantize", in, float32(), "input", out, float32(), "out");
    check_no_partial_overlap(in.data(), n * 4, out.data(), n * 4);
    if (rows * k != n)
        throw py::value_error("quantize: " + std::to_string(rows) + " rows of " + std::to_string(k) +
                              " are not the input's " + std::to_string(n) + " elements");
    if (!std::isfinite(pre_scale) || pre_scale <= 0.0f)
        throw py::value_error("pre_scale " + std::to_string(pre_scale) + ": expected a finite number > 0");
    const conversion c =
        conversion_of(rounding, overflow, 1.0f, seed, offset, std::nullopt, 0, n, threads, sr_bits);
    const quant::scale_grid grid = quant::scale_grid_named(scale_format, [&] {
        if (!scale_plugin)
            throw py::value_error("scale_format '" + scale_format + "': no format plugin given");
        return std::shared_ptr<const format_handle>(scale_plugin);
    });
    const quant::block_recipe recipe{parse_choice(config::scale_rule_names(), "scale_rule", scale_rule),
                                     &grid, f.info().max_finite};
    const auto* src = static_cast<const float*>(in.data());
    auto* dst = static_cast<float*>(out.mutable_data());
    py::gil_scoped_release unlocked;
    return counts_pair(quant::quantize_blocked(f, src, dst, rows, k, {block_rows, block_cols}, recipe, c.mode,
                                               pre_scale, static_cast<unsigned>(c.threads))
                           .counts);
}

// A CUDA tensor's buffers, by address (altgrad.torch checks dtype, layout and device).
std::pair<uint64_t, uint64_t> quantize_device(const format_handle& f, uintptr_t in, uintptr_t out, size_t n,
                                              int device_index, const std::string& rounding,
                                              const std::string& overflow, float scale, uint64_t seed,
                                              uint64_t offset, int64_t sr_bits) {
    if (!f.accepts(ALTGRAD_MEMORY_CUDA))
        throw error("format plugin '" + f.name() +
                    "' has no CUDA implementation (build with -DALTGRAD_CUDA=ON)");
    check_no_partial_overlap(reinterpret_cast<const void*>(in), n * 4, reinterpret_cast<const void*>(out),
                             n * 4);
    conversion c = conversion_of(rounding, overflow, scale, seed, offset, std::nullopt, 0, n, 1, sr_bits);
    c.mode.memory = ALTGRAD_MEMORY_CUDA;
    c.mode.device_index = device_index;
    py::gil_scoped_release unlocked;
    return counts_pair(
        f.quantize(reinterpret_cast<const float*>(in), reinterpret_cast<float*>(out), n, c.mode));
}

py::dtype code_dtype(const format_handle& f) {
    switch (f.info().code_bytes) {
        case 1: return py::dtype::of<uint8_t>();
        case 2: return py::dtype::of<uint16_t>();
        default: return py::dtype::of<uint32_t>();
    }
}

std::pair<uint64_t, uint64_t> encode_arrays(const format_handle& f, const py::array& in, py::array& codes,
                                            const std::string& rounding, const std::string& overflow,
                                            float scale, uint64_t seed, uint64_t offset,
                                            const std::optional<py::array>& block_scales, size_t block_size,
                                            int threads, int64_t sr_bits) {
    const size_t n = checked_pair("encode", in, float32(), "input", codes, code_dtype(f), "codes");
    const size_t width = f.info().code_bytes;
    const conversion c =
        conversion_of(rounding, overflow, scale, seed, offset, block_scales, block_size, n, threads, sr_bits);
    const auto* src = static_cast<const float*>(in.data());
    auto* dst = static_cast<unsigned char*>(codes.mutable_data());
    return counts_pair(chunked(n, c, [&](size_t begin, size_t count, const quantize_options& m) {
        return f.encode(src + begin, dst + begin * width, count, m);
    }));
}

void decode_arrays(const format_handle& f, const py::array& codes, py::array& out, float scale,
                   const std::optional<py::array>& block_scales, size_t block_size, int threads) {
    const size_t n = checked_pair("decode", codes, code_dtype(f), "codes", out, float32(), "out");
    const size_t width = f.info().code_bytes;
    const conversion c =
        conversion_of("nearest", "saturate", scale, 0, 0, block_scales, block_size, n, threads);
    const auto* src = static_cast<const unsigned char*>(codes.data());
    auto* dst = static_cast<float*>(out.mutable_data());
    chunked(n, c, [&](size_t begin, size_t count, const quantize_options& m) {
        f.decode(src + begin * width, dst + begin, count, m.scale, m.block_scales, m.block_size);
        return quantize_counts{};
    });
}

template <class E>
std::vector<std::string> names_in(uint32_t bits, const name_table<E>& names) {
    std::vector<std::string> out;
    for (const auto& [value, name] : names.entries())
        if (bits & (1u << value)) out.emplace_back(name);
    return out;
}

py::dict info_dict(const format_handle& f) {
    const altgrad_format_info& i = f.info();
    py::dict d;
    d["family"] = format_family_names().name(i.family);
    d["total_bits"] = i.total_bits;
    d["code_bytes"] = i.code_bytes;
    d["exponent_bits"] = i.exponent_bits;
    d["mantissa_bits"] = i.mantissa_bits;
    d["bias"] = i.bias;
    d["signed"] = i.is_signed != 0;
    d["zero"] = zero_kind_names().name(i.zero);
    d["subnormals"] = i.has_subnormals != 0;
    d["inf"] = i.has_inf != 0;
    d["nan_codes"] = i.nan_code_count;
    d["max_finite"] = i.max_finite;
    d["lowest_finite"] = i.lowest_finite;
    d["min_normal"] = i.min_normal;
    d["min_subnormal"] = i.min_subnormal;
    d["rounding_modes"] = names_in(i.rounding_modes, rounding_names());
    d["memory_kinds"] = names_in(i.memory_kinds, memory_kind_names());
    d["block_scales"] = f.takes_block_scales();
    d["random_bits"] = f.takes_random_bits();
    return d;
}

// A 2-D C-contiguous float32 array's (rows, cols).
std::pair<size_t, size_t> matrix_shape(const py::array& x, const char* what) {
    check_array(x, float32(), what, false);
    if (x.ndim() != 2)
        throw py::value_error(std::string(what) + ": expected a 2-D array, got " + std::to_string(x.ndim()) +
                              " dimensions");
    return {static_cast<size_t>(x.shape(0)), static_cast<size_t>(x.shape(1))};
}

// C = A·B through the accumulation model (quant/accumulate.hpp): a and b as stored, each
// C-contiguous, `transposed` when the stored array is the operand's transpose.
py::array matmul_arrays(std::shared_ptr<const format_handle> f, const py::array& a, bool a_transposed,
                        const py::array& b, bool b_transposed, const std::string& rounding, int64_t mma_depth,
                        int64_t promote_every, int threads) {
    const auto [a0, a1] = matrix_shape(a, "matmul a");
    const auto [b0, b1] = matrix_shape(b, "matmul b");
    const size_t m = a_transposed ? a1 : a0, k = a_transposed ? a0 : a1;
    const size_t kb = b_transposed ? b1 : b0, n = b_transposed ? b0 : b1;
    if (k != kb)
        throw py::value_error("matmul: a is " + std::to_string(m) + " x " + std::to_string(k) + ", b " +
                              std::to_string(kb) + " x " + std::to_string(n) + ": their inner sizes differ");
    quant::accumulator_spec spec;
    const std::optional<altgrad_rounding> r = rounding_names().value(rounding);
    if (!r || *r == ALTGRAD_ROUND_STOCHASTIC)
        throw py::value_error("rounding '" + rounding + "': expected nearest or toward-zero");
    if (mma_depth < 1 || static_cast<uint64_t>(mma_depth) > quant::kMaxMmaDepth)
        throw py::value_error("mma_depth " + std::to_string(mma_depth) + ": expected 1 .. " +
                              std::to_string(quant::kMaxMmaDepth));
    if (promote_every < 0)
        throw py::value_error("promote_every " + std::to_string(promote_every) +
                              ": expected 0 (never) or more");
    if (threads < 0)
        throw py::value_error("threads " + std::to_string(threads) + ": expected 0 (every core) or more");
    spec.rounding = *r;
    spec.mma_depth = static_cast<size_t>(mma_depth);
    spec.promote_every = static_cast<size_t>(promote_every);
    const quant::accumulator acc(std::move(f), spec);
    py::array_t<float> c({static_cast<py::ssize_t>(m), static_cast<py::ssize_t>(n)});
    const quant::gemm_operands p{
        static_cast<const float*>(a.data()),
        a_transposed ? quant::operand_layout::transposed : quant::operand_layout::as_is,
        static_cast<const float*>(b.data()),
        b_transposed ? quant::operand_layout::transposed : quant::operand_layout::as_is,
        m,
        k,
        n};
    float* out = c.mutable_data();
    {
        py::gil_scoped_release unlocked;
        acc.gemm(p, out, static_cast<unsigned>(threads));
    }
    return c;
}

// A recipe (a config's TOML text) resolved for a model's layers, as the
// trainer resolves it (config::resolve, config/recipe.hpp):
// {"globals": {...}, "params": {format: {key: value}}, "layers": {layer:
// {product: {"transform", "accumulator", OPERAND: {...}}}}, "seed": training.seed, "source"}: each
// transform, accumulator and operand with the "key" that set it, for errors. A second use's
// "own" says whether it is quantized with settings of its own
// (the resolver's product_recipe::own), else as its first use. Errors name the key.
// A config's plugin parameters as Python values of their TOML kinds, so they
// go back into params_from_python unchanged.
py::dict params_dict(const given_params& values) {
    py::dict d;
    for (const auto& [key, value] : values) {
        const py::str k(key);
        switch (value.kind) {
            case param_kind::integer: d[k] = py::int_(std::stoll(value.text)); break;
            case param_kind::floating: d[k] = py::float_(std::stod(value.text)); break;
            case param_kind::boolean: d[k] = py::bool_(value.text == "true"); break;
            case param_kind::string:
            case param_kind::text: d[k] = value.text; break;
        }
    }
    return d;
}

py::dict plugin_params_dict(const config::plugin_params& params) {
    py::dict d;
    for (const auto& [name, values] : params) d[py::str(name)] = params_dict(values);
    return d;
}

py::dict resolve_recipe(const std::string& toml_text, const std::string& source,
                        const std::vector<std::string>& overrides, const std::vector<std::string>& layers) {
    const config::run_config c = config::parse_config_for_layers(toml_text, source, layers, overrides);
    const config::quantization_config& q = c.quantization;
    py::dict globals;
    globals["enabled"] = q.enabled;
    globals["overflow"] = overflow_name(q.overflow);
    globals["sr_bits"] = q.sr_bits;
    globals["scaling"] = config::scaling_names().name(q.scaling);
    globals["amax_history_len"] = q.amax_history_len;
    globals["amax_compute"] = config::amax_compute_names().name(q.amax_compute);
    globals["margin"] = q.margin;
    globals["tensor_scale"] = config::tensor_scale_names().name(q.tensor_scale);
    globals["first_scale"] = config::first_scale_names().name(q.first_scale);
    py::dict per_layer;
    config::quantization_config as_written = q;  // the layers' settings as written, quantization on or off
    as_written.enabled = true;
    for (const config::layer_recipe& layer : config::resolve(as_written, layers).layers) {
        py::dict products;
        for (const config::product_recipe& pr : layer.products) {
            const config::product_kind product = pr.product;
            py::dict d;
            d["transform"] = py::none();
            if (const auto& t = pr.transform) {
                py::dict td;
                td["name"] = t->name;
                td["params"] = params_dict(t->params);
                td["key"] = pr.transform_key;
                d["transform"] = td;
            }
            d["accumulator"] = py::none();
            if (const auto& a = pr.accumulator) {
                py::dict ad;
                ad["format"] = a->format;
                ad["instruction"] = a->instruction;
                ad["params"] = params_dict(
                    a->params.empty() && q.params.count(a->format) ? q.params.at(a->format) : a->params);
                ad["rounding"] = rounding_name(a->rounding);
                ad["mma_depth"] = a->mma_depth;
                ad["promote_every"] = a->promote_every;
                ad["key"] = pr.accumulator_key;
                d["accumulator"] = ad;
            }
            for (config::operand_kind o : config::operands_of(product)) {
                const config::operand_spec& s = pr.operand(o);
                py::dict od;
                od["format"] = s.format;
                od["rounding"] = rounding_name(s.rounding);
                od["granularity"] = config::granularity_names().name(s.granularity);
                od["block_size"] = s.block_size;
                od["block_rows"] = s.block_rows;
                od["scale_format"] = s.scale_format;
                od["scale_rule"] = config::scale_rule_names().name(s.scale_rule);
                od["pre_scale"] = s.pre_scale;
                od["source"] = config::copy_source_names().name(s.source);
                od["own"] = pr.owns(o);
                od["key"] = s.key;
                od["tile_key"] = s.tile_key;
                d[config::operand_names().name(o)] = od;
            }
            products[config::product_names().name(product)] = d;
        }
        per_layer[py::str(layer.layer)] = products;
    }
    py::dict out;
    out["globals"] = globals;
    out["params"] = plugin_params_dict(q.params);
    out["layers"] = per_layer;
    out["seed"] = c.training.seed;
    out["source"] = source;
    return out;
}

quant::scaling_state make_scaling(const std::string& mode, int history_len, const std::string& amax_compute,
                                  int margin, double format_max, const std::string& tensor_scale,
                                  const std::string& first_scale) {
    quant::scaling_config c;
    c.values = parse_choice(config::tensor_scale_names(), "tensor_scale", tensor_scale);
    c.first = parse_choice(config::first_scale_names(), "first_scale", first_scale);
    c.mode = parse_choice(config::scaling_names(), "scaling", mode);
    c.compute = parse_choice(config::amax_compute_names(), "amax_compute", amax_compute);
    if (history_len < 1 || history_len > 1024)
        throw py::value_error("amax_history_len " + std::to_string(history_len) + ": expected 1..1024");
    if (margin < 0 || margin > 64)
        throw py::value_error("margin " + std::to_string(margin) + ": expected 0..64");
    c.history_len = history_len;
    c.margin = margin;
    return quant::scaling_state(c, format_max);
}

py::dict transform_info_dict(const transform_handle& t) {
    const altgrad_transform_info& i = t.info();
    py::dict d;
    d["block_size"] = i.block_size;
    d["self_inverse"] = i.self_inverse != 0;
    d["uses_seed"] = i.uses_seed != 0;
    d["memory_kinds"] = names_in(i.memory_kinds, memory_kind_names());
    return d;
}

// The transform along the last dimension: `input` as rows of `cols`
// elements, into `out` (the same array for in place). Runs without the GIL.
void apply_transform(const transform_handle& t, const py::array& input, py::array out, size_t cols,
                     uint64_t seed, bool inverse) {
    const size_t n = checked_pair("apply", input, float32(), "input", out, float32(), "out");
    check_no_partial_overlap(input.data(), n * sizeof(float), out.data(), n * sizeof(float));
    if (cols == 0 || n % cols != 0)
        throw py::value_error("apply: the last dimension (" + std::to_string(cols) +
                              ") does not divide the " + std::to_string(n) + " elements");
    const float* in = static_cast<const float*>(input.data());
    float* dst = static_cast<float*>(out.mutable_data());
    py::gil_scoped_release unlocked;
    t.apply(in, dst, n / cols, cols, seed, inverse);
}

// The block scale rules' table (quant/vocabulary.hpp), for altgrad.scale_rules().
py::list scale_rules_list() {
    py::list out;
    for (const quant::scale_rule_info& r : quant::scale_rules())
        out.append(py::dict(py::arg("name") = r.name, py::arg("description") = r.description,
                            py::arg("source") = r.source, py::arg("needs_tensor_amax") = r.needs_tensor_amax,
                            py::arg("may_clip") = r.may_clip));
    return out;
}

// The trainer's CPU kernel pin (util/cpu_kernels.hpp): ({variable: value}, its name, why it does not
// apply here or "").
py::tuple cpu_kernel_pin_tuple() {
    const cpu_kernel_pin pin = cpu_kernel_pin_here();
    py::dict variables;
    for (const auto& [variable, value] : pin.variables) variables[py::str(variable)] = value;
    return py::make_tuple(variables, pin.name, pin.unpinned);
}

}  // namespace

PYBIND11_MODULE(_native, m) {
    m.doc() = "AltGrad's plugin host, bound for Python (use the package `altgrad`, not this module)";
    py::register_exception<error>(m, "Error", PyExc_RuntimeError);

    py::class_<python_registry>(m, "Registry")
        .def(py::init<const std::string&, double>(), py::arg("plugin_dir"), py::arg("probe_seconds"))
        .def_property_readonly("folder", &python_registry::folder)
        .def_property_readonly("closed", &python_registry::closed)
        .def("close", &python_registry::close)
        .def("records_json", &python_registry::records_json)
        .def("describe_json", &python_registry::describe_json, py::arg("name"), py::arg("params"),
             py::arg("table"))
        .def("format", &python_registry::format, py::arg("name"), py::arg("params"))
        .def("transform", &python_registry::transform, py::arg("name"), py::arg("params"))
        .def("kind", &python_registry::kind, py::arg("name"))
        .def("accumulator", &python_registry::accumulator, py::arg("name"), py::arg("params"));
    altgrad::host::python::bind_instruction_matmul(m);
    altgrad::host::python::bind_runs(m);

    py::class_<transform_handle, std::shared_ptr<transform_handle>>(m, "Transform")
        .def_property_readonly("name", [](const transform_handle& t) { return t.name(); })
        .def_property_readonly("info", &transform_info_dict)
        .def("apply", &apply_transform, py::arg("input"), py::arg("out"), py::arg("cols"), py::arg("seed"),
             py::arg("inverse"));

    py::class_<format_handle, std::shared_ptr<format_handle>>(m, "Format")
        .def_property_readonly("name", [](const format_handle& f) { return f.name(); })
        .def_property_readonly("info", &info_dict)
        .def_property_readonly("code_dtype", &code_dtype)
        .def("quantize", &quantize_arrays, py::arg("input"), py::arg("out"), py::arg("rounding"),
             py::arg("overflow"), py::arg("scale"), py::arg("seed"), py::arg("offset"),
             py::arg("block_scales"), py::arg("block_size"), py::arg("threads"), py::arg("sr_bits") = 32)
        .def("quantize_blocked", &quantize_blocked_arrays, py::arg("input"), py::arg("out"), py::arg("rows"),
             py::arg("k"), py::arg("block_rows"), py::arg("block_cols"), py::arg("scale_rule"),
             py::arg("scale_format"), py::arg("scale_plugin"), py::arg("pre_scale"), py::arg("rounding"),
             py::arg("overflow"), py::arg("seed"), py::arg("offset"), py::arg("threads"),
             py::arg("sr_bits") = 32)
        .def("quantize_device", &quantize_device, py::arg("input_ptr"), py::arg("out_ptr"), py::arg("count"),
             py::arg("device_index"), py::arg("rounding"), py::arg("overflow"), py::arg("scale"),
             py::arg("seed"), py::arg("offset"), py::arg("sr_bits") = 32)
        .def("encode", &encode_arrays, py::arg("input"), py::arg("codes"), py::arg("rounding"),
             py::arg("overflow"), py::arg("scale"), py::arg("seed"), py::arg("offset"),
             py::arg("block_scales"), py::arg("block_size"), py::arg("threads"), py::arg("sr_bits") = 32)
        .def("decode", &decode_arrays, py::arg("codes"), py::arg("out"), py::arg("scale"),
             py::arg("block_scales"), py::arg("block_size"), py::arg("threads"));

    py::class_<quant::scaling_state>(m, "ScalingState")
        .def(py::init(&make_scaling), py::arg("mode"), py::arg("history_len"), py::arg("amax_compute"),
             py::arg("margin"), py::arg("format_max"), py::arg("tensor_scale") = "pow2",
             py::arg("first_scale") = "amax")
        .def("scale_for", &quant::scaling_state::scale_for, py::arg("amax"))
        .def("record", &quant::scaling_state::record, py::arg("amax"))
        .def_property_readonly("scale", &quant::scaling_state::scale);

    m.def("matmul", &matmul_arrays, py::arg("format"), py::arg("a"), py::arg("a_transposed"), py::arg("b"),
          py::arg("b_transposed"), py::arg("rounding"), py::arg("mma_depth"), py::arg("promote_every"),
          py::arg("threads"));
    m.def("pattern_matches", &config::pattern_matches, py::arg("pattern"), py::arg("name"));
    m.def("resolve_recipe", &resolve_recipe, py::arg("toml_text"), py::arg("source"), py::arg("overrides"),
          py::arg("layers"));
    m.def("rounding_names", [] { return names_in(~0u, rounding_names()); });
    m.def("scale_rules", &scale_rules_list);
    // The trainer's seed derivation (quant/seeds.hpp), for QuantLinear's random bits.
    m.def("seed_of", &quant::seed_of, py::arg("run_seed"), py::arg("step"), py::arg("stream"));
    m.def(
        "operand_stream",
        [](size_t layer, int role, size_t layers, bool second_copy) {
            if (role < 0 || role > 2)
                throw py::value_error("role: 0 (weight), 1 (activation) or 2 (gradient)");
            return quant::operand_stream(layer, static_cast<quant::operand_role>(role), layers, second_copy);
        },
        py::arg("layer"), py::arg("role"), py::arg("layers"), py::arg("second_copy"));
    m.def("transform_stream", &quant::transform_stream, py::arg("layer"), py::arg("product"));
    m.def("cpu_kernel_pin", &cpu_kernel_pin_tuple);
}
