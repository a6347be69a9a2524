// Independent references for the numerics tests. Nothing here includes or
// calls the SDK's helpers: the value of every code is written from the format
// definitions (sign / exponent / mantissa -> ldexp, k/64, 2^(c-64), int8/128),
// and quantization is a brute-force search of the sorted finite values.
//
// Reference quantizer (the rules of altgrad/abi/format.h, restated):
//  - the input is the already-scaled float32 value;
//  - NaN -> NaN, no counts;
//  - +-Inf -> overflow: saturate gives +-max (lowest for -Inf); non-finite
//    gives +-Inf if the format has that Inf, else NaN if it has NaN, else
//    saturates (a saturated 0, below an unsigned format, is an underflow too);
//  - a finite value is rounded first, then overflow is decided. For a "grid"
//    format (ExMy, fixed point) the grid continues past the extremes: the next
//    notional value above max is `above_max` (its code parity is the opposite
//    of max's), so e.g. the tie just above max stays at max when max's code is
//    even. For a codebook, anything beyond the extremes overflows;
//  - nearest: the nearer neighbour, at an exact tie the one with the even code;
//    toward zero: the neighbour nearer zero; stochastic: P3109 StochasticA,
//    away from zero when floor(f * 2^32) + R >= 2^32, f the position of |x|
//    between the two neighbours' magnitudes;
//  - an overflow under non-finite mode goes to Inf/NaN except that
//    round-toward-zero keeps a finite input finite (saturates);
//  - a result of zero keeps the input's sign only in a format with signed
//    zeros; underflow = finite non-zero input with a zero result.
#pragma once

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <altgrad/abi/format.h>

namespace agtest {

inline uint32_t fbits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
}

inline float bfloat(uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
}

inline std::string hexf(float f) {
    std::ostringstream s;
    s.precision(9);
    s << f << " (0x" << std::hex << fbits(f) << ")";
    return s.str();
}

// Same float: both NaN, or identical bits (so +0 and -0 differ).
inline bool same_float(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return fbits(a) == fbits(b);
}

// -------------------------------------------------------------------------
// Philox4x32-10, written from the round definition of Salmon et al. (SC'11)
// as Random123 specifies it: per round, with multipliers M0 = 0xD2511F53 and
// M1 = 0xCD9E8D57,
//   (c0, c1, c2, c3) -> (hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1, lo(M0*c0))
// where round r (0-based) uses the key k + r * (0x9E3779B9, 0xBB67AE85). The
// key schedule is written in closed form (not as an incremental bump) so the
// code differs from the SDK's; the Random123 known-answer vectors check it.
// -------------------------------------------------------------------------
inline std::array<uint32_t, 4> ref_philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
    for (uint32_t r = 0; r < 10; ++r) {
        const uint32_t k0 = k[0] + r * 0x9E3779B9u;
        const uint32_t k1 = k[1] + r * 0xBB67AE85u;
        const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
        const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
        c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1 & 0xFFFFFFFFu),
             static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0 & 0xFFFFFFFFu)};
    }
    return c;
}

// The 32 random bits of element n under `seed` as format.h and philox.hpp
// define them: word n % 4 of Philox4x32-10 at the 128-bit counter n / 4
// (little-endian words: c0 = low 32 bits, c1 = high 32 bits, c2 = c3 = 0),
// keyed by the seed (k0 = low 32 bits, k1 = high 32 bits).
inline uint32_t ref_random_bits(uint64_t seed, uint64_t n) {
    const uint64_t block = n / 4;
    const auto w = ref_philox4x32_10(
        {static_cast<uint32_t>(block & 0xFFFFFFFFu), static_cast<uint32_t>(block >> 32), 0u, 0u},
        {static_cast<uint32_t>(seed & 0xFFFFFFFFu), static_cast<uint32_t>(seed >> 32)});
    return w[n % 4];
}

// -------------------------------------------------------------------------
// Format models.
// -------------------------------------------------------------------------
enum class Beyond {
    grid,     // the grid continues past the extremes (ExMy, fixed point)
    codebook  // nothing beyond the extremes: any input past them overflows
};

