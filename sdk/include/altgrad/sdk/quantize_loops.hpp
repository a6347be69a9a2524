// AltGrad SDK: the quantize and encode loops of a format plugin, and the
// choice of loop for this CPU and call.
//
// format_plugin.hpp's adapter checks a call and hands it here: the element
// loop over chunks of kBlock elements (the random bits drawn per element from
// (seed, offset + i)), its fast paths (all-normal or all-finite chunks) and
// their tallies, the block-scaled loop with a scale per element, non-temporal
// stores for large outputs, and the instruction-set dispatch (each loop
// compiled for AVX2 and AVX-512 where the compiler can, and for baseline
// x86-64, picked at run time), with dispatch_modes turning a call's runtime
// rounding and overflow into template arguments. Nothing here checks
// arguments: the adapter has.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/philox.hpp>
#include <altgrad/sdk/rounding.hpp>
#include <altgrad/sdk/scales.hpp>

namespace altgrad::sdk::detail {

enum class scaling { unit, power_of_two, general };

inline scaling classify_scale(float s) {
    if (s == 1.0f) return scaling::unit;
    int exponent = 0;
    // A power of two whose reciprocal is a float too (not for s <= 2^-128):
    // then multiplying by 1/s is exactly dividing by s.
    return std::frexp(s, &exponent) == 0.5f && std::isfinite(1.0f / s) ? scaling::power_of_two
                                                                       : scaling::general;
}

constexpr size_t kBlock = 512;  // elements per random-bits refill

// The element loop of encode. Kernel receives (index, scaled input bits,
// random bits) and stores the result. quantize_body below runs the same
// blocks with its own tallying.
template <altgrad_rounding R, altgrad_overflow O, scaling S, class Kernel>
__attribute__((always_inline)) inline void run_loop(const float* in, size_t n, float s, uint64_t seed,
                                                    uint64_t offset, uint32_t random_mask, Kernel&& kernel) {
    uint32_t random[kBlock];
    for (size_t i0 = 0; i0 < n; i0 += kBlock) {
        const size_t m = n - i0 < kBlock ? n - i0 : kBlock;
        if constexpr (R == ALTGRAD_ROUND_STOCHASTIC)
            fill_random_bits(seed, offset + i0, m, random_mask, random);
        for (size_t j = 0; j < m; ++j) {
            float x = in[i0 + j];
            if constexpr (S != scaling::unit) x *= s;
            kernel(i0 + j, float_bits(x), R == ALTGRAD_ROUND_STOCHASTIC ? random[j] : 0u);
        }
    }
}

// Whether the FPU rounds to nearest, which the finite fast paths need
// (round_to_step, rounding.hpp); under another rounding mode the general
// kernel, which works on the bits alone, runs instead.
inline bool fpu_rounds_to_nearest() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    return (_mm_getcsr() & 0x6000u) == 0;  // MXCSR.RC: the SSE/AVX rounding control
#else
    return std::fegetround() == FE_TONEAREST;
#endif
}

// A power of two whose reciprocal is one too, both normal (exponent field
// 1..253, mantissa 0): the reciprocal's bits are 0x7F000000 minus its bits
// (field 254 - f), and multiplying by it is exactly dividing.
inline bool invertible_power_of_two(float s) {
    const uint32_t b = float_bits(s);
    return (b & 0x7FFFFFu) == 0 && (b >> 23) - 1u < 253u;
}
ALTGRAD_SDK_INLINE float reciprocal_power_of_two(float s) { return bits_float(0x7F000000u - float_bits(s)); }

// How the element loop scales: one scale for the call (unit, power_of_two,
// general, as classify_scale says), or one scale per element of the chunk
// (block scaling, expanded from the block scales), multiplying back by
// reciprocals made from the bits when every scale of the chunk is an
// invertible power of two (exact, see block_chunk_scales), else dividing.
enum class element_scaling { unit, power_of_two, general, each_power_of_two, each_general };

constexpr element_scaling element_scaling_of(scaling s) {
    return s == scaling::unit           ? element_scaling::unit
           : s == scaling::power_of_two ? element_scaling::power_of_two
                                        : element_scaling::general;
}

// Element j's scaled input, and its result scaled back (see element_scaling).
template <element_scaling S>
__attribute__((always_inline)) inline float scale_input(float x, float s, const float* scale, size_t j) {
    if constexpr (S == element_scaling::power_of_two || S == element_scaling::general) return x * s;
    if constexpr (S == element_scaling::each_power_of_two || S == element_scaling::each_general)
        return x * scale[j];
    (void)s, (void)scale, (void)j;
    return x;
}
template <element_scaling S>
__attribute__((always_inline)) inline float scale_output(float r, float s, float inv, const float* scale,
                                                         size_t j) {
    (void)s, (void)inv, (void)scale, (void)j;
    if constexpr (S == element_scaling::power_of_two) return r * inv;  // exact: 1/s is a power of two
    if constexpr (S == element_scaling::general) return r / s;
    if constexpr (S == element_scaling::each_power_of_two) return r * reciprocal_power_of_two(scale[j]);
    if constexpr (S == element_scaling::each_general) return r / scale[j];
    return r;
}

