// AltGrad SDK: a format class's quantize loops as explicit instantiations.
//
// format_plugin.hpp compiles its quantize loop for every rounding mode,
// overflow mode and scaling, three times over (baseline, AVX2, AVX-512):
// nearly all of a format plugin's compile time. Plugins that share a format
// class (every ExMy plugin is an exmy_format) can compile those loops once,
// in a translation unit per instruction set, and link them:
//
//   // in each plugin, before the plugin macro (nothing of the loops compiled):
//   ALTGRAD_SDK_FORMAT_LOOPS(extern template, ::altgrad::sdk::exmy_format, avx2)
//   // in one source linked into each plugin (the loops compiled there):
//   ALTGRAD_SDK_FORMAT_LOOPS(template, ::altgrad::sdk::exmy_format, avx2)
//
// and the same for baseline and avx512. The loops are the same template code
// compiled with the same flags, so they give the same bits; only where they
// are compiled changes. The library must be compiled like the plugins
// (-fPIC, hidden visibility) and linked into each.
//
// The bundled plugins do this for exmy_format and fixed_point_format: built
// with ALTGRAD_SDK_EXTERN_FORMAT_LOOPS defined, format_plugin.hpp includes
// this header, which then declares those loops (below), and the plugins link
// plugins/format_loops/ (plugins/CMakeLists.txt, altgrad_use_format_loops).
#pragma once

#include <altgrad/sdk/format_plugin.hpp>

// The per-tensor loop of one scaling and the block-scaled loop, for one
// rounding and overflow mode.
#define ALTGRAD_SDK_FORMAT_LOOP_(KEYWORDS, F, ISA, R, O, S)                                            \
    KEYWORDS void ::altgrad::sdk::detail::quantize_##ISA<F, R, O, ::altgrad::sdk::detail::scaling::S>( \
        const F&, const float*, float*, size_t, float, uint64_t, uint64_t, uint32_t,                   \
        ::altgrad::sdk::element_counts&);
#define ALTGRAD_SDK_FORMAT_LOOPS_OF_MODES_(KEYWORDS, F, ISA, R, O)                                       \
    ALTGRAD_SDK_FORMAT_LOOP_(KEYWORDS, F, ISA, R, O, unit)                                               \
    ALTGRAD_SDK_FORMAT_LOOP_(KEYWORDS, F, ISA, R, O, power_of_two)                                       \
    ALTGRAD_SDK_FORMAT_LOOP_(KEYWORDS, F, ISA, R, O, general)                                            \
    KEYWORDS void ::altgrad::sdk::detail::quantize_blocks_##ISA<F, R, O>(                                \
        const F&, const float*, float*, size_t, const ::altgrad::sdk::scale_source&, uint64_t, uint64_t, \
        uint32_t, ::altgrad::sdk::element_counts&);
#define ALTGRAD_SDK_FORMAT_LOOPS_OF_ROUNDING_(KEYWORDS, F, ISA, R)                     \
    ALTGRAD_SDK_FORMAT_LOOPS_OF_MODES_(KEYWORDS, F, ISA, R, ALTGRAD_OVERFLOW_SATURATE) \
    ALTGRAD_SDK_FORMAT_LOOPS_OF_MODES_(KEYWORDS, F, ISA, R, ALTGRAD_OVERFLOW_NONFINITE)

// Every quantize loop of format class F for ISA (baseline, avx2 or avx512):
// KEYWORDS `extern template` declares them, `template` compiles them.
#define ALTGRAD_SDK_FORMAT_LOOPS(KEYWORDS, F, ISA)                                      \
    ALTGRAD_SDK_FORMAT_LOOPS_OF_ROUNDING_(KEYWORDS, F, ISA, ALTGRAD_ROUND_NEAREST_EVEN) \
    ALTGRAD_SDK_FORMAT_LOOPS_OF_ROUNDING_(KEYWORDS, F, ISA, ALTGRAD_ROUND_STOCHASTIC)   \
    ALTGRAD_SDK_FORMAT_LOOPS_OF_ROUNDING_(KEYWORDS, F, ISA, ALTGRAD_ROUND_TOWARD_ZERO)
// The three instruction sets' loops of F.
#define ALTGRAD_SDK_FORMAT_LOOPS_ALL_ISAS(KEYWORDS, F) \
    ALTGRAD_SDK_FORMAT_LOOPS(KEYWORDS, F, baseline)    \
    ALTGRAD_SDK_FORMAT_LOOPS(KEYWORDS, F, avx2)        \
    ALTGRAD_SDK_FORMAT_LOOPS(KEYWORDS, F, avx512)

#ifdef ALTGRAD_SDK_EXTERN_FORMAT_LOOPS
#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/fixed_point.hpp>
ALTGRAD_SDK_FORMAT_LOOPS_ALL_ISAS(extern template, ::altgrad::sdk::exmy_format)
ALTGRAD_SDK_FORMAT_LOOPS_ALL_ISAS(extern template, ::altgrad::sdk::fixed_point_format)
#endif
