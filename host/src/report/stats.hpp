// The statistics of a report: Student's t distribution (for confidence
// intervals and Welch's test) and the Clopper-Pearson interval of a rate, all
// from the regularised incomplete beta function, computed to double
// precision rather than looked up in a table.
#pragma once

#include <cstddef>
#include <vector>

namespace altgrad::host::report {

// I_x(a, b), a, b > 0, x in [0, 1] (Lentz's continued fraction).
double regularized_beta(double a, double b, double x);
// The x in [0, 1] with I_x(a, b) = p (bisection: I is increasing in x).
double inverse_regularized_beta(double a, double b, double p);

// P(T <= t) for Student's t with `df` > 0 degrees of freedom (df = infinity: the normal).
double student_t_cdf(double t, double df);
// The t with P(T <= t) = p, p in (0, 1).
double student_t_quantile(double p, double df);

// Mean, sample standard deviation and the 95% confidence interval of the
// mean (mean ± t(0.975, n-1) sd / sqrt(n)). With n < 2 sd and the interval are NaN.
struct sample_summary {
    size_t n = 0;
    double mean = 0, sd = 0, ci_low = 0, ci_high = 0;
};
sample_summary summarize(const std::vector<double>& x);

// Welch's t-test of mean(a) - mean(b) (unequal variances): t, the
// Welch-Satterthwaite degrees of freedom and the two-sided p-value. NaN
// when either sample has fewer than 2 values or both have no spread.
struct welch_result {
    double difference = 0, t = 0, df = 0, p = 0;
};
welch_result welch_test(const std::vector<double>& a, const std::vector<double>& b);

// The exact (Clopper-Pearson) 95% interval of a rate observed as k of n (n > 0).
struct rate_interval {
    double low = 0, high = 1;
};
rate_interval clopper_pearson(size_t k, size_t n);

}  // namespace altgrad::host::report
