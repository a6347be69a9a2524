#include "config/layer_names.hpp"

namespace altgrad::host::config {

std::vector<std::string> block_names::layers() const {
    std::vector<std::string> out{attn_qkv, attn_proj, mlp_fc};
    if (!mlp_gate.empty()) out.push_back(mlp_gate);
    out.push_back(mlp_proj);
    return out;
}

block_names names_of_block(const std::string& block, bool swiglu) {
    const std::string attn = "blocks." + block + ".attn.", mlp = "blocks." + block + ".mlp.";
    return {attn + "qkv", attn + "proj", mlp + "fc", swiglu ? mlp + "gate" : "",
            mlp + "proj", attn + "probs"};
}

std::string weight_of_layer(const std::string& layer) {
    return layer == kHeadLayer ? kHeadWeight : layer + ".weight";
}

std::vector<std::string> layer_names(int64_t n_layer, bool swiglu) {
    std::vector<std::string> names;
    for (int64_t i = 0; i < n_layer; ++i)
        for (std::string& layer : names_of_block(std::to_string(i), swiglu).layers())
            names.push_back(std::move(layer));
    names.push_back(kHeadLayer);
    return names;
}

}  // namespace altgrad::host::config