// The largest and smallest magnitudes (float32 bits, no sign) of a chunk's
// scaled inputs: where F's fast_flags depend on the magnitude in intervals
// (has_interval_fast_ranges), what decides the chunk's flags. A max, a
// subtraction and a min per element instead of the flags' compares and
// selects. Where a zero may take the normal path (zero_free: bit 0 of
// fast_flags(0) clear), the minimum is taken over magnitude - 1, so that
// zeros wrap to the top and the smallest nonzero magnitude is seen (a zero
// can then only set bit 1, which the largest magnitude sets too); elsewhere
// over the magnitude, zeros included (a zero then sets bit 0, the only one
// the smallest nonzero magnitude could add).
struct magnitude_range {
    uint32_t zero_free = 0;  // 1 or 0
    uint32_t largest = 0, smallest_less_zero_free = ~0u;
    template <class F>
    explicit magnitude_range(const F& f) : zero_free((f.fast_flags(0) & 1u) == 0 ? 1u : 0u) {}
    // One element into (largest, smallest): the element loops keep the two
    // in locals, which vectorize where members of a struct did not. U:
    // uint32_t, or a GCC vector of them (quantize_normal_chunk_lanes).
    template <class U>
    static ALTGRAD_SDK_INLINE void widen(const U& bits, uint32_t zero_free, U& largest, U& smallest) {
        const U magnitude = bits & ~kSignBit, shifted = magnitude - zero_free;
        largest = magnitude > largest ? magnitude : largest;
        smallest = shifted < smallest ? shifted : smallest;
    }
    // The OR of f.fast_flags over the magnitudes taken (at least one).
    template <class F>
    uint32_t flags(const F& f) const {
        const bool nonzero_seen = smallest_less_zero_free != ~0u;  // or, where zeros count, any
        return f.fast_flags(largest) |
               (nonzero_seen ? f.fast_flags(smallest_less_zero_free + zero_free) : 0u);
    }
};

// The OR of fast_flags over a chunk's scaled inputs.
template <class F, element_scaling S>
__attribute__((always_inline)) inline uint32_t chunk_fast_flags(const F& f, const float* in, size_t m,
                                                                float s, const float* __restrict scale) {
    if constexpr (has_interval_fast_ranges<F>::value) {
        magnitude_range range(f);
        uint32_t largest = 0, smallest = ~0u;
        for (size_t j = 0; j < m; ++j)
            magnitude_range::widen(float_bits(scale_input<S>(in[j], s, scale, j)), range.zero_free, largest,
                                   smallest);
        range.largest = largest, range.smallest_less_zero_free = smallest;
        return range.flags(f);
    } else {
        uint32_t flags = 0;
        for (size_t j = 0; j < m; ++j) flags |= f.fast_flags(float_bits(scale_input<S>(in[j], s, scale, j)));
        return flags;
    }
}

// Which kernel a chunk took: the loops pass it from one chunk to the next.
enum class chunk_path { general, normal, finite };

// A fast kernel over a chunk into out, its tallies into the chunk's; with
// Track, the range of its scaled inputs into *range (made for f).
template <class F, altgrad_rounding R, altgrad_overflow O, element_scaling S, chunk_path P, bool Track>
__attribute__((always_inline)) inline void fast_kernel(const F& f, const float* in, float* out, size_t m,
                                                       float s, float inv, const float* __restrict scale,
                                                       const uint32_t* __restrict random, uint32_t& overflow,
                                                       uint32_t& underflow, magnitude_range* range) {
    uint32_t chunk_overflow = 0, chunk_underflow = 0;
    const uint32_t zero_free = Track ? range->zero_free : 0u;
    uint32_t largest = 0, smallest = ~0u;
    for (size_t j = 0; j < m; ++j) {
        const uint32_t bits = float_bits(scale_input<S>(in[j], s, scale, j));
        if constexpr (Track) magnitude_range::widen(bits, zero_free, largest, smallest);
        const uint32_t random_j = R == ALTGRAD_ROUND_STOCHASTIC ? random[j] : 0u;
        uint32_t q;
        if constexpr (P == chunk_path::normal)
            q = f.template quantize_normal_bits<R, O>(bits, random_j, chunk_overflow);
        else q = f.template quantize_finite_bits<R, O>(bits, random_j, chunk_overflow, chunk_underflow);
        out[j] = scale_output<S>(bits_float(q), s, inv, scale, j);
    }
    overflow = chunk_overflow;
    underflow = chunk_underflow;
    if constexpr (Track) range->largest = largest, range->smallest_less_zero_free = smallest;
}

