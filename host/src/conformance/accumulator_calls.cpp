#include "conformance/accumulator_calls.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>

namespace altgrad::host::conformance {

bool make_accumulator(env& e, accumulator_ptr& acc, result& why) {
    if (!load_for_check(e, why)) return false;
    try {
        acc = accumulator_handle::create(e.plugin, e.opts.params, "conformance --param");
        return true;
    } catch (const std::exception& x) {
        why = skip(std::string("the plugin does not create (see params.defaults): ") + x.what());
        return false;
    }
}

// A random finite value of the format, its codes drawn uniformly (the largest
// exponent field left out: Inf and NaN where the format has them).
float random_value(std::mt19937_64& r, const minifloat& f) {
    const uint32_t field = static_cast<uint32_t>(r() % ((1u << f.e_bits) - (f.e_bits > 2 ? 1 : 0)));
    const uint32_t m = static_cast<uint32_t>(r() % (1u << f.m_bits));
    const long double v = field == 0 ? std::ldexp(static_cast<long double>(m), 1 - f.bias - f.m_bits)
                                     : std::ldexp(static_cast<long double>(m + (1u << f.m_bits)),
                                                  static_cast<int>(field) - f.bias - f.m_bits);
    return static_cast<float>(r() % 2 ? -v : v);
}

// The call on guarded copies (inputs read-only); d separate, or in place in c's copy.
std::vector<float> run_unnoted(const accumulator_handle& acc, const acc_call& x, bool in_place) {
    guarded_array<float> a(x.a, "a"), b(x.b, "b"), sa(x.a_scales, "a_scales"), sb(x.b_scales, "b_scales");
    guarded_array<float> c(x.c, "c"), d(x.c.size(), "d");
    for (guarded_array<float>* in : {&a, &b, &sa, &sb}) in->seal();
    if (!in_place) c.seal();
    guarded_array<float>& out = in_place ? c : d;
    acc.dot_add(x.operands(a.data(), b.data(), c.data(), out.data(), x.a_scales.empty() ? nullptr : sa.data(),
                           x.b_scales.empty() ? nullptr : sb.data()));
    expect_front_intact(out.buffer(), "dot_add (" + x.text() + ")", in_place ? "c (in place)" : "d");
    return out.to_vector();
}

std::vector<float> run(const accumulator_handle& acc, const acc_call& x, bool in_place) {
    const call_note note("dot_add (" + x.text() + (in_place ? ", in place" : "") + ")");
    return run_unnoted(acc, x, in_place);
}

std::vector<float> model(const accumulator_handle& acc, const acc_call& x) {
    std::vector<float> d(x.c.size());
    return model_tile(acc.info(), sdk::accumulator_args(x.own(d.data())));
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::string bits_text(float x) {
    uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a (0x%08x)", static_cast<double>(x), b);
    return buf;
}

namespace {

std::string row_text(const float* x, size_t k) {
    size_t shown = k;
    while (shown > 0 && x[shown - 1] == 0 && !std::signbit(x[shown - 1])) --shown;  // trailing +0s, counted
    std::string s;
    for (size_t l = 0; l < shown; ++l) s += (l ? " " : "") + hex_float(x[l]);
    if (shown < k) s += std::string(shown ? " " : "") + "then " + std::to_string(k - shown) + " zeros";
    return s;
}

}  // namespace

// The first output whose bits differ from `want`, described with its operands; "" when none.
std::string difference(const acc_call& x, const std::vector<float>& got, const std::vector<float>& want,
                       const char* want_name) {
    for (size_t i = 0; i < x.m; ++i)
        for (size_t j = 0; j < x.n; ++j) {
            const size_t o = i * x.n + j;
            if (same_bits(got[o], want[o])) continue;
            const size_t per = x.scales_per_row();
            std::string s = "output (" + std::to_string(i) + ", " + std::to_string(j) + ") is " +
                            bits_text(got[o]) + ", " + want_name + " " + bits_text(want[o]) + "; c " +
                            hex_float(x.c[o]) + ", a [" + row_text(&x.a[i * x.k], x.k) + "], b [" +
                            row_text(&x.b[j * x.k], x.k) + "]";
            if (per != 0)
                s += ", scales [" + row_text(&x.a_scales[i * per], per) + "] and [" +
                     row_text(&x.b_scales[j * per], per) + "]";
            return s;
        }
    return "";
}

bool grouped(const accumulator_handle& acc) { return acc.info().group_size != 0; }

// The scale kinds the instruction declares, other than none.
std::vector<altgrad_acc_scale_kind> declared_scales(const accumulator_handle& acc) {
    std::vector<altgrad_acc_scale_kind> out;
    for (altgrad_acc_scale_kind kind : {ALTGRAD_ACC_SCALE_UE8M0_32, ALTGRAD_ACC_SCALE_UE4M3_16})
        if (acc.info().scale_kinds & (1u << kind)) out.push_back(kind);
    return out;
}

namespace {

float random_scale(std::mt19937_64& r, altgrad_acc_scale_kind kind) {
    if (kind == ALTGRAD_ACC_SCALE_UE8M0_32) return std::ldexp(1.0f, static_cast<int>(r() % 255) - 127);
    return random_value(r, kE4M3);  // UE4M3: an E4M3 value, its sign ignored
}

}  // namespace

namespace {

// C: an FP16 value for an FP16 output, else now and then any float32, mostly
// a value near the products' scale, sometimes 0.
float random_c(std::mt19937_64& r, const accumulator_handle& acc) {
    if (acc.info().output == ALTGRAD_ACC_OUTPUT_FLOAT16) return random_value(r, kFP16);
    const uint32_t pick = static_cast<uint32_t>(r() % 8);
    if (pick == 0) return 0.0f;
    if (pick == 1) return random_value(r, kBF16);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    return std::ldexp(normal(r), static_cast<int>(r() % 40) - 20);
}

}  // namespace

// m x n outputs of k products: operand formats and scales drawn for the instruction.
acc_call random_call(env& e, const accumulator_handle& acc, size_t m, size_t n, size_t k) {
    e.drew_random = true;
    std::mt19937_64& r = e.rng;
    acc_call x;
    x.m = m;
    x.n = n;
    x.k = k;
    const minifloat* formats[] = {&kE4M3, &kE5M2, &kFP16, &kBF16};
    const minifloat& fa = grouped(acc) ? kE2M1 : *formats[r() % 4];
    const minifloat& fb = grouped(acc) ? kE2M1 : *formats[r() % 4];
    x.a_min = fa.min_exponent();
    x.b_min = fb.min_exponent();
    for (size_t i = 0; i < m * k; ++i) x.a.push_back(random_value(r, fa));
    for (size_t i = 0; i < n * k; ++i) x.b.push_back(random_value(r, fb));
    for (size_t i = 0; i < m * n; ++i) x.c.push_back(random_c(r, acc));
    const std::vector<altgrad_acc_scale_kind> kinds = declared_scales(acc);
    const bool none = (acc.info().scale_kinds & (1u << ALTGRAD_ACC_SCALE_NONE)) != 0;
    if (!kinds.empty() && (!none || r() % 2 == 0)) {
        x.scale_kind = kinds[r() % kinds.size()];
        for (size_t i = 0; i < m * x.scales_per_row(); ++i)
            x.a_scales.push_back(random_scale(r, x.scale_kind));
        for (size_t i = 0; i < n * x.scales_per_row(); ++i)
            x.b_scales.push_back(random_scale(r, x.scale_kind));
    }
    return x;
}

// The call against the kit's model: "" when every output's bits agree.
std::string against_model(const accumulator_handle& acc, const acc_call& x) {
    return difference(x, run(acc, x), model(acc, x), "the definition gives");
}

acc_call single(const accumulator_handle& acc, int32_t min_exponent) {
    acc_call x;
    x.m = x.n = 1;
    x.k = acc.info().depth;
    x.a.assign(x.k, 0.0f);
    x.b.assign(x.k, 0.0f);
    x.c = {0.0f};
    x.a_min = x.b_min = min_exponent;
    if ((acc.info().scale_kinds & (1u << ALTGRAD_ACC_SCALE_NONE)) == 0)
        with_scales(x, declared_scales(acc).front());
    return x;
}

void with_scales(acc_call& x, altgrad_acc_scale_kind kind) {
    x.scale_kind = kind;
    x.a_scales.assign(x.scales_per_row(), 1.0f);
    x.b_scales.assign(x.scales_per_row(), 1.0f);
}

}  // namespace altgrad::host::conformance