struct FormatModel {
    std::string name;
    unsigned total_bits = 8;
    std::vector<double> by_code;  // value of each code: finite, +-Inf or NaN
    bool signed_zero = true;      // +0 and -0 both exist
    Beyond beyond = Beyond::grid;
    double above_max = 0;     // grid: the next grid value above max
    double below_lowest = 0;  // grid: the next grid value below lowest

    struct Entry {
        double value;
        uint32_t code;
    };
    // Derived by finalize().
    std::vector<Entry> sorted;   // distinct finite values, ascending; zero once
    std::vector<double> values;  // sorted[i].value
    double max = 0, lowest = 0;
    uint32_t max_code = 0, lowest_code = 0;
    int64_t pos_zero_code = -1, neg_zero_code = -1, pos_inf_code = -1, neg_inf_code = -1;
    bool has_inf = false, has_nan = false;
    uint32_t nan_codes = 0;

    void finalize() {
        if (by_code.size() != (size_t{1} << total_bits)) throw std::logic_error(name + ": table size");
        sorted.clear();
        for (uint32_t c = 0; c < by_code.size(); ++c) {
            const double v = by_code[c];
            if (std::isnan(v)) {
                has_nan = true;
                ++nan_codes;
            } else if (std::isinf(v)) {
                has_inf = true;
                (v > 0 ? pos_inf_code : neg_inf_code) = c;
            } else if (v == 0) {
                (std::signbit(v) ? neg_zero_code : pos_zero_code) = c;
            } else {
                sorted.push_back({v, c});
            }
        }
        const int64_t zero_code = pos_zero_code >= 0 ? pos_zero_code : neg_zero_code;
        if (zero_code >= 0) sorted.push_back({0.0, static_cast<uint32_t>(zero_code)});
        std::sort(sorted.begin(), sorted.end(),
                  [](const Entry& a, const Entry& b) { return a.value < b.value; });
        for (size_t i = 1; i < sorted.size(); ++i)
            if (sorted[i].value == sorted[i - 1].value) throw std::logic_error(name + ": duplicate value");
        values.clear();
        for (const Entry& e : sorted) values.push_back(e.value);
        max = sorted.back().value;
        max_code = sorted.back().code;
        lowest = sorted.front().value;
        lowest_code = sorted.front().code;
    }

    double min_positive() const {
        for (double v : values)
            if (v > 0) return v;
        return 0;
    }
};

// Sign-magnitude floating point with IEEE 754 specials: exponent all ones is
// Inf (mantissa 0) or NaN; e == 0 is subnormal. value = (-1)^s * 2^(e-bias) * 1.m.
inline double ieee_style_value(uint32_t code, int E, int M, int bias) {
    const bool neg = (code >> (E + M)) & 1u;
    const uint32_t e = (code >> M) & ((1u << E) - 1u);
    const uint32_t m = code & ((1u << M) - 1u);
    double v;
    if (e == (1u << E) - 1u) {
        if (m != 0) return std::numeric_limits<double>::quiet_NaN();
        v = std::numeric_limits<double>::infinity();
    } else if (e == 0) {
        v = std::ldexp(static_cast<double>(m), 1 - bias - M);
    } else {
        v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -M), static_cast<int>(e) - bias);
    }
    return neg ? -v : v;
}

// Sign-magnitude floating point in which every code is a number (the OCP MX
// element formats): no Inf, no NaN, e == 0 subnormal, +0 and -0. value =
// (-1)^s * 2^(e-bias) * 1.m, or 2^(1-bias) * 0.m; past max (all ones) the grid
// continues with 2^(emax + 1).
inline FormatModel finite_sign_magnitude_model(const std::string& name, int E, int M, int bias) {
    FormatModel m;
    m.name = name;
    m.total_bits = static_cast<unsigned>(1 + E + M);
    for (uint32_t c = 0; c < (1u << m.total_bits); ++c) {
        const bool neg = (c >> (E + M)) & 1u;
        const uint32_t e = (c >> M) & ((1u << E) - 1u), mant = c & ((1u << M) - 1u);
        const double v =
            e == 0 ? std::ldexp(static_cast<double>(mant), 1 - bias - M)
                   : std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -M), static_cast<int>(e) - bias);
        m.by_code.push_back(neg ? -v : v);
    }
    m.above_max = std::ldexp(1.0, (1 << E) - 1 - bias + 1);
    m.below_lowest = -m.above_max;
    m.finalize();
    return m;
}

