// What one step's micro-batches leave in the quantization plan's sites.
//
// A step of A micro-batches (training.grad_accum; in a distributed run,
// every rank's share, numbered across the ranks) quantizes each site once per
// micro-batch, each time from the scaling state the step began with, as A
// ranks holding the same state would. The step then keeps one record per
// site, whatever A and however the micro-batches were spread over ranks:
//   amax       the largest of the micro-batches' (a NaN wins), recorded once
//              into the delayed-scaling history (TransformerEngine's amax
//              reduction across ranks)
//   counts     overflow, underflow and element counts summed; block
//              statistics combined (quant::block_scale_stats::add)
//   scale      micro-batch 0's (the one scale of delayed scaling; current
//              scaling's differ per micro-batch)
// With A = 1 the record is the micro-batch's own, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/block_scales.hpp"
#include "quant/scaling.hpp"

namespace altgrad::host::train {

struct quant_plan;

class step_totals {
public:
    // Takes each site's scaling state as the step begins.
    explicit step_totals(const quant_plan& plan);

    // Before each micro-batch: every site's scaling state back to the step's start.
    void begin_micro_batch(quant_plan& plan) const;
    // After each micro-batch: its sites' statistics folded in, in micro-batch order.
    void add_micro_batch(const quant_plan& plan);
    // Another share of the same step's micro-batches (a later rank's), folded in after these.
    void add(const step_totals& later);
    // The step's record into every site: statistics, scale, and the amax history.
    void finish(quant_plan& plan) const;

    // The totals as doubles, to exchange between ranks (counts are exact below
    // 2^53), and back: fold_ranks makes these totals every rank's packed
    // totals folded in rank order (as add() folds), this rank's among them.
    std::vector<double> packed() const;
    void fold_ranks(const std::vector<std::vector<double>>& packed_by_rank);

private:
    struct site_total {
        bool seen = false;  // quantized in some micro-batch
        double amax = 0;
        float scale = 1;
        uint64_t overflow = 0, underflow = 0, count = 0;
        quant::block_scale_stats blocks;
        void add(const site_total& later);
    };
    void add_packed(const std::vector<double>& later);

    std::vector<quant::scaling_state> start_;
    std::vector<site_total> totals_;
};

}  // namespace altgrad::host::train
