// exmy_format's quantize loops for AVX2, compiled once for every
// bundled plugin built with ALTGRAD_SDK_EXTERN_FORMAT_LOOPS (plugins/CMakeLists.txt,
// altgrad/sdk/format_loops.hpp).
#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_loops.hpp>

ALTGRAD_SDK_FORMAT_LOOPS(template, ::altgrad::sdk::exmy_format, avx2)