// Any binary float, written from the definitions ml_dtypes and Graphcore's
// gfloat (decode_float) give: E exponent and M mantissa bits, a bias, a sign
// bit or none, subnormals or none (then exponent field 0 is a binade of
// normal numbers but for the all-zero code, which is zero), and the special
// values of `specials`: "ieee" (top exponent: Inf at mantissa 0, else NaN),
// "fn" (NaN at the all-ones magnitude), "fnuz" (NaN at -0, no Inf), "p3109"
// (signed: NaN at -0, +-Inf at the all-ones magnitudes; unsigned: NaN at all
// ones, +Inf just below) or "none". The grid goes on past max with the step of
// max's binade, and below an unsigned format's 0 as the mirror of its first
// step.
inline FormatModel float_variant_model(const std::string& name, int E, int M, int bias,
                                       const std::string& specials, bool subnormals, bool has_sign) {
    FormatModel m;
    m.name = name;
    const unsigned mag_bits = static_cast<unsigned>(E + M);
    m.total_bits = mag_bits + (has_sign ? 1u : 0u);
    const uint32_t all_ones = (1u << mag_bits) - 1u;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    for (uint32_t c = 0; c < (1u << m.total_bits); ++c) {
        const bool neg = has_sign && ((c >> mag_bits) & 1u);
        const uint32_t mag = c & all_ones, e = mag >> M, f = mag & ((1u << M) - 1u);
        const double fraction = std::ldexp(static_cast<double>(f), -M);
        double v;
        if (e == 0 && (subnormals || f == 0)) v = fraction * std::ldexp(1.0, 1 - bias);
        else v = (1.0 + fraction) * std::ldexp(1.0, static_cast<int>(e) - bias);
        if (specials == "ieee" && e == (1u << E) - 1u) v = f == 0 ? inf : nan;
        if (specials == "fn" && mag == all_ones) v = nan;
        if ((specials == "fnuz" || specials == "p3109") && neg && mag == 0) v = nan;
        if (specials == "p3109" && has_sign && mag == all_ones) v = inf;
        if (specials == "p3109" && !has_sign && mag == all_ones) v = nan;
        if (specials == "p3109" && !has_sign && mag == all_ones - 1u) v = inf;
        m.by_code.push_back(neg ? -v : v);
    }
    m.signed_zero = has_sign && specials != "fnuz" && specials != "p3109";
    m.finalize();
    m.above_max = m.max + std::ldexp(1.0, std::ilogb(m.max) - M);
    m.below_lowest = has_sign ? -m.above_max : -m.min_positive();
    return m;
}

