// fixed_point_format's quantize loops for AVX-512, compiled once for every
// bundled plugin built with ALTGRAD_SDK_EXTERN_FORMAT_LOOPS (plugins/CMakeLists.txt,
// altgrad/sdk/format_loops.hpp).
#include <altgrad/sdk/fixed_point.hpp>
#include <altgrad/sdk/format_loops.hpp>

ALTGRAD_SDK_FORMAT_LOOPS(template, ::altgrad::sdk::fixed_point_format, avx512)
