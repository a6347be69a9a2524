// The quantization vocabulary's tables (vocabulary.hpp).
#include "quant/vocabulary.hpp"

#include <string>
#include <utility>

namespace altgrad::host::quant {

const std::vector<scale_rule_info>& scale_rules() {
    static const std::vector<scale_rule_info> t{
        {scale_rule::mx_floor, "mx_floor",
         "X = 2^(floor(log2 a) - emax), taken down to the scale format: the block's largest elements may "
         "clip (by design)",
         "OCP Microscaling Formats (MX) v1.0, section 6.3", false, true},
        {scale_rule::round_up, "round_up", "X = a / M rounded up to the scale format: nothing clips",
         "cuDNN and TransformerEngine's MXFP8 (1x32 E8M0 scales rounded up)", false, false},
        {scale_rule::two_level, "two_level",
         "NVFP4's: a float32 tensor scale g = Smax * M / A, then X = nearest(a / M * g) in the scale format",
         "NVIDIA NVFP4 (TransformerEngine's cast/nvfp4, arXiv 2509.25149)", true, true},
        {scale_rule::nearest, "nearest",
         "X = a / M rounded to the nearest scale value (ties up): with power-of-two scales the nearest "
         "power of two, so a block's largest elements may clip by up to a factor 1.5",
         "AltGrad (issue #45's example of a rule added as its table entry, its code and a test)", false,
         true},
    };
    return t;
}

const scale_rule_info& info_of(scale_rule r) {
    for (const scale_rule_info& i : scale_rules())
        if (i.rule == r) return i;
    return scale_rules().front();  // unreachable: every enumerator has its entry (vocabulary_test)
}

std::string scale_rule_choices(const char* separator) {
    std::string s;
    for (const scale_rule_info& i : scale_rules()) s += (s.empty() ? "" : separator) + std::string(i.name);
    return s;
}

const name_table<scale_rule>& scale_rule_names() {
    static const name_table<scale_rule> t = [] {
        std::vector<std::pair<scale_rule, const char*>> entries;
        for (const scale_rule_info& i : scale_rules()) entries.emplace_back(i.rule, i.name);
        return name_table<scale_rule>(std::move(entries));
    }();
    return t;
}

const name_table<granularity_kind>& granularity_names() {
    static const name_table<granularity_kind> t{{granularity_kind::tensor, "tensor"},
                                                {granularity_kind::row, "row"},
                                                {granularity_kind::block, "block"}};
    return t;
}

const name_table<scaling_mode>& scaling_names() {
    static const name_table<scaling_mode> t{
        {scaling_mode::delayed, "delayed"}, {scaling_mode::current, "current"}, {scaling_mode::none, "none"}};
    return t;
}

const name_table<amax_compute_kind>& amax_compute_names() {
    static const name_table<amax_compute_kind> t{{amax_compute_kind::max, "max"},
                                                 {amax_compute_kind::most_recent, "most_recent"}};
    return t;
}

const name_table<tensor_scale_kind>& tensor_scale_names() {
    static const name_table<tensor_scale_kind> t{{tensor_scale_kind::pow2, "pow2"},
                                                 {tensor_scale_kind::fp32, "fp32"}};
    return t;
}

const name_table<first_scale_kind>& first_scale_names() {
    static const name_table<first_scale_kind> t{{first_scale_kind::amax, "amax"},
                                                {first_scale_kind::one, "one"}};
    return t;
}

}  // namespace altgrad::host::quant
