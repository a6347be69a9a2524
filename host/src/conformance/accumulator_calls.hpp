// The calls the accumulator.* checks make (accumulator_checks.cpp,
// accumulator_call_checks.cpp): one call's data, random operands of the
// formats an instruction takes, the plugin's call on guarded buffers, the
// kit's model of it, and the first output where two results differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <altgrad/sdk/call_args.hpp>

#include "conformance/accumulator_model.hpp"
#include "conformance/checks.hpp"
#include "plugins/accumulator_handle.hpp"

namespace altgrad::host::conformance {

using accumulator_ptr = std::shared_ptr<accumulator_handle>;

// Load the plugin and create an instance with the kit's parameters; a
// failure is load.* or params.*'s finding, so skip (false, `why` set).
bool make_accumulator(env& e, accumulator_ptr& acc, result& why);

struct minifloat {
    const char* name;
    int e_bits, m_bits, bias;
    int32_t min_exponent() const { return 1 - bias; }
};
inline const minifloat kE4M3{"e4m3", 4, 3, 7}, kE5M2{"e5m2", 5, 2, 15}, kFP16{"fp16", 5, 10, 15},
    kBF16{"bf16", 8, 7, 127}, kE2M1{"e2m1", 2, 1, 1};

// A random finite value of the format, its codes drawn uniformly (the largest
// exponent field left out: Inf and NaN where the format has them).
float random_value(std::mt19937_64& r, const minifloat& f);

// What one dot_add call multiplies, owning its buffers.
struct acc_call {
    size_t m = 0, n = 0, k = 0;
    std::vector<float> a, b, c, a_scales, b_scales;
    int32_t a_min = -126, b_min = -126;
    altgrad_acc_scale_kind scale_kind = ALTGRAD_ACC_SCALE_NONE;

    size_t scales_per_row() const {
        const size_t block = acc_scale_block(scale_kind);
        return block == 0 ? 0 : (k + block - 1) / block;
    }
    sdk::dot_add_operands operands(const float* a_, const float* b_, const float* c_, float* d_,
                                   const float* sa, const float* sb) const {
        sdk::dot_add_operands o;
        o.a = a_;
        o.b = b_;
        o.c = c_;
        o.d = d_;
        o.m = m;
        o.n = n;
        o.k = k;
        o.a_min_exponent = a_min;
        o.b_min_exponent = b_min;
        o.scale_kind = scale_kind;
        o.a_scales = sa;
        o.b_scales = sb;
        return o;
    }
    // The operands on this call's own buffers (no scales: NULL), d apart.
    sdk::dot_add_operands own(float* d) const {
        return operands(a.data(), b.data(), c.data(), d, a_scales.empty() ? nullptr : a_scales.data(),
                        b_scales.empty() ? nullptr : b_scales.data());
    }
    std::string text() const {
        return std::to_string(m) + " x " + std::to_string(n) + " outputs, k " + std::to_string(k) +
               ", min exponents " + std::to_string(a_min) + " and " + std::to_string(b_min) + ", scales " +
               acc_scale_kind_names().name(scale_kind);
    }
};

// The call on guarded copies (inputs read-only); d separate, or in place in
// c's copy. run notes the call for a crash report; run_unnoted does not (threads).
std::vector<float> run_unnoted(const accumulator_handle& acc, const acc_call& x, bool in_place = false);
std::vector<float> run(const accumulator_handle& acc, const acc_call& x, bool in_place = false);
// The kit's model of the call (accumulator_model.hpp).
std::vector<float> model(const accumulator_handle& acc, const acc_call& x);

bool same_bits(float a, float b);
// "%a (0x........)".
std::string bits_text(float x);
// The first output whose bits differ from `want`, described with its
// operands; "" when none.
std::string difference(const acc_call& x, const std::vector<float>& got, const std::vector<float>& want,
                       const char* want_name);

// A block-scaled FP4 instruction (group_size > 0: E2M1 operands).
bool grouped(const accumulator_handle& acc);
// The scale kinds the instruction declares, other than none.
std::vector<altgrad_acc_scale_kind> declared_scales(const accumulator_handle& acc);
// m x n outputs of k products: operand formats (E4M3, E5M2, FP16, BF16; E2M1
// for a grouped instruction), C and scales drawn for the instruction.
acc_call random_call(env& e, const accumulator_handle& acc, size_t m, size_t n, size_t k);
// The call against the kit's model: "" when every output's bits agree.
std::string against_model(const accumulator_handle& acc, const acc_call& x);
// One output (m = n = 1) of k = depth products, all zero; C 0; scales of 1
// (the first kind declared) for an instruction that takes scales always.
acc_call single(const accumulator_handle& acc, int32_t min_exponent);
// Scales of `kind`, all 1.
void with_scales(acc_call& x, altgrad_acc_scale_kind kind);

}  // namespace altgrad::host::conformance
