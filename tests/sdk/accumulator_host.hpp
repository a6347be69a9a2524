// An accumulator plugin (ABI 1.5) loaded as a host loads it (dlopen with
// RTLD_NOW | RTLD_LOCAL, the one entry symbol), one instance with its
// parameters, and its dot_add on vectors: the tests' own loader, not the
// host's.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/call_args.hpp>

#include "plugin_host.hpp"  // Param, param_items, plugin_entry
#include "reference.hpp"    // fbits, bfloat

namespace acctest {

using agtest::Param;

using agtest::bfloat;  // bits -> float
using agtest::fbits;   // float -> bits

// The value of a minifloat code of 1 sign, e_bits exponent and m_bits mantissa
// bits with the given bias, subnormals at exponent field 0 (special codes are
// the caller's to avoid).
inline float minifloat(uint32_t code, int e_bits, int m_bits, int bias) {
    const uint32_t m = code & ((1u << m_bits) - 1), e = (code >> m_bits) & ((1u << e_bits) - 1);
    const bool negative = (code >> (e_bits + m_bits)) & 1u;
    const double v =
        e == 0 ? std::ldexp(static_cast<double>(m), 1 - bias - m_bits)
               : std::ldexp(static_cast<double>(m + (1u << m_bits)), static_cast<int>(e) - bias - m_bits);
    return static_cast<float>(negative ? -v : v);
}

// The entry of the bundled accumulator plugin `name`.
inline const altgrad_entry& accumulator_entry(const std::string& name) {
    const altgrad_entry& e = agtest::plugin_entry(name);
    if (e.descriptor->kind != ALTGRAD_KIND_ACCUMULATOR || e.accumulator == nullptr)
        throw std::runtime_error(name + " is not an accumulator plugin");
    return e;
}

// What one call multiplies: a [m, k], b [n, k], c [m, n], the operands'
// minimum exponents and the block scales (UE8M0 per 32 or UE4M3 per 16).
struct call {
    std::vector<float> a, b, c, a_scales, b_scales;
    size_t m = 0, n = 0, k = 0;
    int32_t a_min_exponent = -6, b_min_exponent = -6;
    altgrad_acc_scale_kind scale_kind = ALTGRAD_ACC_SCALE_NONE;

    altgrad_accumulator_args args(float* d) const {
        altgrad::sdk::dot_add_operands o;
        o.a = a.data();
        o.b = b.data();
        o.c = c.data();
        o.d = d;
        o.m = m;
        o.n = n;
        o.k = k;
        o.a_min_exponent = a_min_exponent;
        o.b_min_exponent = b_min_exponent;
        o.scale_kind = scale_kind;
        o.a_scales = a_scales.empty() ? nullptr : a_scales.data();
        o.b_scales = b_scales.empty() ? nullptr : b_scales.data();
        return altgrad::sdk::accumulator_args(o);
    }
};

class Accumulator {
public:
    Accumulator(const std::string& name, const std::vector<Param>& params = {})
        : name_(name), vt_(*accumulator_entry(name).accumulator) {
        const std::vector<altgrad_param> items = agtest::param_items(params);
        const altgrad_param_list list{sizeof(altgrad_param_list), items.empty() ? nullptr : items.data(),
                                      items.size()};
        altgrad_error e = altgrad::sdk::blank_error();
        if (vt_.create(&list, &instance_, &e) != ALTGRAD_STATUS_OK)
            throw std::runtime_error(name + ": create failed: " + e.message);
        info_.struct_size = sizeof info_;
        if (vt_.get_info(instance_, &info_, &e) != ALTGRAD_STATUS_OK)
            throw std::runtime_error(name + ": get_info failed: " + e.message);
    }
    Accumulator(const Accumulator&) = delete;
    Accumulator& operator=(const Accumulator&) = delete;
    ~Accumulator() { vt_.destroy(instance_); }

    const std::string& name() const { return name_; }
    const altgrad_accumulator_info& info() const { return info_; }

    altgrad_status dot_add_raw(const altgrad_accumulator_args& x, std::string& message) const {
        altgrad_error e = altgrad::sdk::blank_error();
        const altgrad_status s = vt_.dot_add(instance_, &x, &e);
        message = s == ALTGRAD_STATUS_OK ? "" : altgrad::sdk::error_message(e);
        return s;
    }

    std::vector<float> dot_add(const call& c) const {
        std::vector<float> d(c.m * c.n);
        std::string message;
        if (dot_add_raw(c.args(d.data()), message) != ALTGRAD_STATUS_OK)
            throw std::runtime_error(name_ + ": dot_add failed: " + message);
        return d;
    }

private:
    std::string name_;
    const altgrad_accumulator_vtable& vt_;
    altgrad_accumulator* instance_ = nullptr;
    altgrad_accumulator_info info_{};
};

}  // namespace acctest
