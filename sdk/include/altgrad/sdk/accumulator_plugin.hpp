// AltGrad SDK: turn a C++ accumulator class into an accumulator plugin (ABI 1.5).
//
// Contract of an accumulator class T:
//   altgrad_accumulator_info info() const;  // depth, group_size, fraction_bits, halves,
//                                           // output, scale_kinds
// and, only for an arithmetic other than the fused dot-add of
// abi/accumulator.h,
//   void dot_add(const altgrad_accumulator_args& args) const;
// Without dot_add, the adapter computes the definition with the SDK's exact
// integer implementation (fused_dot_add.hpp) for the instruction info()
// declares; that is what every bundled plugin does, so a plugin is its
// parameters (sdk::instruction_model) plus one macro:
//
//   altgrad::sdk::instruction_model make(const altgrad::sdk::param_view& p) {
//       altgrad::sdk::instruction i;
//       i.depth = 32;
//       i.fraction_bits = 13;
//       i.output = altgrad::sdk::accumulator_output(p, ALTGRAD_ACC_OUTPUT_E8M13);
//       return altgrad::sdk::instruction_model(i);
//   }
//   ALTGRAD_ACCUMULATOR_PLUGIN_WITH_PARAMS(make, &altgrad::sdk::kAccumulatorParam, 1)
//
// (or ALTGRAD_ACCUMULATOR_PLUGIN(make) without parameters; both also take the
// identity first, as the other kinds' macros do, export.hpp). dot_add may be
// called from many threads at once, so T keeps no mutable state.
//
// What the adapter guarantees before the arithmetic runs (else the status and
// message of abi/accumulator.h): the args struct is non-NULL and at least its
// ABI 1.5 size; host memory (memory_kinds is set to host only: the adapter
// has no device path); a known scale kind the instruction declares, with its
// scales set (and none without one); k <= depth; minimum exponents within
// [-149, 127] (0 for a grouped instruction's E2M1 operands); the sizes fit
// size_t; the buffers are non-NULL where the call reads or writes them; d is
// c or apart from it, and apart from every input. Nothing about the values:
// NaN and Inf reach the arithmetic, which applies the special-value rule.
// Exceptions never cross the boundary: plugin_error becomes its status,
// std::bad_alloc OUT_OF_MEMORY, anything else INTERNAL (detail::guarded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/export.hpp>
#include <altgrad/sdk/format_plugin.hpp>  // param_view, detail::guarded, detail::invalid
#include <altgrad/sdk/fused_dot_add.hpp>
#include <altgrad/sdk/raw_enum.hpp>

