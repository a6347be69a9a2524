#include "report/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace altgrad::host::report {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The continued fraction of I_x(a, b) (Numerical Recipes' betacf, modified Lentz).
double beta_fraction(double a, double b, double x) {
    constexpr double tiny = 1e-300;
    const double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (std::fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 10000; ++m) {
        const double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (std::fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (std::fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1 / d;
        const double del = d * c;
        h *= del;
        if (std::fabs(del - 1) < 1e-16) break;
    }
    return h;
}

// ln B(a, b). For Student's t with many degrees of freedom, B(1/2, b) with b
// large: lgamma(b) - lgamma(b + 1/2) would cancel away most digits, so
// ln(Gamma(b + 1/2) / Gamma(b)) comes from its asymptotic series instead
// (0.5 ln b - 1/(8b) + 1/(192 b^3), the next terms below 1e-20 for b >= 1e4).
double log_beta(double a, double b) {
    const double big = std::max(a, b);
    if (std::min(a, b) == 0.5 && big >= 1e4)
        return std::lgamma(0.5) - (0.5 * std::log(big) - 1 / (8 * big) + 1 / (192 * big * big * big));
    return std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b);
}

double normal_cdf(double t) { return 0.5 * std::erfc(-t / std::sqrt(2.0)); }

// The x in [lo, hi] where an increasing f(x) crosses p, to the last bit.
template <class F>
double bisect(F f, double p, double lo, double hi) {
    for (int i = 0; i < 2000; ++i) {
        const double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        (f(mid) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

}  // namespace

double regularized_beta(double a, double b, double x) {
    if (!(a > 0 && b > 0 && x >= 0 && x <= 1)) return kNaN;
    if (x == 0 || x == 1) return x;
    const double front = std::exp(a * std::log(x) + b * std::log1p(-x) - log_beta(a, b));
    // The fraction converges fast below the mean; above it, use I_x(a,b) = 1 - I_{1-x}(b,a).
    if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
    return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

double inverse_regularized_beta(double a, double b, double p) {
    if (!(p >= 0 && p <= 1)) return kNaN;
    return bisect([&](double x) { return regularized_beta(a, b, x); }, p, 0.0, 1.0);
}

double student_t_cdf(double t, double df) {
    if (std::isnan(t) || !(df > 0)) return kNaN;
    if (std::isinf(df)) return normal_cdf(t);
    if (std::isinf(t)) return t > 0 ? 1 : 0;
    // P(|T| > |t|) = I_x(df/2, 1/2) with x = df/(df+t^2), = 1 - I_y(1/2, df/2)
    // with y = t^2/(df+t^2): the second where x is near 1, so y keeps its bits.
    const double x = df / (df + t * t), y = t * t / (df + t * t);
    const double two_tails =
        x <= 0.5 ? regularized_beta(df / 2, 0.5, x) : 1 - regularized_beta(0.5, df / 2, y);
    return t > 0 ? 1 - 0.5 * two_tails : 0.5 * two_tails;
}

double student_t_quantile(double p, double df) {
    if (!(p > 0 && p < 1) || !(df > 0)) return kNaN;
    if (p == 0.5) return 0;
    const auto cdf = [df](double t) { return student_t_cdf(t, df); };
    double hi = 1;
    while (cdf(hi) < p && hi < 1e300) hi *= 2;
    double lo = -1;
    while (cdf(lo) > p && lo > -1e300) lo *= 2;
    return bisect(cdf, p, lo, hi);
}

sample_summary summarize(const std::vector<double>& x) {
    sample_summary s;
    s.n = x.size();
    if (s.n == 0) {
        s.mean = s.sd = s.ci_low = s.ci_high = kNaN;
        return s;
    }
    double sum = 0;
    for (double v : x) sum += v;
    s.mean = sum / static_cast<double>(s.n);
    if (s.n < 2) {
        s.sd = s.ci_low = s.ci_high = kNaN;
        return s;
    }
    double ss = 0;
    for (double v : x) ss += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(ss / static_cast<double>(s.n - 1));
    const double half =
        student_t_quantile(0.975, static_cast<double>(s.n - 1)) * s.sd / std::sqrt(static_cast<double>(s.n));
    s.ci_low = s.mean - half;
    s.ci_high = s.mean + half;
    return s;
}

welch_result welch_test(const std::vector<double>& a, const std::vector<double>& b) {
    const sample_summary sa = summarize(a), sb = summarize(b);
    welch_result w;
    w.difference = sa.mean - sb.mean;
    w.t = w.df = w.p = w.ci_low = w.ci_high = kNaN;
    if (sa.n < 2 || sb.n < 2) return w;
    const double va = sa.sd * sa.sd / static_cast<double>(sa.n),
                 vb = sb.sd * sb.sd / static_cast<double>(sb.n);
    if (va + vb == 0) return w;
    w.t = w.difference / std::sqrt(va + vb);
    w.df = (va + vb) * (va + vb) /
           (va * va / static_cast<double>(sa.n - 1) + vb * vb / static_cast<double>(sb.n - 1));
    w.p = 2 * student_t_cdf(-std::fabs(w.t), w.df);
    const double half = student_t_quantile(0.975, w.df) * std::sqrt(va + vb);
    w.ci_low = w.difference - half;
    w.ci_high = w.difference + half;
    return w;
}

paired_result paired_test(const std::vector<double>& differences) {
    paired_result r;
    r.d = summarize(differences);
    r.t = r.p = kNaN;
    if (r.d.n < 2 || r.d.sd == 0) return r;
    r.t = r.d.mean / (r.d.sd / std::sqrt(static_cast<double>(r.d.n)));
    r.p = 2 * student_t_cdf(-std::fabs(r.t), static_cast<double>(r.d.n - 1));
    return r;
}

rate_interval clopper_pearson(size_t k, size_t n) {
    rate_interval r;
    if (n == 0 || k > n) return {kNaN, kNaN};
    const double kk = static_cast<double>(k), nn = static_cast<double>(n);
    if (k > 0) r.low = inverse_regularized_beta(kk, nn - kk + 1, 0.025);
    if (k < n) r.high = inverse_regularized_beta(kk + 1, nn - kk, 0.975);
    return r;
}

}  // namespace altgrad::host::report
