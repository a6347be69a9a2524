// Shared by the broken_* test plugins: a correct E4M3 (OCP FP8 E4M3FN) that
// each plugin wraps, changing one member to plant one bug the conformance kit
// must catch. A plugin derives from e4m3 and hides the member it breaks; the
// adapter (altgrad/sdk/format_plugin.hpp) calls the derived class's members.
//
//   struct my_bug : broken::e4m3 { ...hide info() or quantize_bits()... };
//   BROKEN_E4M3_PLUGIN("broken_my_bug", my_bug, "what is wrong")
//
// A bug in what the adapter does around the class (the loop over the buffer,
// the scale in decode) wraps a function of broken::e4m3_adapter instead.
//
// A broken intervention whose bug is in observe itself writes that function
// and takes the rest from an intervention that answers nothing:
//   BROKEN_INTERVENTION_PLUGIN("broken_my_bug", my_observe, "what is wrong")
#pragma once

#include <cstdint>

#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_plugin.hpp>
#include <altgrad/sdk/intervention_plugin.hpp>

namespace broken {

class e4m3 {
public:
    // For the derived classes' kernels.
    using element_counts = altgrad::sdk::element_counts;
    static uint32_t float_bits(float x) { return altgrad::sdk::float_bits(x); }
    static float bits_float(uint32_t b) { return altgrad::sdk::bits_float(b); }

    altgrad_format_info info() const { return f_.info(); }
    uint32_t total_bits() const { return f_.total_bits(); }

    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        return f_.template quantize_bits<R, O>(bits, random, counts);
    }

    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t encode_bits(uint32_t bits, uint32_t random, element_counts& counts, bool& bad) const {
        return f_.template encode_bits<R, O>(bits, random, counts, bad);
    }

    float decode(uint32_t code) const { return f_.decode(code); }

protected:
    altgrad::sdk::exmy_format f_{{4, 3, 7, altgrad::sdk::exmy_specials::finite_nan}};
};

template <class F>
F make(const altgrad::sdk::param_view&) {
    return F();
}

// For a bug in a vtable function rather than in the format class: the
// correct E4M3's adapter, whose functions a plugin wraps in a table of its own
// (see BROKEN_E4M3_TABLE_PLUGIN).
using e4m3_adapter = altgrad::sdk::format_adapter<e4m3, &make<e4m3>>;

// An intervention that answers nothing: create and destroy for the broken
// interventions (see BROKEN_INTERVENTION_PLUGIN).
class no_actions {
public:
    void observe(const altgrad_observation&, altgrad::sdk::action_sink&) {}
};
inline no_actions make_no_actions(const altgrad::sdk::param_view&) { return no_actions(); }
using no_actions_adapter = altgrad::sdk::intervention_adapter<no_actions, &make_no_actions>;

}  // namespace broken

#define BROKEN_E4M3_PLUGIN(NAME, CLASS, DESCRIPTION) \
    ALTGRAD_FORMAT_PLUGIN(NAME, 1, 0, 0, DESCRIPTION, ::broken::make<CLASS>)

// The correct E4M3's table with its function MEMBER (quantize, encode, decode,
// ...) replaced by REPLACEMENT, which usually calls broken::e4m3_adapter's.
#define BROKEN_E4M3_TABLE_PLUGIN(NAME, MEMBER, REPLACEMENT, DESCRIPTION)                                    \
    namespace {                                                                                             \
    const altgrad_format_vtable* broken_table() {                                                           \
        static const altgrad_format_vtable table = [] {                                                     \
            altgrad_format_vtable v = *::broken::e4m3_adapter::vtable();                                    \
            v.MEMBER = REPLACEMENT;                                                                         \
            return v;                                                                                       \
        }();                                                                                                \
        return &table;                                                                                      \
    }                                                                                                       \
    }                                                                                                       \
    ALTGRAD_SDK_ENTRY(ALTGRAD_KIND_FORMAT, NAME, 1, 0, 0, DESCRIPTION, nullptr, 0, broken_table(), nullptr, \
                      nullptr)

// An intervention (ABI 1.1, no saved state) whose observe is OBSERVE.
#define BROKEN_INTERVENTION_PLUGIN(NAME, OBSERVE, DESCRIPTION)                                             \
    namespace {                                                                                            \
    const altgrad_intervention_vtable broken_intervention_table = {sizeof(altgrad_intervention_vtable),    \
                                                                   &::broken::no_actions_adapter::create,  \
                                                                   &::broken::no_actions_adapter::destroy, \
                                                                   OBSERVE,                                \
                                                                   nullptr,                                \
                                                                   nullptr};                               \
    }                                                                                                      \
    ALTGRAD_SDK_ENTRY(ALTGRAD_KIND_INTERVENTION, NAME, 1, 0, 0, DESCRIPTION, nullptr, 0, nullptr,          \
                      &broken_intervention_table, nullptr)
