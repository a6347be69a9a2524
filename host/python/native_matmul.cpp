// altgrad.matmul through an accumulator plugin's instructions: the arrays
// checked and laid out as quant::instruction_product takes them (b and its
// scales, K x N and blocks x N in Python, become N x K and N x blocks).
#include "native_matmul.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugins/accumulator_handle.hpp"
#include "plugins/format_handle.hpp"
#include "quant/instruction_product.hpp"
#include "util/abi_names.hpp"
#include "util/error.hpp"

namespace py = pybind11;

namespace altgrad::host::python {

namespace {

// A 2-D C-contiguous float32 array's values and (rows, cols); a ValueError naming `what` otherwise.
struct matrix {
    const float* values = nullptr;
    size_t rows = 0, cols = 0;
};

matrix matrix_of(const py::array& x, const std::string& what) {
    if (!x.dtype().is(py::dtype::of<float>()) || x.ndim() != 2 || !(x.flags() & py::array::c_style))
        throw py::value_error("matmul " + what + ": expected a 2-D C-contiguous float32 array");
    return {static_cast<const float*>(x.data()), static_cast<size_t>(x.shape(0)),
            static_cast<size_t>(x.shape(1))};
}

std::vector<float> transposed(const matrix& x) {
    std::vector<float> out(x.rows * x.cols);
    for (size_t r = 0; r < x.rows; ++r)
        for (size_t c = 0; c < x.cols; ++c) out[c * x.rows + r] = x.values[r * x.cols + c];
    return out;
}

// The scale kind the scales' count of blocks along K names among those the
// accumulator takes: UE4M3 per 16 where that count is ceil(K / 16) and not
// ceil(K / 32) (or UE8M0 is not taken), UE8M0 per 32 otherwise.
altgrad_acc_scale_kind scale_kind_of(const accumulator_handle& acc, size_t k, size_t blocks) {
    const uint32_t kinds = acc.info().scale_kinds;
    const bool ue8m0 = kinds & (1u << ALTGRAD_ACC_SCALE_UE8M0_32),
               ue4m3 = kinds & (1u << ALTGRAD_ACC_SCALE_UE4M3_16);
    if (ue4m3 && blocks == (k + 15) / 16 && (!ue8m0 || blocks != (k + 31) / 32))
        return ALTGRAD_ACC_SCALE_UE4M3_16;
    if (ue8m0) return ALTGRAD_ACC_SCALE_UE8M0_32;
    if (ue4m3) return ALTGRAD_ACC_SCALE_UE4M3_16;
    throw py::value_error("matmul scale_a, scale_b: accumulator '" + acc.name() + "' takes no block scales");
}

// The scales' kind, after checking their shapes: scale_a [M, blocks], scale_b [blocks, N].
altgrad_acc_scale_kind checked_scales(const accumulator_handle& acc, const matrix& a, const matrix& b,
                                      const matrix& sa, const matrix& sb) {
    const altgrad_acc_scale_kind kind = scale_kind_of(acc, a.cols, sa.cols);
    const size_t block = quant::scale_block(kind), blocks = (a.cols + block - 1) / block;
    const std::string shape =
        std::to_string(block) + " elements along K (" + acc_scale_kind_names().name(kind) + ")";
    if (sa.rows != a.rows || sa.cols != blocks)
        throw py::value_error("matmul scale_a: expected " + std::to_string(a.rows) + " x " +
                              std::to_string(blocks) + ", one scale per " + shape + ", got " +
                              std::to_string(sa.rows) + " x " + std::to_string(sa.cols));
    if (sb.rows != blocks || sb.cols != b.cols)
        throw py::value_error("matmul scale_b: expected " + std::to_string(blocks) + " x " +
                              std::to_string(b.cols) + ", one scale per " + shape + ", got " +
                              std::to_string(sb.rows) + " x " + std::to_string(sb.cols));
    return kind;
}

// C = a @ b (a: M x K, b: K x N) through `acc`'s instructions, the operands values of their formats.
py::array matmul_instructions(const accumulator_handle& acc, const format_handle& a_format,
                              const format_handle& b_format, const py::array& a_array,
                              const py::array& b_array, int64_t promote_every,
                              const std::optional<py::array>& scale_a,
                              const std::optional<py::array>& scale_b, int threads) {
    const matrix a = matrix_of(a_array, "a"), b = matrix_of(b_array, "b");
    if (a.cols != b.rows)
        throw py::value_error("matmul: a is " + std::to_string(a.rows) + " x " + std::to_string(a.cols) +
                              ", b " + std::to_string(b.rows) + " x " + std::to_string(b.cols) +
                              ": their inner sizes differ");
    if (promote_every < 0)
        throw py::value_error("promote_every " + std::to_string(promote_every) +
                              ": expected 0 (never) or more");
    if (threads < 0)
        throw py::value_error("threads " + std::to_string(threads) + ": expected 0 (every core) or more");
    if (scale_a.has_value() != scale_b.has_value())
        throw py::value_error("matmul: scale_a and scale_b go together (block scales for both operands)");
    quant::check_values(a_format, a.values, a.rows, a.cols, "a");
    quant::check_values(b_format, b.values, b.rows, b.cols, "b");
    quant::instruction_operands p;
    const std::vector<float> b_t = transposed(b);
    p.a = a.values;
    p.b = b_t.data();
    p.m = a.rows;
    p.k = a.cols;
    p.n = b.cols;
    p.a_min_exponent = quant::min_exponent(a_format);
    p.b_min_exponent = quant::min_exponent(b_format);
    std::vector<float> sb_t;
    if (scale_a) {
        const matrix sa = matrix_of(*scale_a, "scale_a"), sb = matrix_of(*scale_b, "scale_b");
        p.scale_kind = checked_scales(acc, a, b, sa, sb);
        // Checked as Python holds them, so that an error's index is the caller's.
        quant::check_scales(p.scale_kind, sa.values, sa.rows, sa.cols, "scale_a");
        quant::check_scales(p.scale_kind, sb.values, sb.rows, sb.cols, "scale_b");
        sb_t = transposed(sb);
        p.a_scales = sa.values;
        p.b_scales = sb_t.data();
    }
    py::array_t<float> c({static_cast<py::ssize_t>(p.m), static_cast<py::ssize_t>(p.n)});
    float* out = c.mutable_data();
    {
        py::gil_scoped_release unlocked;
        quant::instruction_product(acc, p, static_cast<size_t>(promote_every), out,
                                   static_cast<unsigned>(threads));
    }
    return c;
}

}  // namespace

void bind_instruction_matmul(py::module_& m) {
    py::class_<accumulator_handle, std::shared_ptr<accumulator_handle>>(m, "Accumulator")
        .def_property_readonly("name", [](const accumulator_handle& x) { return x.name(); })
        .def_property_readonly("depth", [](const accumulator_handle& x) { return x.info().depth; });
    m.def("matmul_instructions", &matmul_instructions, py::arg("accumulator"), py::arg("a_format"),
          py::arg("b_format"), py::arg("a"), py::arg("b"), py::arg("promote_every"), py::arg("scale_a"),
          py::arg("scale_b"), py::arg("threads"));
}

}  // namespace altgrad::host::python
