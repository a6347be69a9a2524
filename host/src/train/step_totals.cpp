#include "train/step_totals.hpp"

#include <cmath>

#include "train/quant_plan.hpp"
#include "util/error.hpp"

namespace altgrad::host::train {

namespace {

// The larger amax, a NaN winning (as block_scale_stats and abs().max() have it).
double larger_amax(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

constexpr size_t kPackedPerSite = 13;

}  // namespace

void step_totals::site_total::add(const site_total& later) {
    if (!later.seen) return;
    if (!seen) {
        *this = later;
        return;
    }
    amax = larger_amax(amax, later.amax);
    overflow += later.overflow;
    underflow += later.underflow;
    count += later.count;
    blocks.add(later.blocks);
}

step_totals::step_totals(const quant_plan& plan) : totals_(plan.sites.size()) {
    start_.reserve(plan.sites.size());
    for (const quant_site& s : plan.sites) start_.push_back(s.scaling);
}

void step_totals::begin_micro_batch(quant_plan& plan) const {
    for (size_t k = 0; k < start_.size(); ++k) plan.sites[k].scaling = start_[k];
}

void step_totals::add_micro_batch(const quant_plan& plan) {
    for (size_t k = 0; k < totals_.size(); ++k) {
        const quant_site& s = plan.sites[k];
        if (!s.format) continue;  // stays float32: nothing recorded
        site_total t;
        t.seen = true;
        t.amax = s.amax;
        t.scale = s.scale;
        t.overflow = s.overflow_count;
        t.underflow = s.underflow_count;
        t.count = s.count;
        t.blocks = s.block_stats;
        totals_[k].add(t);
    }
}

void step_totals::add(const step_totals& later) {
    if (later.totals_.size() != totals_.size())
        throw error("step totals: " + std::to_string(later.totals_.size()) + " sites added to " +
                    std::to_string(totals_.size()));
    for (size_t k = 0; k < totals_.size(); ++k) totals_[k].add(later.totals_[k]);
}

void step_totals::finish(quant_plan& plan) const {
    for (size_t k = 0; k < totals_.size(); ++k) {
        const site_total& t = totals_[k];
        if (!t.seen) continue;
        quant_site& s = plan.sites[k];
        s.amax = t.amax;
        s.scale = t.scale;
        s.overflow_count = t.overflow;
        s.underflow_count = t.underflow;
        s.count = t.count;
        s.block_stats = t.blocks;
        if (s.block_scaled()) continue;  // one scale per block: no history
        // As one use would leave it: the scale it used, the amax recorded once.
        s.scaling = start_[k];
        const std::deque<double>& history = start_[k].amax_history();
        s.scaling.restore(t.scale, std::vector<double>(history.begin(), history.end()));
        s.scaling.record(t.amax);
    }
}

std::vector<double> step_totals::packed() const {
    std::vector<double> out;
    out.reserve(totals_.size() * kPackedPerSite);
    for (const site_total& t : totals_) {
        const quant::block_scale_stats& b = t.blocks;
        out.insert(out.end(), {t.seen ? 1.0 : 0.0, t.amax, static_cast<double>(t.scale),
                               static_cast<double>(t.overflow), static_cast<double>(t.underflow),
                               static_cast<double>(t.count), static_cast<double>(b.blocks),
                               static_cast<double>(b.saturated), static_cast<double>(b.underflowed),
                               static_cast<double>(b.neutral), b.amax, b.smallest_scale, b.largest_scale});
    }
    return out;
}

void step_totals::fold_ranks(const std::vector<std::vector<double>>& packed_by_rank) {
    totals_.assign(totals_.size(), site_total{});
    for (const std::vector<double>& rank : packed_by_rank) add_packed(rank);
}

void step_totals::add_packed(const std::vector<double>& later) {
    if (later.size() != totals_.size() * kPackedPerSite)
        throw error("step totals: " + std::to_string(later.size()) + " packed values for " +
                    std::to_string(totals_.size()) + " sites");
    const auto count = [](double v) { return static_cast<uint64_t>(v); };
    for (size_t k = 0; k < totals_.size(); ++k) {
        const double* p = later.data() + k * kPackedPerSite;
        site_total t;
        t.seen = p[0] != 0;
        t.amax = p[1];
        t.scale = static_cast<float>(p[2]);
        t.overflow = count(p[3]), t.underflow = count(p[4]), t.count = count(p[5]);
        t.blocks.blocks = count(p[6]), t.blocks.saturated = count(p[7]);
        t.blocks.underflowed = count(p[8]), t.blocks.neutral = count(p[9]);
        t.blocks.amax = p[10], t.blocks.smallest_scale = p[11], t.blocks.largest_scale = p[12];
        totals_[k].add(t);
    }
}

}  // namespace altgrad::host::train