inline FormatModel make_model(const std::string& name) {
    FormatModel m;
    m.name = name;
    m.beyond = Beyond::grid;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    if (name == "e5m2" || name == "e3m4" || name == "fp16" || name == "bf16") {
        int E = 5, M = 2, bias = 15;
        if (name == "e3m4") E = 3, M = 4, bias = 3;
        if (name == "fp16") E = 5, M = 10, bias = 15;
        if (name == "bf16") E = 8, M = 7, bias = 127;
        m.total_bits = static_cast<unsigned>(1 + E + M);
        for (uint32_t c = 0; c < (1u << m.total_bits); ++c)
            m.by_code.push_back(ieee_style_value(c, E, M, bias));
        // Past max (all-ones mantissa at the top finite exponent) the grid
        // continues with 2^(emax + 1).
        const int emax = (1 << E) - 2 - bias;
        m.above_max = std::ldexp(1.0, emax + 1);
        m.below_lowest = -m.above_max;
    } else if (name == "e4m3") {
        // OCP E4M3FN: like IEEE but no Inf, and only S.1111.111 is NaN.
        for (uint32_t c = 0; c < 256; ++c) {
            const bool neg = c & 0x80u;
            const uint32_t e = (c >> 3) & 15u, mant = c & 7u;
            double v;
            if (e == 15 && mant == 7) v = nan;
            else if (e == 0) v = std::ldexp(static_cast<double>(mant), -9);
            else v = std::ldexp(8.0 + mant, static_cast<int>(e) - 7 - 3);
            m.by_code.push_back(neg && !std::isnan(v) ? -v : v);
        }
        m.above_max = 480;  // the would-be S.1111.111 value
        m.below_lowest = -480;
    } else if (name == "e1m6") {
        // P3109 binary8p7 signed extended: magnitudes k/64, k = 0..126;
        // 0x7F / 0xFF are +-Inf, 0x80 is NaN, 0x00 the one zero.
        for (uint32_t c = 0; c < 256; ++c) {
            const uint32_t k = c & 0x7Fu;
            const bool neg = c & 0x80u;
            double v;
            if (c == 0x80u) v = nan;
            else if (k == 0x7Fu) v = inf;
            else v = k / 64.0;
            m.by_code.push_back(neg ? -v : v);
        }
        m.signed_zero = false;
        m.above_max = 127.0 / 64;
        m.below_lowest = -127.0 / 64;
    } else if (name == "e7m0") {
        // P3109 binary8p1 signed extended: magnitude code c in 1..126 is
        // 2^(c - 64); 0 is zero, 0x7F / 0xFF are +-Inf, 0x80 is NaN.
        for (uint32_t c = 0; c < 256; ++c) {
            const uint32_t k = c & 0x7Fu;
            const bool neg = c & 0x80u;
            double v;
            if (c == 0x80u) v = nan;
            else if (k == 0x7Fu) v = inf;
            else if (k == 0) v = 0.0;
            else v = std::ldexp(1.0, static_cast<int>(k) - 64);
            m.by_code.push_back(neg ? -v : v);
        }
        m.signed_zero = false;
        m.above_max = std::ldexp(1.0, 63);
        m.below_lowest = -std::ldexp(1.0, 63);
    } else if (name == "fp4_e2m1" || name == "fp6_e2m3" || name == "fp6_e3m2") {
        // OCP MX v1.0 element formats (section 5.3).
        if (name == "fp4_e2m1") return finite_sign_magnitude_model(name, 2, 1, 1);
        if (name == "fp6_e2m3") return finite_sign_magnitude_model(name, 2, 3, 1);
        return finite_sign_magnitude_model(name, 3, 2, 3);
    } else if (name == "ue8m0") {
        // OCP MX v1.0 E8M0 (section 5.4.1): unsigned, code e is 2^(e - 127)
        // for e = 0..254, 0xFF is NaN; no zero, no Inf, nothing beyond.
        for (uint32_t c = 0; c < 256; ++c)
            m.by_code.push_back(c == 0xFF ? nan : std::ldexp(1.0, static_cast<int>(c) - 127));
        m.beyond = Beyond::codebook;
        m.signed_zero = false;
    } else if (name == "e0m7") {
        // Two's-complement Q0.7: int8 k, value k / 128.
        for (uint32_t c = 0; c < 256; ++c)
            m.by_code.push_back(static_cast<int8_t>(static_cast<uint8_t>(c)) / 128.0);
        m.signed_zero = false;
        m.above_max = 128.0 / 128;
        m.below_lowest = -129.0 / 128;
    } else {
        throw std::logic_error("no model for " + name);
    }
    m.finalize();
    return m;
}

// The cached model of a bundled format (not fp32: it is the identity).
inline const FormatModel& model(const std::string& name) {
    static std::vector<std::unique_ptr<FormatModel>> cache;
    for (const auto& p : cache)
        if (p->name == name) return *p;
    cache.push_back(std::make_unique<FormatModel>(make_model(name)));
    return *cache.back();
}

// -------------------------------------------------------------------------
// The reference quantizer.
// -------------------------------------------------------------------------
struct RefResult {
    float value = 0;
    int64_t code = -1;  // -1: a NaN (any NaN code)
    bool overflow = false;
    bool underflow = false;
    bool ambiguous = false;  // a tie between two codes of the same parity (codebooks only)
};

