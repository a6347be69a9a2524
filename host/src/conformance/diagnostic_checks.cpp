// The checks of diagnostic plugins only: measure.* (non-finite and empty
// tensors, block-scaled views, the names, indices and number of the values).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "conformance/checks.hpp"

namespace altgrad::host::conformance {

namespace {

bool good_name(const std::string& n) {
    if (n.empty()) return false;
    for (char c : n)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
    return true;
}

}  // namespace

result check_measure_nonfinite(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<diagnostic_handle> d = diagnostic_handle::create(e.plugin, {}, "conformance");
    for (uint64_t step = 0; step < 4; ++step) {
        tensor_set s = make_tensors(e, *d, 257, true);
        if (step == 3)  // all of one kind
            for (size_t k = 0; k < s.data.size(); ++k)
                std::fill(s.data[k].begin(), s.data[k].end(), k % 2 ? INFINITY : NAN);
        try {
            measure(*d, step, s.views);
        } catch (const std::exception& x) {
            return fail(
                std::string("measure failed: ") + x.what(),
                std::to_string(s.views.size()) + " tensors of 257 elements, " +
                    (step == 3 ? "every element NaN or every element Inf" : "about 10% NaN and 10% +-Inf"),
                "NaN and Inf elements must be handled: skip them or answer NaN, never an error");
        }
    }
    return pass("tensors with NaN and +-Inf elements (some, and all) measure without error");
}

result check_measure_empty(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<diagnostic_handle> d = diagnostic_handle::create(e.plugin, {}, "conformance");
    try {
        tensor_set s = make_tensors(e, *d, 0);
        measure(*d, 0, s.views);
        tensor_set t = make_tensors(e, *d, 16);
        tensor_set z = make_tensors(e, *d, 0);
        measure(*d, 1, t.views);
        measure(*d, 2, z.views);  // after a non-empty call, with state to compare against
        measure(*d, 3, {});
    } catch (const std::exception& x) {
        return fail(
            std::string("measure failed: ") + x.what(),
            "tensors of count 0 (data NULL), also after a call with 16 elements, and a call with no tensors",
            "empty tensors (count 0) must be handled: answer NaN or nothing, never an error");
    }
    return pass("count-0 tensors and a call with no tensors measure without error");
}

// ABI 1.2 views: a tensor whose blocks all have scale s is the same tensor as
// one scaled per tensor by s, so a diagnostic must answer the same for both.
// One that reads `scale` only sees scale 1 in the block-scaled view and
// answers differently (unless its answer does not depend on the scale).
result check_measure_block_scales(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const altgrad_version abi = e.plugin->entry->abi_version;
    if (abi.major == 1 && abi.minor < 2)
        return skip("built for ABI " + version_string(abi, false) + ": its views end before block scales");
    if (!e.format->takes_block_scales())
        return skip("the reference format is built before ABI 1.2 block scales");
    constexpr int64_t kRows = 8, kCols = 12;
    constexpr size_t kBlock = 5;    // three blocks per row, the last of 2
    constexpr float kScale = 3.0f;  // not a power of two: it moves the grid
    const std::vector<float> scales(kRows * ((kCols + kBlock - 1) / kBlock), kScale);
    const std::shared_ptr<diagnostic_handle> probe = diagnostic_handle::create(e.plugin, {}, "conformance");
    tensor_set s = make_tensors(e, *probe, kRows * kCols);
    std::vector<altgrad_tensor_view> per_tensor = s.views, blocked = s.views;
    for (size_t k = 0; k < s.views.size(); ++k) {
        if (s.views[k].role == ALTGRAD_TENSOR_ATTENTION_PROBS) continue;  // never block-scaled by the host
        for (altgrad_tensor_view* v : {&per_tensor[k], &blocked[k]}) {
            v->ndim = 2;
            v->shape[0] = kRows;
            v->shape[1] = kCols;
        }
        per_tensor[k].scale = kScale;
        blocked[k].block_scales = scales.data();
        blocked[k].block_size = kBlock;
        blocked[k].block_count = scales.size();
    }
    const std::string input =
        std::to_string(s.views.size()) +
        " tensors [8, 12] with random magnitudes: at scale 3, "
        "and with blocks of 5 along the rows (the last of 2) all of scale 3 and scale 1";
    std::vector<diagnostic_value> a, b;
    try {
        a = measure(*diagnostic_handle::create(e.plugin, {}, "conformance"), 0, per_tensor);
        b = measure(*diagnostic_handle::create(e.plugin, {}, "conformance"), 0, blocked);
    } catch (const std::exception& x) {
        return fail(std::string("measure failed: ") + x.what(), input,
                    "a view with block scales (abi/tensor.h) must be measured like any other");
    }
    if (!same_values(a, b))
        return fail(
            "the block-scaled view answered " + values_text(b) + ", the per-tensor one " + values_text(a),
            input,
            "read each element's scale with altgrad::sdk::scale_at (or quantize_like / quantize_gathered), "
            "not the view's `scale`, which is 1 when block_scales is set");
    return pass("blocks all of scale 3 answer as one scale of 3 (" + std::to_string(a.size()) + " values)");
}

result check_measure_names(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<diagnostic_handle> d = diagnostic_handle::create(e.plugin, {}, "conformance");
    const size_t per = d->max_values_per_tensor();
    size_t total = 0, calls = 0;
    std::vector<std::pair<std::string, tensor_set>> inputs;
    for (size_t k = 0; k < 6; ++k)
        inputs.emplace_back(
            std::to_string(k % 3 == 2 ? 0 : 100) + " elements" + (k % 2 ? ", NaN and Inf" : ""),
            make_tensors(e, *d, k % 3 == 2 ? 0 : 100, k % 2 == 1));
    for (auto& [text, s] : inputs) {
        const size_t n = s.views.size();
        std::vector<diagnostic_value> vals;
        try {
            vals = measure(*d, calls, s.views);
        } catch (const std::exception& x) {
            return fail(
                std::string("measure failed: ") + x.what(), std::to_string(n) + " tensors of " + text,
                "names are [a-z0-9_.]+, tensor_index < tensor_count or ALTGRAD_ALL_TENSORS, and at most "
                "max_values_per_tensor * (tensor_count + 1) values");
        }
        ++calls;
        if (vals.size() > per * (n + 1))
            return fail(std::to_string(vals.size()) + " values exceed max_values_per_tensor " +
                            std::to_string(per) + " x (" + std::to_string(n) + " + 1)",
                        std::to_string(n) + " tensors of " + text,
                        "raise max_values_per_tensor or write fewer");
        for (const diagnostic_value& v : vals) {
            if (!good_name(v.name))
                return fail("value name '" + v.name + "' is not [a-z0-9_.]+",
                            std::to_string(n) + " tensors of " + text,
                            "use lower-case letters, digits, '_' and '.' only");
            if (v.tensor_index != ALTGRAD_ALL_TENSORS && v.tensor_index >= n)
                return fail("value '" + v.name + "' names tensor " + std::to_string(v.tensor_index) + " of " +
                                std::to_string(n),
                            std::to_string(n) + " tensors of " + text,
                            "tensor_index is an index into this call's tensors, or ALTGRAD_ALL_TENSORS");
        }
        total += vals.size();
    }
    return pass(std::to_string(total) + " values from " + std::to_string(calls) +
                " calls have valid names and indices, within max_values_per_tensor " + std::to_string(per) +
                " x (n + 1)");
}

}  // namespace altgrad::host::conformance
