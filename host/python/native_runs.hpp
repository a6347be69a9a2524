// Run directories and studies for Python (altgrad.runs, altgrad.host_metrics:
// docs/python.md), read by the report's own code, bound into the module `_native`.
#pragma once

#include <pybind11/pybind11.h>

namespace altgrad::host::python {

// host_metrics, read_run_series and study_summary_csv.
void bind_runs(pybind11::module_& m);

}  // namespace altgrad::host::python