inline RefResult ref_quantize(const FormatModel& m, float x, altgrad_rounding rounding, altgrad_overflow ovf,
                              uint32_t random = 0) {
    RefResult r;
    const float fnan = std::numeric_limits<float>::quiet_NaN();
    if (std::isnan(x)) {
        r.value = fnan;
        return r;
    }
    auto overflowed = [&](bool positive, bool input_inf) {
        RefResult o;
        o.overflow = true;
        const bool nonfinite =
            ovf == ALTGRAD_OVERFLOW_NONFINITE && !(rounding == ALTGRAD_ROUND_TOWARD_ZERO && !input_inf);
        if (nonfinite && (positive ? m.pos_inf_code : m.neg_inf_code) >= 0) {
            o.value =
                positive ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
            o.code = positive ? m.pos_inf_code : m.neg_inf_code;
        } else if (nonfinite && m.has_nan) {
            o.value = fnan;
            o.code = -1;
        } else {
            o.value = static_cast<float>(positive ? m.max : m.lowest);
            o.code = positive ? m.max_code : m.lowest_code;
            o.underflow = !input_inf && o.value == 0;  // below an unsigned format's 0
        }
        return o;
    };
    if (std::isinf(x)) return overflowed(x > 0, true);

    struct Cand {
        double v;
        uint32_t code;
        bool beyond;
        uint32_t parity;
    };
    const double d = x;
    Cand t{}, a{};  // toward zero, away from zero
    bool exact = false;
    if (d > m.max || d < m.lowest) {
        const bool up = d > m.max;
        if (m.beyond == Beyond::codebook) return overflowed(up, false);
        if (up ? d >= m.above_max : d <= m.below_lowest) return overflowed(up, false);
        const uint32_t ec = up ? m.max_code : m.lowest_code;
        t = {up ? m.max : m.lowest, ec, false, ec & 1u};
        a = {up ? m.above_max : m.below_lowest, 0u, true, (ec & 1u) ^ 1u};
    } else {
        const size_t hi =
            static_cast<size_t>(std::upper_bound(m.values.begin(), m.values.end(), d) - m.values.begin());
        const FormatModel::Entry lo_e = m.sorted[hi - 1];
        if (lo_e.value == d) {
            exact = true;
            t = {lo_e.value, lo_e.code, false, lo_e.code & 1u};
        } else {
            const FormatModel::Entry hi_e = m.sorted[hi];
            const FormatModel::Entry te = d > 0 ? lo_e : hi_e;
            const FormatModel::Entry ae = d > 0 ? hi_e : lo_e;
            if ((d > 0 && te.value < 0) || (d < 0 && te.value > 0))
                throw std::logic_error(m.name + ": no zero between the neighbours");
            t = {te.value, te.code, false, te.code & 1u};
            a = {ae.value, ae.code, false, ae.code & 1u};
        }
    }
    bool away = false;
    if (!exact) {
        const double at = std::fabs(t.v), aa = std::fabs(a.v), ax = std::fabs(d);
        if (rounding == ALTGRAD_ROUND_NEAREST_EVEN) {
            const double mid = (at + aa) / 2;  // exact: adjacent values, within 53 bits
            if (ax != mid) {
                away = ax > mid;
            } else {
                if (t.parity == a.parity) r.ambiguous = true;
                away = t.parity != 0;
            }
        } else if (rounding == ALTGRAD_ROUND_STOCHASTIC) {
            const double f = (ax - at) / (aa - at);
            const uint64_t frac32 = static_cast<uint64_t>(std::floor(std::ldexp(f, 32)));
            away = frac32 + random >= (uint64_t{1} << 32);
        } else {
            away = false;
        }
    }
    const Cand& pick = away ? a : t;
    if (pick.beyond) {
        RefResult o = overflowed(d > 0, false);
        o.ambiguous = r.ambiguous;
        return o;
    }
    r.value = static_cast<float>(pick.v);
    r.code = pick.code;
    if (pick.v == 0) {
        r.underflow = d != 0;
        if (m.signed_zero && std::signbit(x)) {
            r.value = -0.0f;
            r.code = m.neg_zero_code;
        } else {
            r.value = 0.0f;
            r.code = m.pos_zero_code >= 0 ? m.pos_zero_code : m.neg_zero_code;
        }
    }
    return r;
}

// -------------------------------------------------------------------------
// Test inputs.
// -------------------------------------------------------------------------
inline void add_with_neighbours(std::vector<float>& out, double c) {
    if (!(std::fabs(c) <= FLT_MAX)) return;
    const float f = static_cast<float>(c);
    if (static_cast<double>(f) != c) return;  // only points that are exactly floats
    out.push_back(f);
    out.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
    out.push_back(std::nextafter(f, -std::numeric_limits<float>::infinity()));
}

