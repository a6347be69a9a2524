// altgrad.matmul through an accumulator plugin's instructions
// (quant/instruction_product.hpp), bound into the module `_native`.
#pragma once

#include <pybind11/pybind11.h>

namespace altgrad::host::python {

// The class Accumulator (an accumulator plugin's instance) and the function
// matmul_instructions.
void bind_instruction_matmul(pybind11::module_& m);

}  // namespace altgrad::host::python