// The previous chunk's fast path (`last`, normal or finite) run straight away
// on this chunk while taking the range of its scaled inputs (see
// quantize_chunk): true when the range fits that path, so the result stands
// (tallies added, `last` set to the faster path the range allows). Else
// false, with have_flags set and the chunk's flags (from its range) in flags
// when a kernel ran.
template <class F, altgrad_rounding R, altgrad_overflow O, element_scaling S>
__attribute__((always_inline)) inline bool rerun_last_path(const F& f, const float* in, float* out, size_t m,
                                                           float s, float inv, const float* __restrict scale,
                                                           const uint32_t* __restrict random,
                                                           bool fpu_nearest, chunk_path& last,
                                                           uint64_t& overflow, uint64_t& underflow,
                                                           uint32_t& flags, bool& have_flags) {
    uint32_t chunk_overflow = 0, chunk_underflow = 0;
    magnitude_range range(f);
    if constexpr (has_normal_fast_path<F>::value) {
        if (last == chunk_path::normal) {
            fast_kernel<F, R, O, S, chunk_path::normal, true>(f, in, out, m, s, inv, scale, random,
                                                              chunk_overflow, chunk_underflow, &range);
            have_flags = true;
        }
    }
    if constexpr (has_finite_fast_path<F>::value) {
        if (last == chunk_path::finite && fpu_nearest) {
            fast_kernel<F, R, O, S, chunk_path::finite, true>(f, in, out, m, s, inv, scale, random,
                                                              chunk_overflow, chunk_underflow, &range);
            have_flags = true;
        }
    }
    if (!have_flags) return false;
    flags = range.flags(f);
    // The result stands if the range fits the path taken (normal: bit 0 clear,
    // finite: bit 1); the next chunk then tries the faster path the range allows.
    if ((flags & (last == chunk_path::normal ? 1u : 2u)) != 0) return false;
    overflow += chunk_overflow;
    underflow += chunk_underflow;  // 0 from the normal path
    last = (flags & 1u) ? chunk_path::finite : chunk_path::normal;
    return true;
}

// The fast kernel a chunk's flags allow, if any: normal when bit 0 is clear,
// else finite when bit 1 is and the FPU rounds to nearest. True when one ran
// (tallies added, `last` set to it).
template <class F, altgrad_rounding R, altgrad_overflow O, element_scaling S>
__attribute__((always_inline)) inline bool fast_path_by_flags(
    const F& f, const float* in, float* out, size_t m, float s, float inv, const float* __restrict scale,
    const uint32_t* __restrict random, uint32_t flags, bool fpu_nearest, chunk_path& last, uint64_t& overflow,
    uint64_t& underflow) {
    uint32_t chunk_overflow = 0, chunk_underflow = 0;
    if constexpr (has_normal_fast_path<F>::value) {
        if ((flags & 1u) == 0) {
            fast_kernel<F, R, O, S, chunk_path::normal, false>(f, in, out, m, s, inv, scale, random,
                                                               chunk_overflow, chunk_underflow, nullptr);
            overflow += chunk_overflow;
            last = chunk_path::normal;
            return true;
        }
    }
    if constexpr (has_finite_fast_path<F>::value) {
        if ((flags & 2u) == 0 && fpu_nearest) {
            fast_kernel<F, R, O, S, chunk_path::finite, false>(f, in, out, m, s, inv, scale, random,
                                                               chunk_overflow, chunk_underflow, nullptr);
            overflow += chunk_overflow;
            underflow += chunk_underflow;
            last = chunk_path::finite;
            return true;
        }
    }
    return false;
}

// The general kernel over a chunk, element by element: F's branch-free kernel
// in the vector loops where it has one, else quantize_bits.
template <class F, altgrad_rounding R, altgrad_overflow O, element_scaling S, bool Vector>
__attribute__((always_inline)) inline void general_kernel(const F& f, const float* in, float* out, size_t m,
                                                          float s, float inv, const float* __restrict scale,
                                                          const uint32_t* __restrict random,
                                                          uint64_t& overflow, uint64_t& underflow) {
    uint32_t chunk_overflow = 0, chunk_underflow = 0;
    for (size_t j = 0; j < m; ++j) {
        const uint32_t bits = float_bits(scale_input<S>(in[j], s, scale, j));
        const uint32_t random_j = R == ALTGRAD_ROUND_STOCHASTIC ? random[j] : 0u;
        element_counts c;
        uint32_t q;
        if constexpr (Vector && has_branchless_kernel<F>::value)
            q = f.template quantize_bits_branchless<R, O>(bits, random_j, c);
        else q = f.template quantize_bits<R, O>(bits, random_j, c);
        chunk_overflow += static_cast<uint32_t>(c.overflow);
        chunk_underflow += static_cast<uint32_t>(c.underflow);
        out[j] = scale_output<S>(bits_float(q), s, inv, scale, j);
    }
    overflow += chunk_overflow;
    underflow += chunk_underflow;
}

