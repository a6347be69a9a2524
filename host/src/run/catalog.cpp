#include "run/catalog.hpp"

#include <algorithm>
#include <cmath>

#include "util/error.hpp"

namespace altgrad::host::run {

const name_table<metric_record>& metric_record_names() {
    static const name_table<metric_record> t{{metric_record::train, "train"},
                                             {metric_record::val, "val"},
                                             {metric_record::tensor, "tensor"},
                                             {metric_record::diagnostic, "diagnostic"},
                                             {metric_record::summary, "summary"}};
    return t;
}

const name_table<metric_scope>& metric_scope_names() {
    static const name_table<metric_scope> t{
        {metric_scope::step, "step"}, {metric_scope::tensor, "tensor"}, {metric_scope::run, "run"}};
    return t;
}

const name_table<metric_type>& metric_type_names() {
    static const name_table<metric_type> t{{metric_type::number, "number"}, {metric_type::count, "count"}};
    return t;
}

const name_table<tensor_summary>& tensor_summary_names() {
    static const name_table<tensor_summary> t{{tensor_summary::none, "none"},
                                              {tensor_summary::count_weighted_mean, "count_weighted_mean"},
                                              {tensor_summary::mean, "mean"},
                                              {tensor_summary::max, "max"},
                                              {tensor_summary::min, "min"}};
    return t;
}

namespace {

// The entries of host_metrics(), one line of arguments each.
metric step(std::string name, std::string unit, std::string title, std::string series = "",
            std::string label = "") {
    metric m;
    m.name = std::move(name);
    m.record = metric_record::train;
    m.unit = std::move(unit);
    m.title = std::move(title);
    m.series = std::move(series);
    m.label = std::move(label);
    m.required = true;
    return m;
}

metric of_tensor(std::string name, metric_type type, std::string unit, std::string title, bool required) {
    metric m;
    m.name = std::move(name);
    m.record = metric_record::tensor;
    m.scope = metric_scope::tensor;
    m.type = type;
    m.unit = std::move(unit);
    m.title = std::move(title);
    m.required = required;
    return m;
}

metric of_run(std::string name, std::string unit, std::string title) {
    metric m;
    m.name = std::move(name);
    m.record = metric_record::summary;
    m.scope = metric_scope::run;
    m.unit = std::move(unit);
    m.title = std::move(title);
    m.required = true;
    return m;
}

metric timed(metric m) {
    m.timing = true;
    return m;
}

// A metric hosts before it did not write.
metric not_required(metric m) {
    m.required = false;
    return m;
}

// A series of the report drawn from a stored metric `of` (of `record`),
// with a figure of its own.
metric series_of(metric_record record, std::string of, tensor_summary summary, std::string series,
                 std::string title, std::string label) {
    metric m;
    m.name = series;
    m.record = record;
    m.unit = "fraction";
    m.title = std::move(title);
    m.series = std::move(series);
    m.label = std::move(label);
    m.summary = summary;
    m.summary_of = std::move(of);
    return m;
}

std::vector<metric> make_host_metrics() {
    using T = metric_type;
    using R = metric_record;
    metric val =
        step("val_loss", "nats/token", "Validation loss (mean over the evaluation batches)", "val_loss");
    val.record = R::val;
    return {
        step("loss", "nats/token", "Training loss (the step's batch)", "train_loss"),
        val,
        step("lr", "", "Learning rate of the step"),
        step("grad_norm", "", "Global norm of the parameter gradients, before clipping"),
        timed(step("tokens_per_s", "tokens/s", "Training throughput of the step")),
        step("grad_sparsity", "fraction",
             "Fraction of the parameter-gradient elements with |g| <= failure.near_zero"),
        step("overflow_rate", "fraction",
             "The largest overflow rate of any quantized tensor at its last use"),
        step("underflow_rate", "fraction",
             "The largest underflow rate of any quantized tensor at its last use"),
        of_tensor("scale", T::number, "",
                  "Per-tensor scale s at the last use (q(x*s)/s); null when block-scaled", true),
        of_tensor("amax", T::number, "", "Largest magnitude of the tensor at its last use", true),
        of_tensor("overflow", T::count, "elements", "Elements beyond the format's range at the last use",
                  true),
        of_tensor("underflow", T::count, "elements", "Non-zero elements flushed to zero at the last use",
                  true),
        of_tensor("count", T::count, "elements",
                  "Elements quantized at the last use (both copies when twice)", true),
        of_tensor("bit_stall_rate", T::number, "fraction",
                  "Fraction of the weight's elements whose quantized value did not change since the last "
                  "measurement (weights, at measurements)",
                  false),
        of_tensor("blocks.blocks", T::count, "blocks",
                  "Blocks with a scale of their own (block-scaled tensors)", false),
        of_tensor("blocks.saturated", T::count, "blocks",
                  "Blocks whose scale was clamped at the scale format's largest value (their elements clip)",
                  false),
        of_tensor("blocks.underflowed", T::count, "blocks",
                  "Blocks whose scale was clamped at the scale format's smallest value", false),
        of_tensor("blocks.neutral", T::count, "blocks", "Blocks with amax 0 or not finite (scale 1)", false),
        of_tensor("blocks.smallest_scale", T::number, "", "Smallest decode scale 1/s of the other blocks",
                  false),
        of_tensor("blocks.largest_scale", T::number, "", "Largest decode scale 1/s of the other blocks",
                  false),
        // The series the report draws, in its order. bit_stall is also the
        // step metric the failure detector judges (the trainer's train line
        // carries it at measurements).
        series_of(R::tensor, "bit_stall_rate", tensor_summary::count_weighted_mean, "bit_stall",
                  "Bit-stall rate (fraction of weight elements unchanged since the last measurement)",
                  "bit-stall rate"),
        series_of(R::train, "overflow_rate", tensor_summary::none, "overflow",
                  "Overflow rate (the largest of any quantized tensor)", "overflow rate"),
        series_of(R::train, "underflow_rate", tensor_summary::none, "underflow",
                  "Underflow rate (the largest of any quantized tensor)", "underflow rate"),
        series_of(R::train, "grad_sparsity", tensor_summary::none, "grad_sparsity",
                  "Gradient sparsity (fraction of gradient elements near zero)", "gradient sparsity"),
        of_run("final_train_loss", "nats/token", "Training loss of the last step"),
        of_run("final_val_loss", "nats/token", "Validation loss of the last evaluation"),
        of_run("best_val_loss", "nats/token", "Lowest validation loss of the run"),
        timed(of_run("seconds", "s", "Wall-clock time of the run, across resumes")),
        not_required(timed(
            of_run("cpu_seconds", "s", "User and system CPU time of the run, all threads, across resumes"))),
    };
}

}  // namespace

const std::vector<metric>& host_metrics() {
    static const std::vector<metric> metrics = make_host_metrics();
    return metrics;
}

const metric_catalog& host_catalog() {
    static const metric_catalog catalog;
    return catalog;
}

void metric_catalog::add(const metric& m) {
    for (const metric& o : metrics_) {
        if (!m.series.empty() && m.series == o.series)
            throw error("metric '" + m.name + "' of " + m.source + ": its series '" + m.series +
                        "' is taken by '" + o.name + "' of " + o.source);
        if (!m.derived() && !o.derived() && o.record == m.record && o.source == m.source && o.name == m.name)
            throw error("metric '" + m.name + "' of " + m.source + " is described twice");
    }
    metrics_.push_back(m);
}

std::vector<const metric*> metric_catalog::of_record(metric_record record) const {
    std::vector<const metric*> out;
    for (const metric& m : metrics_)
        if (m.record == record && !m.derived()) out.push_back(&m);
    return out;
}

const metric* metric_catalog::stored(metric_record record, std::string_view name) const {
    for (const metric* m : of_record(record))
        if (m->name == name) return m;
    return nullptr;
}

const metric* metric_catalog::series(std::string_view name) const {
    for (const metric& m : metrics_)
        if (m.series == name) return &m;
    return nullptr;
}

void metric_values::set(std::string_view name, double value) {
    for (auto& [n, v] : values_)
        if (n == name) {
            v = value;
            return;
        }
    values_.emplace_back(std::string(name), value);
}

std::optional<double> metric_values::find(std::string_view name) const {
    for (const auto& [n, v] : values_)
        if (n == name) return v;
    return std::nullopt;
}

double metric_values::get(std::string_view name) const { return find(name).value_or(NAN); }

void metric_values::erase(std::string_view name) {
    values_.erase(
        std::remove_if(values_.begin(), values_.end(), [&](const auto& e) { return e.first == name; }),
        values_.end());
}

double summarise(const metric& m, const std::vector<tensor_value>& values) {
    if (m.summary == tensor_summary::count_weighted_mean) {
        double weighted = 0, count = 0;
        for (const tensor_value& v : values) {
            if (std::isnan(v.value)) continue;
            weighted += v.value * v.count;
            count += v.count;
        }
        return count > 0 ? weighted / count : NAN;
    }
    for (const tensor_value& v : values)
        if (v.all_tensors && std::isfinite(v.value)) return v.value;
    double sum = 0, lowest = INFINITY, highest = -INFINITY;
    int n = 0;
    for (const tensor_value& v : values) {
        if (v.all_tensors || !std::isfinite(v.value)) continue;
        sum += v.value;
        lowest = std::min(lowest, v.value);
        highest = std::max(highest, v.value);
        ++n;
    }
    if (n == 0) return NAN;
    switch (m.summary) {
        case tensor_summary::max: return highest;
        case tensor_summary::min: return lowest;
        default: return sum / n;
    }
}

}  // namespace altgrad::host::run
