// The format checks' plugin calls, each on guarded buffers, and their inputs:
// the probes and the model of the codes to compare with (checks.hpp says
// what each does).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conformance/checks.hpp"

namespace altgrad::host::conformance {

namespace {

std::string quantize_call(size_t n, const quantize_options& o) {
    return "quantize of " + std::to_string(n) + " elements (" + mode_text(o) + ")";
}

bool representable_scaled(float x) { return std::isfinite(x); }

}  // namespace

bool same(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y;
}

std::string mode_text(const quantize_options& o) {
    char buf[160];
    if (o.block_scales != nullptr)
        std::snprintf(buf, sizeof buf, "rounding %s, overflow %s, block scales, blocks of %zu",
                      rounding_name(o.rounding), overflow_name(o.overflow), o.block_size);
    else
        std::snprintf(buf, sizeof buf, "rounding %s, overflow %s, scale %s", rounding_name(o.rounding),
                      overflow_name(o.overflow), hex_float(o.scale).c_str());
    return buf;
}

void expect_front_intact(const guarded_buffer& b, const std::string& call, const char* buffer) {
    if (!b.front_intact())
        throw finding(fail(call + " wrote before element 0 of its " + buffer + " buffer", call,
                           "write only elements 0 .. count-1 of each buffer"));
}

std::vector<float> quantize_unnoted(const env& e, const std::vector<float>& in, const quantize_options& o,
                                    quantize_counts* counts) {
    guarded_array<float> input(in, "input");
    input.seal();
    guarded_array<float> output(in.size(), "output");
    const quantize_counts c = e.format->quantize(input.data(), output.data(), in.size(), o);
    expect_front_intact(output.buffer(), quantize_call(in.size(), o), "output");
    if (counts) *counts = c;
    return output.to_vector();
}

std::vector<float> quantize(const env& e, const std::vector<float>& in, const quantize_options& o,
                            quantize_counts* counts) {
    const call_note note(quantize_call(in.size(), o));
    return quantize_unnoted(e, in, o, counts);
}

std::vector<uint8_t> encode(const env& e, const std::vector<float>& in, const quantize_options& o) {
    const std::string call = "encode of " + std::to_string(in.size()) + " elements (" + mode_text(o) + ")";
    const call_note note(call);
    const size_t width = e.format->info().code_bytes;
    guarded_array<float> input(in, "input");
    input.seal();
    guarded_buffer codes(in.size() * width, width, "codes");
    e.format->encode(input.data(), codes.data(), in.size(), o);
    expect_front_intact(codes, call, "codes");
    const uint8_t* c = static_cast<const uint8_t*>(codes.data());
    return std::vector<uint8_t>(c, c + in.size() * width);
}

std::vector<float> decode(const env& e, const std::vector<uint8_t>& codes, float scale,
                          const float* block_scales, size_t block_size) {
    const size_t width = e.format->info().code_bytes, n = codes.size() / width;
    const std::string call = "decode of " + std::to_string(n) + " codes (" +
                             (block_scales ? "block scales, blocks of " + std::to_string(block_size)
                                           : "scale " + hex_float(scale)) +
                             ")";
    const call_note note(call);
    guarded_buffer input(codes.size(), width, "codes");
    if (!codes.empty()) std::memcpy(input.data(), codes.data(), codes.size());
    input.seal();
    guarded_array<float> output(n, "output");
    e.format->decode(input.data(), output.data(), n, scale, block_scales, block_size);
    expect_front_intact(output.buffer(), call, "output");
    return output.to_vector();
}

quantize_options mode(altgrad_rounding r, altgrad_overflow o, float scale) {
    quantize_options q;
    q.rounding = r;
    q.overflow = o;
    q.scale = scale;
    return q;
}

std::vector<float> grid_probes(const format_table& t) {
    std::vector<float> p;
    const auto& f = t.finite();
    for (size_t i = 0; i < f.size(); ++i) {
        p.push_back(f[i].value);
        if (i + 1 < f.size()) {
            const double mid = (static_cast<double>(f[i].value) + f[i + 1].value) / 2;
            const float m = static_cast<float>(mid);
            p.push_back(m);
            p.push_back(std::nextafter(m, -INFINITY));
            p.push_back(std::nextafter(m, INFINITY));
        }
    }
    for (float edge : {t.max(), t.lowest()}) {
        const float out = edge > 0 ? INFINITY : -INFINITY;
        for (double k : {1.0001, 1.01, 1.1, 1.5, 2.0, 16.0, 1e6})
            if (std::isfinite(edge * k)) p.push_back(static_cast<float>(edge * k));
        p.push_back(std::nextafter(edge, out));
        p.push_back(out > 0 ? FLT_MAX : -FLT_MAX);
    }
    return p;
}

std::vector<float> random_probes(env& e, size_t n) {
    e.drew_random = true;
    const altgrad_format_info& i = e.format->info();
    const double lo_mag = std::max(i.min_subnormal > 0 ? i.min_subnormal : i.min_normal, 1e-38) / 8;
    const double hi_mag = std::min(i.max_finite * 8, static_cast<double>(FLT_MAX));
    std::uniform_real_distribution<double> log_mag(std::log2(lo_mag), std::log2(hi_mag));
    std::uniform_real_distribution<double> inside(i.lowest_finite, i.max_finite);
    std::bernoulli_distribution coin(0.5);
    std::vector<float> p;
    p.reserve(n);
    for (size_t k = 0; k < n; ++k) {
        const double v = (k % 4 == 3) ? inside(e.rng) : std::exp2(log_mag(e.rng)) * (coin(e.rng) ? -1 : 1);
        if (representable_scaled(static_cast<float>(v))) p.push_back(static_cast<float>(v));
    }
    return p;
}

std::vector<float> all_probes(env& e, size_t random_count) {
    std::vector<float> p = e.table ? grid_probes(*e.table) : std::vector<float>{};
    const std::vector<float> r = random_probes(e, random_count);
    p.insert(p.end(), r.begin(), r.end());
    return p;
}

result against_reference(env& e, const std::vector<float>& inputs, const quantize_options& o,
                         const char* hint) {
    const std::vector<float> got = quantize(e, inputs, o);
    for (size_t k = 0; k < inputs.size(); ++k) {
        const float scaled = inputs[k] * o.scale;
        const format_table::expectation want = e.table->expect(scaled, o.rounding, o.overflow);
        const float want_value = want.value / o.scale;
        if (!same(got[k], want_value))
            return fail("got " + hex_float(got[k]) + ", expected " + hex_float(want_value) + ": " + want.why,
                        "x = " + hex_float(inputs[k]) + " (" + mode_text(o) + ")", hint);
    }
    return pass(std::to_string(inputs.size()) + " inputs match the model built from the format's own codes");
}

result needs_table(const env& e) {
    return skip("needs a code table; the format has " + std::to_string(e.format->info().total_bits) +
                " bits (at most 16 are tabulated)");
}

}  // namespace altgrad::host::conformance