// One chunk (m <= kBlock elements) of the quantize loop. Tallies are summed in
// 32 bits (an element adds 0 or 1 to each, a chunk has at most kBlock
// elements), which keeps a vectorized loop in 32-bit lanes. s and inv: the
// call's scale and 1/s; scale: per element (each_*); fpu_nearest: whether
// the FPU rounds to nearest, which the finite fast path needs (read once
// per call by the loops: reading MXCSR per chunk cost 2-4% of a call). Vector: the
// loop is compiled for AVX2 or AVX-512 and uses F's fast paths and
// branch-free kernel when it has them. last: the path the call's previous
// chunk took (the loops start it at general); the chunk sets it.
template <class F, altgrad_rounding R, altgrad_overflow O, element_scaling S, bool Vector>
__attribute__((always_inline)) inline void quantize_chunk(const F& f, const float* in, float* out, size_t m,
                                                          float s, float inv, const float* __restrict scale,
                                                          const uint32_t* __restrict random, bool fpu_nearest,
                                                          chunk_path& last, uint64_t& overflow,
                                                          uint64_t& underflow) {
    if constexpr (Vector && (has_normal_fast_path<F>::value || has_finite_fast_path<F>::value)) {
        // When every scaled input of the chunk lies in a fast path's range
        // (see has_normal_fast_path), its short kernel gives the same bits
        // and counts. Which one is decided by the chunk's flags, from a pass
        // over it; or, where the ranges are intervals, consecutive chunks
        // are alike and the output is not the input (which a redo needs), by
        // running the previous chunk's path straight away while taking the
        // range of the inputs (three operations per element instead of a
        // pass), and keeping the result if the range fits that path.
        uint32_t flags = 0;
        bool have_flags = false;
        if constexpr (has_interval_fast_ranges<F>::value) {
            if (last != chunk_path::general && static_cast<const float*>(out) != in &&
                rerun_last_path<F, R, O, S>(f, in, out, m, s, inv, scale, random, fpu_nearest, last, overflow,
                                            underflow, flags, have_flags))
                return;
        }
        if (!have_flags) flags = chunk_fast_flags<F, S>(f, in, m, s, scale);
        if (fast_path_by_flags<F, R, O, S>(f, in, out, m, s, inv, scale, random, flags, fpu_nearest, last,
                                           overflow, underflow))
            return;
    }
    last = chunk_path::general;
    general_kernel<F, R, O, S, Vector>(f, in, out, m, s, inv, scale, random, overflow, underflow);
}

// Large outputs go to memory with non-temporal stores, as memcpy writes
// them: a chunk is computed into an L1 buffer and streamed out, so the
// output's cache lines are not first read from memory (a third of the
// traffic of a read-modify-write pass). Only in the vector loops (AVX
// stores), and only above this size, where the output would not stay in
// the caches anyway.
constexpr size_t kStreamMinBytes = size_t{8} << 20;

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
// Elements to write the ordinary way before out reaches a 64-byte boundary,
// or n when the output is too small or a float pointer is misaligned.
inline size_t stream_start(const float* out, size_t n) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(out);
    if (n * sizeof(float) < kStreamMinBytes || (address & 3u) != 0) return n;
    return ((64u - (address & 63u)) & 63u) / sizeof(float);
}
// dst: 32-byte aligned; src: an aligned L1 buffer.
__attribute__((target("avx2"))) inline void stream_floats(float* dst, const float* src, size_t m) {
    size_t j = 0;
    for (; j + 8 <= m; j += 8) _mm256_stream_ps(dst + j, _mm256_load_ps(src + j));
    for (; j < m; ++j) dst[j] = src[j];
}
inline void stream_fence() { _mm_sfence(); }
#else
inline size_t stream_start(const float*, size_t n) { return n; }
inline void stream_floats(float* dst, const float* src, size_t m) {
    std::memcpy(dst, src, m * sizeof(float));
}
inline void stream_fence() {}
#endif

