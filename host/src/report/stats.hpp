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
// Welch-Satterthwaite degrees of freedom, the two-sided p-value and the 95%
// interval of the difference (difference ± t(0.975, df) se). t, df, p and the
// interval are NaN when either sample has fewer than 2 values or both have no spread.
struct welch_result {
    double difference = 0, t = 0, df = 0, p = 0, ci_low = 0, ci_high = 0;
};
welch_result welch_test(const std::vector<double>& a, const std::vector<double>& b);

// The paired t-test of differences d_i = a_i - b_i between runs that share a
// seed (the same initial weights, batches and rounding draws, so the seed's
// own effect cancels): n pairs, their mean, sd and 95% interval (summarize),
// t = mean / (sd / sqrt(n)) with n - 1 degrees of freedom and the two-sided
// p-value. t and p are NaN with fewer than 2 pairs or no spread.
struct paired_result {
    sample_summary d;
    double t = 0, p = 0;
};
paired_result paired_test(const std::vector<double>& differences);

// The exact (Clopper-Pearson) 95% interval of a rate observed as k of n (n > 0).
struct rate_interval {
    double low = 0, high = 1;
};
rate_interval clopper_pearson(size_t k, size_t n);

}  // namespace altgrad::host::report
