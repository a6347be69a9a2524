#include "util/abi_names.hpp"

namespace altgrad::host {

const name_table<altgrad_rounding>& rounding_names() {
    static const name_table<altgrad_rounding> t{{ALTGRAD_ROUND_NEAREST_EVEN, "nearest"},
                                                {ALTGRAD_ROUND_STOCHASTIC, "stochastic"},
                                                {ALTGRAD_ROUND_TOWARD_ZERO, "toward-zero"}};
    return t;
}

const name_table<altgrad_overflow>& overflow_names() {
    static const name_table<altgrad_overflow> t{{ALTGRAD_OVERFLOW_SATURATE, "saturate"},
                                                {ALTGRAD_OVERFLOW_NONFINITE, "nonfinite"}};
    return t;
}

const name_table<altgrad_tensor_role>& tensor_role_names() {
    static const name_table<altgrad_tensor_role> t{{ALTGRAD_TENSOR_WEIGHT, "weight"},
                                                   {ALTGRAD_TENSOR_GRADIENT, "weight_gradient"},
                                                   {ALTGRAD_TENSOR_ACTIVATION, "activation"},
                                                   {ALTGRAD_TENSOR_ATTENTION_PROBS, "attention_probs"},
                                                   {ALTGRAD_TENSOR_OUTPUT_GRADIENT, "output_gradient"}};
    return t;
}

const name_table<altgrad_memory_kind>& memory_kind_names() {
    static const name_table<altgrad_memory_kind> t{{ALTGRAD_MEMORY_HOST, "host"},
                                                   {ALTGRAD_MEMORY_CUDA, "cuda"}};
    return t;
}

const name_table<altgrad_plugin_kind>& plugin_kind_names() {
    static const name_table<altgrad_plugin_kind> t{{ALTGRAD_KIND_FORMAT, "format"},
                                                   {ALTGRAD_KIND_INTERVENTION, "intervention"},
                                                   {ALTGRAD_KIND_DIAGNOSTIC, "diagnostic"},
                                                   {ALTGRAD_KIND_TRANSFORM, "transform"},
                                                   {ALTGRAD_KIND_ACCUMULATOR, "accumulator"}};
    return t;
}

const name_table<altgrad_acc_output>& acc_output_names() {
    static const name_table<altgrad_acc_output> t{{ALTGRAD_ACC_OUTPUT_FLOAT32, "float32"},
                                                  {ALTGRAD_ACC_OUTPUT_E8M13, "e8m13"},
                                                  {ALTGRAD_ACC_OUTPUT_FLOAT16, "float16"}};
    return t;
}

const name_table<altgrad_acc_scale_kind>& acc_scale_kind_names() {
    static const name_table<altgrad_acc_scale_kind> t{{ALTGRAD_ACC_SCALE_NONE, "none"},
                                                      {ALTGRAD_ACC_SCALE_UE8M0_32, "ue8m0_32"},
                                                      {ALTGRAD_ACC_SCALE_UE4M3_16, "ue4m3_16"}};
    return t;
}

const name_table<altgrad_param_type>& param_type_names() {
    static const name_table<altgrad_param_type> t{{ALTGRAD_PARAM_BOOL, "bool"},
                                                  {ALTGRAD_PARAM_INT, "int"},
                                                  {ALTGRAD_PARAM_FLOAT, "float"},
                                                  {ALTGRAD_PARAM_STRING, "string"}};
    return t;
}

const name_table<altgrad_status>& status_names() {
    static const name_table<altgrad_status> t{{{ALTGRAD_STATUS_OK, "ok"},
                                               {ALTGRAD_STATUS_INVALID_ARGUMENT, "invalid argument"},
                                               {ALTGRAD_STATUS_UNSUPPORTED, "unsupported"},
                                               {ALTGRAD_STATUS_NOT_REPRESENTABLE, "not representable"},
                                               {ALTGRAD_STATUS_OUT_OF_MEMORY, "out of memory"},
                                               {ALTGRAD_STATUS_INTERNAL, "internal error"}},
                                              "unknown status"};
    return t;
}

const name_table<altgrad_format_family>& format_family_names() {
    static const name_table<altgrad_format_family> t{{ALTGRAD_FAMILY_FLOAT, "float"},
                                                     {ALTGRAD_FAMILY_FIXED_POINT, "fixed_point"},
                                                     {ALTGRAD_FAMILY_CODEBOOK, "codebook"}};
    return t;
}

const name_table<altgrad_zero_kind>& zero_kind_names() {
    static const name_table<altgrad_zero_kind> t{
        {ALTGRAD_ZERO_SIGNED, "signed"}, {ALTGRAD_ZERO_UNSIGNED, "unsigned"}, {ALTGRAD_ZERO_NONE, "none"}};
    return t;
}

const name_table<altgrad_action_kind>& action_kind_names() {
    static const name_table<altgrad_action_kind> t{{ALTGRAD_ACTION_CLIP_GRAD_NORM, "clip_grad_norm"},
                                                   {ALTGRAD_ACTION_SWITCH_FORMAT, "switch_format"},
                                                   {ALTGRAD_ACTION_SKIP_STEP, "skip_step"}};
    return t;
}

const name_table<altgrad_headline_summary>& headline_summary_names() {
    static const name_table<altgrad_headline_summary> t{
        {ALTGRAD_HEADLINE_MEAN, "mean"}, {ALTGRAD_HEADLINE_MAX, "max"}, {ALTGRAD_HEADLINE_MIN, "min"}};
    return t;
}

}  // namespace altgrad::host