// The per-tensor quantize loop: chunks of kBlock elements, the random bits of
// a chunk drawn before its element loop. Chunks start at `start` (see
// stream_start) after a first short one, which changes nothing in the
// result: element i always uses the random bits of offset + i.
template <class F, altgrad_rounding R, altgrad_overflow O, scaling S, bool Vector>
__attribute__((always_inline)) inline void quantize_body(const F& f, const float* in, float* out, size_t n,
                                                         float s, uint64_t seed, uint64_t offset,
                                                         uint32_t random_mask, element_counts& counts) {
    constexpr element_scaling ES = element_scaling_of(S);
    const float inv = 1.0f / s;
    uint64_t overflow = 0, underflow = 0;
    alignas(64) uint32_t random[kBlock];
    const size_t start = Vector ? stream_start(out, n) : n;
    const bool fpu_nearest = fpu_rounds_to_nearest();  // read once per call: MXCSR reads are slow
    chunk_path last = chunk_path::general;
    const size_t first = start < n && start > 0 ? start : (n < kBlock ? n : kBlock);
    for (size_t i0 = 0; i0 < n;) {
        const size_t left = n - i0;
        const size_t m = i0 == 0 ? first : (left < kBlock ? left : kBlock);
        if constexpr (R == ALTGRAD_ROUND_STOCHASTIC)
            fill_random_bits(seed, offset + i0, m, random_mask, random);
        if (start < n && i0 >= start) {
            alignas(64) float staging[kBlock];
            quantize_chunk<F, R, O, ES, Vector>(f, in + i0, staging, m, s, inv, nullptr, random, fpu_nearest,
                                                last, overflow, underflow);
            stream_floats(out + i0, staging, m);
        } else {
            quantize_chunk<F, R, O, ES, Vector>(f, in + i0, out + i0, m, s, inv, nullptr, random, fpu_nearest,
                                                last, overflow, underflow);
        }
        i0 += m;
    }
    if (start < n) stream_fence();
    counts.overflow += overflow;
    counts.underflow += underflow;
}

// The scales of elements [i0, i0 + m) of a block-scaled call, one per element
// (element i takes block_scales[i / block_size], the format.h rule); returns
// whether every one is an invertible power of two (the element loop then
// multiplies by reciprocals made from the bits instead of dividing).
inline bool block_chunk_scales(const scale_source& scales, size_t i0, size_t m, float* scale) {
    if (scales.block_size == 32 && i0 % 32 == 0 && m % 32 == 0) {
        // OCP MX's blocks, whole: loops of fixed trip count, which the compiler turns into one
        // vector test over the chunk's scales and two broadcast stores per block.
        const float* block_scales = scales.block_scales + i0 / 32;
        const size_t blocks = m / 32;
        uint32_t invertible = 1;
        for (size_t b = 0; b < blocks; ++b)
            invertible &= static_cast<uint32_t>(invertible_power_of_two(block_scales[b]));
        for (size_t b = 0; b < blocks; ++b)
            for (size_t k = 0; k < 32; ++k) scale[b * 32 + k] = block_scales[b];
        return invertible != 0;
    }
    bool all_powers_of_two = true;
    size_t b = i0 / scales.block_size;
    size_t run = scales.block_size - i0 % scales.block_size;  // elements of block b from i0 on
    for (size_t j = 0; j < m; j += run, run = scales.block_size, ++b) {
        run = run < m - j ? run : m - j;
        const float sb = scales.block_scales[b];
        all_powers_of_two &= invertible_power_of_two(sb);
        for (size_t k = j; k < j + run; ++k) scale[k] = sb;
    }
    return all_powers_of_two;
}

// Whether F's normal path runs on lanes: quantize_normal_lanes<R, O>(bits,
// random, overflow, out), all of one type U, for U a GCC vector of uint32_t
// too (the trait checks uint32_t; the vector instantiation is the format's
// promise).
template <class F, class = void>
struct has_normal_lanes : std::false_type {};
template <class F>
struct has_normal_lanes<
    F, std::void_t<decltype(std::declval<const F&>()
                                .template quantize_normal_lanes<ALTGRAD_ROUND_NEAREST_EVEN,
                                                                ALTGRAD_OVERFLOW_SATURATE>(
                                    std::declval<const uint32_t&>(), std::declval<const uint32_t&>(),
                                    std::declval<uint32_t&>(), std::declval<uint32_t&>()))>>
    : std::true_type {};

// The explicit-vector path below needs GCC's vector extensions, which nvcc's
// front end (cudafe++) aborts on: plugins built with ALTGRAD_CUDA go without it.
#if defined(__GNUC__) && !defined(__CUDACC__)
#define ALTGRAD_SDK_VECTOR_LANES 1
#endif