namespace altgrad::sdk {

// An accumulator that is the definition for one instruction: the class every
// bundled accumulator plugin makes.
class instruction_model {
public:
    explicit instruction_model(const instruction& i) : i_(i) {}
    altgrad_accumulator_info info() const {
        altgrad_accumulator_info r{};
        r.depth = i_.depth;
        r.group_size = i_.group_size;
        r.fraction_bits = i_.fraction_bits;
        r.halves = i_.halves;
        r.output = i_.output;
        r.scale_kinds = i_.scale_kinds;
        return r;
    }

private:
    instruction i_;
};

// The string parameter `accumulator` of an instruction that has a variant
// with FP16 accumulators: "float32" (the default) gives `float32_output`
// (FLOAT32, or E8M13 on the FP8 paths that round so), "float16" gives FP16.
inline constexpr altgrad_param_spec kAccumulatorParam = {
    sizeof(altgrad_param_spec), "accumulator", ALTGRAD_PARAM_STRING,
    "The instruction's accumulator type: float32 (C and D in float32) or float16"};

inline altgrad_acc_output accumulator_output(const param_view& p, altgrad_acc_output float32_output) {
    const std::string type = p.get_string("accumulator");
    if (type == "float32") return float32_output;
    if (type == "float16") return ALTGRAD_ACC_OUTPUT_FLOAT16;
    detail::invalid("parameter 'accumulator' must be float32 or float16, got '" + type + "'");
}

namespace detail {

// Whether two byte ranges of n and m bytes share a byte (empty ranges share none).
inline bool overlapping(const void* x, size_t n, const void* y, size_t m) {
    const auto a = reinterpret_cast<uintptr_t>(x), b = reinterpret_cast<uintptr_t>(y);
    return n != 0 && m != 0 && a < b + m && b < a + n;
}

// `what` of `count` x `each` floats fits size_t, or the call is refused.
inline size_t checked_floats(size_t count, size_t each, const char* what) {
    if (each != 0 && count > SIZE_MAX / sizeof(float) / each)
        invalid(std::string("dot_add: ") + what + " (" + std::to_string(count) + " x " +
                std::to_string(each) + ") is too large");
    return count * each;
}

inline void check_min_exponent(int32_t e, const char* field, bool e2m1_only) {
    if (e < kLowestMinExponent || e > kHighestMinExponent)
        invalid(std::string("dot_add: ") + field + " " + std::to_string(e) + " is outside -149..127");
    if (e2m1_only && e != 0)
        throw plugin_error(
            ALTGRAD_STATUS_UNSUPPORTED,
            std::string("dot_add: this block-scaled FP4 instruction multiplies E2M1 operands only: ") +
                field + " must be 0, got " + std::to_string(e));
}

inline void check_scale_kind(const altgrad_accumulator_args* a, const altgrad_accumulator_info& info) {
    const int32_t kind = raw_enum(a->scale_kind);
    if (kind < ALTGRAD_ACC_SCALE_NONE || kind > ALTGRAD_ACC_SCALE_UE4M3_16)
        invalid("dot_add: unknown scale kind " + std::to_string(kind));
    if ((info.scale_kinds & (1u << kind)) == 0)
        throw plugin_error(ALTGRAD_STATUS_UNSUPPORTED, "dot_add: scale kind " + std::to_string(kind) +
                                                           " is not among the instruction's scale_kinds " +
                                                           std::to_string(info.scale_kinds));
    if (kind == ALTGRAD_ACC_SCALE_NONE && (a->a_scales != nullptr || a->b_scales != nullptr))
        invalid("dot_add: a_scales or b_scales is set with scale kind none");
}

// The buffers: sizes, NULLs, overlaps (see the top).
inline void check_buffers(const altgrad_accumulator_args* a) {
    const size_t na = checked_floats(a->m, a->k, "m x k"), nb = checked_floats(a->n, a->k, "n x k");
    const size_t nc = checked_floats(a->m, a->n, "m x n");
    const size_t block = scale_block(a->scale_kind);  // a known kind: check_scale_kind ran first
    const size_t per_row = block == 0 ? 0 : (a->k + block - 1) / block;
    const size_t nsa = checked_floats(a->m, per_row, "m x scales"),
                 nsb = checked_floats(a->n, per_row, "n x scales");
    if (nc == 0) return;  // nothing is read or written
    const struct {
        const void* p;
        size_t count;
        const char* name;
    } inputs[] = {
        {a->a, na, "a"}, {a->b, nb, "b"}, {a->a_scales, nsa, "a_scales"}, {a->b_scales, nsb, "b_scales"}};
    for (const auto& in : inputs)
        if (in.count != 0 && in.p == nullptr) invalid(std::string("dot_add: ") + in.name + " is NULL");
    if (a->c == nullptr || a->d == nullptr) invalid("dot_add: c or d is NULL with m x n > 0");
    if (a->d != a->c && overlapping(a->d, nc * sizeof(float), a->c, nc * sizeof(float)))
        invalid("dot_add: d overlaps c without being it");
    for (const auto& in : inputs)
        if (overlapping(a->d, nc * sizeof(float), in.p, in.count * sizeof(float)))
            invalid(std::string("dot_add: d overlaps ") + in.name);
}

}  // namespace detail

// The checks of a dot_add call (see the top), given the instance's info.
inline void check_accumulator_args(const altgrad_accumulator_args* a, const altgrad_accumulator_info& info) {
    if (a == nullptr || !ALTGRAD_STRUCT_HAS(a, altgrad_accumulator_args, cuda_stream))
        detail::invalid("dot_add: args is NULL or smaller than the v1.5 struct");
    const int32_t memory = detail::raw_enum(a->memory);
    if (memory != ALTGRAD_MEMORY_HOST && memory != ALTGRAD_MEMORY_CUDA)
        detail::invalid("dot_add: unknown memory kind " + std::to_string(memory));
    if ((info.memory_kinds & (1u << memory)) == 0)
        throw plugin_error(ALTGRAD_STATUS_UNSUPPORTED, "dot_add: memory kind " + std::to_string(memory) +
                                                           " is not among the instruction's memory_kinds");
    detail::check_scale_kind(a, info);
    if (a->k > info.depth)
        detail::invalid("dot_add: k " + std::to_string(a->k) + " is more than the depth " +
                        std::to_string(info.depth));
    detail::check_min_exponent(a->a_min_exponent, "a_min_exponent", info.group_size != 0);
    detail::check_min_exponent(a->b_min_exponent, "b_min_exponent", info.group_size != 0);
    detail::check_buffers(a);
}

namespace detail {
template <class T, class = void>
struct has_own_dot_add : std::false_type {};
template <class T>
struct has_own_dot_add<T, std::void_t<decltype(std::declval<const T&>().dot_add(
                              std::declval<const altgrad_accumulator_args&>()))>> : std::true_type {};
}  // namespace detail

// The vtable for accumulator class T made by Factory(const param_view&).
template <class T, T (*Factory)(const param_view&)>
struct accumulator_adapter {
    struct instance {
        T model;
        altgrad_accumulator_info info;
        instruction ins;
    };

    static const instance& self(const altgrad_accumulator* p, const char* call) {
        if (p == nullptr) detail::invalid(std::string(call) + ": accumulator instance is NULL");
        return *reinterpret_cast<const instance*>(p);
    }