// Every representable value, every midpoint between neighbours (the grid's
// notional values past the extremes included), each with the floats just
// above and below; both signs; values at and beyond max (2*max, FLT_MAX);
// the subnormal boundary; +-0, NaN, +-Inf.
inline std::vector<float> edge_points(const FormatModel& m) {
    std::vector<double> pts(m.values.begin(), m.values.end());
    std::vector<double> line(m.values.begin(), m.values.end());
    if (m.beyond == Beyond::grid) {
        line.insert(line.begin(), m.below_lowest);
        line.push_back(m.above_max);
        pts.push_back(m.above_max);
        pts.push_back(m.below_lowest);
        pts.push_back((m.above_max + (m.above_max - m.max)));
    }
    for (size_t i = 1; i < line.size(); ++i) {
        pts.push_back((line[i - 1] + line[i]) / 2);
        pts.push_back(line[i - 1] + (line[i] - line[i - 1]) / 8);
        pts.push_back(line[i - 1] + 3 * (line[i] - line[i - 1]) / 4);
    }
    pts.push_back(2 * m.max);
    pts.push_back(2 * m.lowest);
    pts.push_back(1.5 * m.max);
    pts.push_back(m.max * (1 + 1.0 / 1024));
    pts.push_back(m.min_positive() / 2);
    pts.push_back(m.min_positive() / 4);
    pts.push_back(m.min_positive() * 0.75);
    std::vector<float> out;
    for (double p : pts) {
        add_with_neighbours(out, p);
        add_with_neighbours(out, -p);
    }
    const float inf = std::numeric_limits<float>::infinity();
    for (float f :
         {0.0f, -0.0f, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, std::numeric_limits<float>::denorm_min(),
          -std::numeric_limits<float>::denorm_min(), inf, -inf, std::numeric_limits<float>::quiet_NaN(),
          -std::numeric_limits<float>::quiet_NaN(), bfloat(0x7F800001u) /* signalling */,
          static_cast<float>(2 * m.max > FLT_MAX ? FLT_MAX : 2 * m.max)})
        out.push_back(f);
    // Drop duplicates (by bits) to keep the big formats quick.
    std::vector<uint32_t> b;
    b.reserve(out.size());
    for (float f : out) b.push_back(fbits(f));
    std::sort(b.begin(), b.end());
    b.erase(std::unique(b.begin(), b.end()), b.end());
    out.clear();
    for (uint32_t u : b) out.push_back(bfloat(u));
    return out;
}

// n random floats spread evenly over the binades from a few below the
// smallest positive value to a few above max, random signs and mantissas;
// every 16th is a uniformly random bit pattern (NaN, Inf, anything).
inline std::vector<float> random_points(const FormatModel& m, size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const int lo = std::max(-149, static_cast<int>(std::floor(std::log2(m.min_positive()))) - 4);
    const int hi = std::min(127, static_cast<int>(std::ceil(std::log2(m.max))) + 3);
    std::uniform_int_distribution<int> exp_dist(lo, hi);
    std::vector<float> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        const uint64_t r = rng();
        if (i % 16 == 15) {
            out.push_back(bfloat(static_cast<uint32_t>(r)));
            continue;
        }
        const int e = exp_dist(rng);
        const uint32_t mant = static_cast<uint32_t>(r) & 0x7FFFFFu;
        const uint32_t sign = static_cast<uint32_t>(r >> 32) & 0x80000000u;
        float x;
        if (e >= -126) x = bfloat(sign | (static_cast<uint32_t>(e + 127) << 23) | mant);
        else x = std::ldexp(1.0f + std::ldexp(static_cast<float>(mant), -23), e) * (sign ? -1.0f : 1.0f);
        out.push_back(x);
    }
    return out;
}

inline const char* rounding_name(altgrad_rounding r) {
    switch (r) {
        case ALTGRAD_ROUND_NEAREST_EVEN: return "nearest-even";
        case ALTGRAD_ROUND_STOCHASTIC: return "stochastic";
        case ALTGRAD_ROUND_TOWARD_ZERO: return "toward-zero";
    }
    return "?";
}

inline const char* overflow_name(altgrad_overflow o) {
    return o == ALTGRAD_OVERFLOW_SATURATE ? "saturate" : "nonfinite";
}

}  // namespace agtest