#ifdef ALTGRAD_SDK_VECTOR_LANES
// One chunk of a block-scaled call on the normal path, written with explicit
// 16-lane vectors (GCC vector extensions; compiled in the AVX-512 loop only):
// each block's scale and reciprocal stay in a register for its vectors and
// the tallies and the range stay in registers across blocks, which the
// auto-vectorized chunk loop cannot do without expanding the scales per
// element. Needs i0, m and block_size multiples of 16 and out != in; the
// same bits and counts as quantize_chunk's normal path. Returns false, with
// out undefined, when a scale is not an invertible power of two or an input
// lies outside the normal path's range: the caller then runs the chunk the
// general way.
template <class F, altgrad_rounding R, altgrad_overflow O>
__attribute__((always_inline)) inline bool quantize_normal_chunk_lanes(const F& f, const float* __restrict in,
                                                                       float* __restrict out, size_t m,
                                                                       const scale_source& scales, size_t i0,
                                                                       const uint32_t* __restrict random,
                                                                       uint64_t& overflow) {
    typedef uint32_t u32x16 __attribute__((vector_size(64)));
    typedef float f32x16 __attribute__((vector_size(64)));
    magnitude_range range(f);
    u32x16 tally{}, largest{}, smallest = ~u32x16{};
    // One loop over the vectors (a loop per block kept GCC from hoisting the
    // format's constants out of it), the block's scale reloaded as it changes.
    size_t b = i0 / scales.block_size;
    size_t left = scales.block_size - i0 % scales.block_size;  // elements of block b from the vector on
    float sb = scales.block_scales[b];
    if (!invertible_power_of_two(sb)) return false;
    float inv = reciprocal_power_of_two(sb);
    for (size_t k = 0; k < m; k += 16) {
        f32x16 x;
        std::memcpy(&x, in + k, sizeof x);
        const u32x16 bits = (u32x16)(x * sb);
        magnitude_range::widen(bits, range.zero_free, largest, smallest);
        u32x16 random_k{};
        if constexpr (R == ALTGRAD_ROUND_STOCHASTIC) std::memcpy(&random_k, random + k, sizeof random_k);
        u32x16 q;
        f.template quantize_normal_lanes<R, O>(bits, random_k, tally, q);
        const f32x16 r = (f32x16)q * inv;
        std::memcpy(out + k, &r, sizeof r);
        left -= 16;
        if (left == 0 && k + 16 < m) {
            left = scales.block_size;
            sb = scales.block_scales[++b];
            if (!invertible_power_of_two(sb)) return false;
            inv = reciprocal_power_of_two(sb);
        }
    }
    uint32_t chunk_overflow = 0;
    for (int lane = 0; lane < 16; ++lane) {
        range.largest = largest[lane] > range.largest ? largest[lane] : range.largest;
        range.smallest_less_zero_free =
            smallest[lane] < range.smallest_less_zero_free ? smallest[lane] : range.smallest_less_zero_free;
        chunk_overflow += tally[lane];
    }
    if ((range.flags(f) & 1u) != 0) return false;
    overflow += chunk_overflow;
    return true;
}
#endif

// The block-scaled quantize loop (ABI 1.2). Element i is quantized with its
// block's scale and the random bits of offset + i, which is the format.h rule
// (one call per block) word for word, but the loop runs over chunks of kBlock
// elements whatever the block size: one random-bits refill and one
// vectorized element loop per chunk, with the block scales expanded per
// element. A chunk whose scales are all powers of two multiplies by the exact
// reciprocals; any other chunk divides (r / s is exact for every scale).
// Lanes16 (the AVX-512 build): after a chunk on the normal path, a format
// with normal-path lanes and interval ranges (whose chunk flags its range
// gives) runs the chunk with quantize_normal_chunk_lanes, nothing expanded.
template <class F, altgrad_rounding R, altgrad_overflow O, bool Vector, bool Lanes16 = false>
__attribute__((always_inline)) inline void quantize_blocks_body(const F& f, const float* in, float* out,
                                                                size_t n, const scale_source& scales,
                                                                uint64_t seed, uint64_t offset,
                                                                uint32_t random_mask,
                                                                element_counts& counts) {
    uint64_t overflow = 0, underflow = 0;
    alignas(64) uint32_t random[kBlock];
    alignas(64) float scale[kBlock], staging[kBlock];
    const size_t start = Vector ? stream_start(out, n) : n;  // as in quantize_body
    const bool fpu_nearest = fpu_rounds_to_nearest();
    chunk_path last = chunk_path::general;
    const size_t first = start < n && start > 0 ? start : (n < kBlock ? n : kBlock);
    for (size_t i0 = 0; i0 < n;) {
        const size_t left = n - i0;
        const size_t m = i0 == 0 ? first : (left < kBlock ? left : kBlock);
        if constexpr (R == ALTGRAD_ROUND_STOCHASTIC)
            fill_random_bits(seed, offset + i0, m, random_mask, random);
        const bool streamed = start < n && i0 >= start;
        float* dst = streamed ? staging : out + i0;
#ifdef ALTGRAD_SDK_VECTOR_LANES
        if constexpr (Lanes16 && has_normal_lanes<F>::value && has_interval_fast_ranges<F>::value) {
            // After a chunk on the normal path, as quantize_chunk speculates (see there).
            if (last == chunk_path::normal && static_cast<const float*>(dst) != in + i0 &&
                (i0 | m | scales.block_size) % 16 == 0) {
                if (quantize_normal_chunk_lanes<F, R, O>(f, in + i0, dst, m, scales, i0, random, overflow)) {
                    if (streamed) stream_floats(out + i0, staging, m);
                    i0 += m;
                    continue;
                }
                last = chunk_path::general;  // the chunk below checks its flags first
            }
        }
#endif
        if (block_chunk_scales(scales, i0, m, scale))
            quantize_chunk<F, R, O, element_scaling::each_power_of_two, Vector>(
                f, in + i0, dst, m, 1.0f, 1.0f, scale, random, fpu_nearest, last, overflow, underflow);
        else
            quantize_chunk<F, R, O, element_scaling::each_general, Vector>(
                f, in + i0, dst, m, 1.0f, 1.0f, scale, random, fpu_nearest, last, overflow, underflow);
        if (streamed) stream_floats(out + i0, staging, m);
        i0 += m;
    }
    if (start < n) stream_fence();
    counts.overflow += overflow;
    counts.underflow += underflow;
}

