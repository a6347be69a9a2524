// The config's name tables (the TOML values of its choices) and the
// vocabulary of a linear layer's products and operands (run_config.hpp).
#include <array>

#include "config/run_config.hpp"

namespace altgrad::host::config {

const name_table<activation_function>& activation_names() {
    static const name_table<activation_function> t{{activation_function::gelu, "gelu"},
                                                   {activation_function::swiglu, "swiglu"}};
    return t;
}
const name_table<data_format>& data_format_names() {
    static const name_table<data_format> t{
        {data_format::auto_detect, "auto"}, {data_format::text, "text"}, {data_format::nanogpt, "nanogpt"}};
    return t;
}
const name_table<lr_schedule_kind>& lr_schedule_names() {
    static const name_table<lr_schedule_kind> t{{lr_schedule_kind::cosine, "cosine"},
                                                {lr_schedule_kind::constant, "constant"}};
    return t;
}
const name_table<distributed_backend>& backend_names() {
    static const name_table<distributed_backend> t{{distributed_backend::automatic, "auto"},
                                                   {distributed_backend::gloo, "gloo"},
                                                   {distributed_backend::nccl, "nccl"}};
    return t;
}

const name_table<compute_device>& device_names() {
    static const name_table<compute_device> t{{compute_device::cpu, "cpu"}, {compute_device::cuda, "cuda"}};
    return t;
}
const name_table<product_kind>& product_names() {
    static const name_table<product_kind> t{{product_kind::forward, "forward"},
                                            {product_kind::input_gradient, "input_gradient"},
                                            {product_kind::weight_gradient, "weight_gradient"}};
    return t;
}

const name_table<operand_kind>& operand_names() {
    static const name_table<operand_kind> t{
        {operand_kind::x, "x"}, {operand_kind::w, "w"}, {operand_kind::dy, "dy"}};
    return t;
}

const name_table<copy_source>& copy_source_names() {
    static const name_table<copy_source> t{{copy_source::unquantized, "unquantized"},
                                           {copy_source::rowwise, "rowwise"}};
    return t;
}

std::array<operand_kind, 2> operands_of(product_kind p) {
    switch (p) {
        case product_kind::forward: return {operand_kind::x, operand_kind::w};
        case product_kind::input_gradient: return {operand_kind::dy, operand_kind::w};
        default: return {operand_kind::dy, operand_kind::x};
    }
}

product_kind first_use_of(operand_kind o) {
    return o == operand_kind::dy ? product_kind::input_gradient : product_kind::forward;
}

const char* role_of(operand_kind o) {
    return o == operand_kind::w ? "weight" : o == operand_kind::x ? "activation" : "gradient";
}

}  // namespace altgrad::host::config