    static altgrad_status create(const altgrad_param_list* params, altgrad_accumulator** out,
                                 altgrad_error* error) {
        return detail::guarded(error, [&] {
            if (out == nullptr) detail::invalid("create: out is NULL");
            *out = nullptr;
            T model = Factory(param_view(params));
            altgrad_accumulator_info info = model.info();
            info.struct_size = sizeof info;
            info.memory_kinds = 1u << ALTGRAD_MEMORY_HOST;  // the adapter's loops are the host's
            const std::string problem = instruction_problem(info);
            if (!problem.empty()) throw plugin_error(ALTGRAD_STATUS_INTERNAL, "create: info(): " + problem);
            const instruction ins{info.depth,  info.group_size, info.fraction_bits,
                                  info.halves, info.output,     info.scale_kinds};
            *out = reinterpret_cast<altgrad_accumulator*>(new instance{std::move(model), info, ins});
        });
    }

    static void destroy(altgrad_accumulator* p) { delete reinterpret_cast<instance*>(p); }

    static altgrad_status get_info(const altgrad_accumulator* p, altgrad_accumulator_info* info,
                                   altgrad_error* error) {
        return detail::guarded(error, [&] { detail::copy_info(info, self(p, "get_info").info); });
    }

    static altgrad_status dot_add(const altgrad_accumulator* p, const altgrad_accumulator_args* a,
                                  altgrad_error* error) {
        return detail::guarded(error, [&] {
            const instance& s = self(p, "dot_add");
            check_accumulator_args(a, s.info);
            if constexpr (detail::has_own_dot_add<T>::value) s.model.dot_add(*a);
            else fused_dot_add(s.ins, *a);
        });
    }

    static const altgrad_accumulator_vtable* vtable() {
        static const altgrad_accumulator_vtable table = {sizeof(altgrad_accumulator_vtable), &create,
                                                         &destroy, &get_info, &dot_add};
        return &table;
    }
};

}  // namespace altgrad::sdk

// Export the one entry symbol of an accumulator plugin library (export.hpp:
// the identity comes from the manifest, or is given first):
//   ALTGRAD_ACCUMULATOR_PLUGIN(FACTORY)
//   ALTGRAD_ACCUMULATOR_PLUGIN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY)
//   ALTGRAD_ACCUMULATOR_PLUGIN_WITH_PARAMS(FACTORY, PARAM_SPECS, PARAM_COUNT)
//   ALTGRAD_ACCUMULATOR_PLUGIN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY,
//       PARAM_SPECS, PARAM_COUNT)
// The five tables of an accumulator plugin's entry.
#define ALTGRAD_SDK_ACCUMULATOR_TABLES(FACTORY) \
    nullptr, nullptr, nullptr, nullptr,         \
        (::altgrad::sdk::accumulator_adapter<ALTGRAD_SDK_CLASS_OF(FACTORY), &FACTORY>::vtable())

#define ALTGRAD_SDK_ACCUMULATOR_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, SPECS, \
                                                  COUNT)                                                  \
    ALTGRAD_SDK_ENTRY_EXPANDED(ALTGRAD_KIND_ACCUMULATOR, NAME, MAJOR, MINOR, PATCH, DESCRIPTION, SPECS,   \
                               COUNT, ALTGRAD_SDK_ACCUMULATOR_TABLES(FACTORY))
#define ALTGRAD_SDK_ACCUMULATOR_MANIFEST_WITH_PARAMS(FACTORY, SPECS, COUNT) \
    ALTGRAD_SDK_ENTRY_FROM_MANIFEST(ALTGRAD_KIND_ACCUMULATOR, SPECS, COUNT, \
                                    ALTGRAD_SDK_ACCUMULATOR_TABLES(FACTORY))
#define ALTGRAD_SDK_ACCUMULATOR_GIVEN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY) \
    ALTGRAD_SDK_ACCUMULATOR_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, nullptr, 0)
#define ALTGRAD_SDK_ACCUMULATOR_MANIFEST(FACTORY) \
    ALTGRAD_SDK_ACCUMULATOR_MANIFEST_WITH_PARAMS(FACTORY, nullptr, 0)

#define ALTGRAD_ACCUMULATOR_PLUGIN_WITH_PARAMS(...)                     \
    ALTGRAD_SDK_DISPATCH_3_8(ALTGRAD_SDK_ACCUMULATOR_GIVEN_WITH_PARAMS, \
                             ALTGRAD_SDK_ACCUMULATOR_MANIFEST_WITH_PARAMS, __VA_ARGS__)
#define ALTGRAD_ACCUMULATOR_PLUGIN(...) \
    ALTGRAD_SDK_DISPATCH_1_6(ALTGRAD_SDK_ACCUMULATOR_GIVEN, ALTGRAD_SDK_ACCUMULATOR_MANIFEST, __VA_ARGS__)