// x86-64 gets AVX2 and AVX-512 builds of the loops, picked at run time
// (cpu_vector_isa, philox.hpp); other targets (aarch64 and friends) compile
// the baseline loops only. AVX-512: 16 elements per vector, mask registers
// for the kernel's selects.
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ALTGRAD_SDK_X86_DISPATCH 1
#define ALTGRAD_SDK_TARGET_AVX512 \
    __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")))
template <class F, altgrad_rounding R, altgrad_overflow O, scaling S>
__attribute__((target("avx2"))) void quantize_avx2(const F& f, const float* in, float* out, size_t n, float s,
                                                   uint64_t seed, uint64_t offset, uint32_t random_mask,
                                                   element_counts& counts) {
    quantize_body<F, R, O, S, true>(f, in, out, n, s, seed, offset, random_mask, counts);
}
template <class F, altgrad_rounding R, altgrad_overflow O>
__attribute__((target("avx2"))) void quantize_blocks_avx2(const F& f, const float* in, float* out, size_t n,
                                                          const scale_source& scales, uint64_t seed,
                                                          uint64_t offset, uint32_t random_mask,
                                                          element_counts& counts) {
    quantize_blocks_body<F, R, O, true>(f, in, out, n, scales, seed, offset, random_mask, counts);
}
template <class F, altgrad_rounding R, altgrad_overflow O, scaling S>
ALTGRAD_SDK_TARGET_AVX512 void quantize_avx512(const F& f, const float* in, float* out, size_t n, float s,
                                               uint64_t seed, uint64_t offset, uint32_t random_mask,
                                               element_counts& counts) {
    quantize_body<F, R, O, S, true>(f, in, out, n, s, seed, offset, random_mask, counts);
}
template <class F, altgrad_rounding R, altgrad_overflow O>
ALTGRAD_SDK_TARGET_AVX512 void quantize_blocks_avx512(const F& f, const float* in, float* out, size_t n,
                                                      const scale_source& scales, uint64_t seed,
                                                      uint64_t offset, uint32_t random_mask,
                                                      element_counts& counts) {
    quantize_blocks_body<F, R, O, true, true>(f, in, out, n, scales, seed, offset, random_mask, counts);
}
#endif

template <class F, altgrad_rounding R, altgrad_overflow O, scaling S>
void quantize_baseline(const F& f, const float* in, float* out, size_t n, float s, uint64_t seed,
                       uint64_t offset, uint32_t random_mask, element_counts& counts) {
    quantize_body<F, R, O, S, false>(f, in, out, n, s, seed, offset, random_mask, counts);
}
template <class F, altgrad_rounding R, altgrad_overflow O>
void quantize_blocks_baseline(const F& f, const float* in, float* out, size_t n, const scale_source& scales,
                              uint64_t seed, uint64_t offset, uint32_t random_mask, element_counts& counts) {
    quantize_blocks_body<F, R, O, false>(f, in, out, n, scales, seed, offset, random_mask, counts);
}

#ifndef ALTGRAD_SDK_X86_DISPATCH
template <class F, altgrad_rounding R, altgrad_overflow O, scaling S>
void quantize_avx2(const F& f, const float* in, float* out, size_t n, float s, uint64_t seed, uint64_t offset,
                   uint32_t random_mask, element_counts& counts) {
    quantize_body<F, R, O, S, false>(f, in, out, n, s, seed, offset, random_mask, counts);
}
template <class F, altgrad_rounding R, altgrad_overflow O>
void quantize_blocks_avx2(const F& f, const float* in, float* out, size_t n, const scale_source& scales,
                          uint64_t seed, uint64_t offset, uint32_t random_mask, element_counts& counts) {
    quantize_blocks_body<F, R, O, false>(f, in, out, n, scales, seed, offset, random_mask, counts);
}
template <class F, altgrad_rounding R, altgrad_overflow O, scaling S>
void quantize_avx512(const F& f, const float* in, float* out, size_t n, float s, uint64_t seed,
                     uint64_t offset, uint32_t random_mask, element_counts& counts) {
    quantize_body<F, R, O, S, false>(f, in, out, n, s, seed, offset, random_mask, counts);
}
template <class F, altgrad_rounding R, altgrad_overflow O>
void quantize_blocks_avx512(const F& f, const float* in, float* out, size_t n, const scale_source& scales,
                            uint64_t seed, uint64_t offset, uint32_t random_mask, element_counts& counts) {
    quantize_blocks_body<F, R, O, false>(f, in, out, n, scales, seed, offset, random_mask, counts);
}
#endif

