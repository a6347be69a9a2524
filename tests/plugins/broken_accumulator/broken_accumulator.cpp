// Test plugin: Hopper's FP8 instruction (depth 32, F 13, E8M13), correct
// through the SDK, with the bug the environment variable
// ALTGRAD_TEST_BROKEN_ACCUMULATOR names planted, for the conformance kit's
// accumulator.* checks to catch; unset, it is correct:
//   "exact_sum"     C + a . b summed exactly (long double) and rounded to
//                   nearest: no term truncated at F bits
//   "more_bits"     the terms truncated at 14 bits, one more than declared
//   "signed_zero"   a zero result keeps the sign of C (-0)
//   "nan_payload"   a NaN result keeps the payload of the first NaN input
//   "row_position"  rows from the fifth of a call on truncated at 12 bits
//   "in_place"      in place (d == c), D of output 0 comes out doubled
//   "deep"          k beyond the depth accepted (the first 32 products used)
//   "lenient"       a NULL a accepted (OK, nothing done)
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <altgrad/sdk/accumulator_plugin.hpp>

namespace {

namespace sdk = altgrad::sdk;

bool broken(const char* bug) {
    const char* chosen = std::getenv("ALTGRAD_TEST_BROKEN_ACCUMULATOR");
    return chosen != nullptr && std::strcmp(chosen, bug) == 0;
}

sdk::instruction hopper_fp8(uint32_t fraction_bits) {
    sdk::instruction i;
    i.depth = 32;
    i.fraction_bits = fraction_bits;
    i.output = ALTGRAD_ACC_OUTPUT_E8M13;
    return i;
}

// C + a . b in long double, rounded to nearest float32, then toward zero to 13 fraction bits.
float exact_sum(const altgrad_accumulator_args& x, size_t i, size_t j) {
    long double sum = x.c[i * x.n + j];
    for (size_t l = 0; l < x.k; ++l) sum += static_cast<long double>(x.a[i * x.k + l]) * x.b[j * x.k + l];
    const float f = static_cast<float>(sum);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if (std::isfinite(f)) bits &= ~0x3FFu;
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out == 0 ? 0.0f : out;
}

class planted_accumulator {
public:
    altgrad_accumulator_info info() const { return sdk::instruction_model(hopper_fp8(13)).info(); }

    void dot_add(const altgrad_accumulator_args& x) const {
        sdk::fused_dot_add(hopper_fp8(broken("more_bits") ? 14 : 13), x);
        if (broken("row_position") && x.m > 4) {
            altgrad_accumulator_args rest = x;
            rest.a = x.a + 4 * x.k;
            rest.c = x.c + 4 * x.n;
            rest.d = x.d + 4 * x.n;
            rest.m = x.m - 4;
            sdk::fused_dot_add(hopper_fp8(12), rest);
        }
        for (size_t i = 0; i < x.m; ++i)
            for (size_t j = 0; j < x.n; ++j) {
                float& d = x.d[i * x.n + j];
                if (broken("exact_sum")) d = exact_sum(x, i, j);
                if (broken("signed_zero") && d == 0 && std::signbit(x.c[i * x.n + j])) d = -0.0f;
                if (broken("nan_payload") && std::isnan(d))
                    for (size_t l = 0; l < x.k; ++l)
                        if (std::isnan(x.a[i * x.k + l])) d = x.a[i * x.k + l];
            }
    }
};

planted_accumulator make(const sdk::param_view&) { return {}; }

using adapter = sdk::accumulator_adapter<planted_accumulator, &make>;

altgrad_status dot_add(const altgrad_accumulator* acc, const altgrad_accumulator_args* x, altgrad_error* e) {
    if (broken("lenient") && x != nullptr && x->a == nullptr) return ALTGRAD_STATUS_OK;
    if (broken("deep") && x != nullptr && x->k > 32) {
        altgrad_accumulator_args cut = *x;
        cut.k = 32;  // the rows keep their stride: only the first 32 of each are read correctly for row 0
        return adapter::dot_add(acc, &cut, e);
    }
    const altgrad_status s = adapter::dot_add(acc, x, e);
    if (broken("in_place") && s == ALTGRAD_STATUS_OK && x->m * x->n > 0 && x->d == x->c) x->d[0] *= 2;
    return s;
}

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {sizeof(altgrad_descriptor),
                                                  ALTGRAD_KIND_ACCUMULATOR,
                                                  "broken_accumulator",
                                                  {1, 0, 0},
                                                  "Hopper's FP8 instruction with a planted bug",
                                                  nullptr,
                                                  0};
    static const altgrad_accumulator_vtable table = {sizeof(altgrad_accumulator_vtable), adapter::create,
                                                     adapter::destroy, adapter::get_info, &dot_add};
    static const altgrad_entry entry = {sizeof(altgrad_entry),
                                        ALTGRAD_ABI_VERSION_INIT,
                                        &descriptor,
                                        nullptr,
                                        nullptr,
                                        nullptr,
                                        nullptr,
                                        &table};
    return &entry;
}
