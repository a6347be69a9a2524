// fixed_point_format's quantize loops for the baseline x86-64 build (and every other target's only one),
// compiled once for every bundled plugin built with ALTGRAD_SDK_EXTERN_FORMAT_LOOPS (plugins/CMakeLists.txt,
// altgrad/sdk/format_loops.hpp).
#include <altgrad/sdk/fixed_point.hpp>
#include <altgrad/sdk/format_loops.hpp>

ALTGRAD_SDK_FORMAT_LOOPS(template, ::altgrad::sdk::fixed_point_format, baseline)