// Whether F's vector loops serve this instance: F may say they do not with
// branchless_applies() (exmy_format: formats without a sign bit or without
// subnormals, whose quantize_bits has steps its branch-free kernel lacks), and
// the baseline loop (quantize_bits element by element) runs instead.
template <class F, class = void>
struct has_branchless_switch : std::false_type {};
template <class F>
struct has_branchless_switch<F, std::void_t<decltype(std::declval<const F&>().branchless_applies())>>
    : std::true_type {};
template <class F>
bool vector_loops_apply(const F& f) {
    if constexpr (has_branchless_switch<F>::value) return f.branchless_applies();
    else return true;
}

// The loop for this CPU: one of three instantiations of the same template
// (the baseline where F's vector loops do not apply).
template <class F, class Fn>
Fn pick_isa(const F& f, Fn baseline, Fn avx2, Fn avx512) {
    if (!vector_loops_apply(f)) return baseline;
    switch (cpu_vector_isa()) {
        case vector_isa::avx512: return avx512;
        case vector_isa::avx2: return avx2;
        case vector_isa::baseline: break;
    }
    return baseline;
}

template <class F, altgrad_rounding R, altgrad_overflow O, scaling S>
void quantize_per_tensor(const F& f, const float* in, float* out, size_t n, float s, uint64_t seed,
                         uint64_t offset, uint32_t random_mask, element_counts& counts) {
    pick_isa(f, quantize_baseline<F, R, O, S>, quantize_avx2<F, R, O, S>, quantize_avx512<F, R, O, S>)(
        f, in, out, n, s, seed, offset, random_mask, counts);
}

template <class F, altgrad_rounding R, altgrad_overflow O>
void quantize_dispatch_scale(const F& f, const float* in, float* out, size_t n, const scale_source& scales,
                             uint64_t seed, uint64_t offset, uint32_t random_mask, element_counts& counts) {
    if (scales.per_block())
        return pick_isa(f, quantize_blocks_baseline<F, R, O>, quantize_blocks_avx2<F, R, O>,
                        quantize_blocks_avx512<F, R, O>)(f, in, out, n, scales, seed, offset, random_mask,
                                                         counts);
    const float s = scales.scale;
    switch (classify_scale(s)) {
        case scaling::unit:
            return quantize_per_tensor<F, R, O, scaling::unit>(f, in, out, n, s, seed, offset, random_mask,
                                                               counts);
        case scaling::power_of_two:
            return quantize_per_tensor<F, R, O, scaling::power_of_two>(f, in, out, n, s, seed, offset,
                                                                       random_mask, counts);
        case scaling::general:
            return quantize_per_tensor<F, R, O, scaling::general>(f, in, out, n, s, seed, offset, random_mask,
                                                                  counts);
    }
}

template <altgrad_rounding R>
using rounding_tag = std::integral_constant<altgrad_rounding, R>;
template <altgrad_overflow O>
using overflow_tag = std::integral_constant<altgrad_overflow, O>;

// Call fn(rounding_tag<R>, overflow_tag<O>) for the runtime rounding and
// overflow, so the element loop is compiled once per mode pair.
template <class Fn>
void dispatch_modes(altgrad_rounding rounding, altgrad_overflow overflow, Fn&& fn) {
    const bool sat = overflow == ALTGRAD_OVERFLOW_SATURATE;
    const overflow_tag<ALTGRAD_OVERFLOW_SATURATE> saturate;
    const overflow_tag<ALTGRAD_OVERFLOW_NONFINITE> nonfinite;
    switch (rounding) {
        case ALTGRAD_ROUND_NEAREST_EVEN: {
            const rounding_tag<ALTGRAD_ROUND_NEAREST_EVEN> r;
            return sat ? fn(r, saturate) : fn(r, nonfinite);
        }
        case ALTGRAD_ROUND_STOCHASTIC: {
            const rounding_tag<ALTGRAD_ROUND_STOCHASTIC> r;
            return sat ? fn(r, saturate) : fn(r, nonfinite);
        }
        case ALTGRAD_ROUND_TOWARD_ZERO: {
            const rounding_tag<ALTGRAD_ROUND_TOWARD_ZERO> r;
            return sat ? fn(r, saturate) : fn(r, nonfinite);
        }
    }
}

}  // namespace altgrad::sdk::detail
