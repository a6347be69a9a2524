// Building the plan: its sites and their names, and what the resolved recipe
// gives each (format plugin, rounding, scaling, block recipe) and each
// product (accumulator, transform); the running calls are in quant_plan.cpp.
#include <utility>
#include <vector>

#include "config/recipe.hpp"
#include "quant/instruction_product.hpp"
#include "train/quant_plan.hpp"
#include "util/abi_names.hpp"
#include "util/error.hpp"
#include "util/glob.hpp"

namespace altgrad::host::train {

std::string quant_site::name() const {
    const std::string suffix = use.empty() ? "" : "@" + use;
    switch (role) {
        case ALTGRAD_TENSOR_WEIGHT: return layer + ".weight" + suffix;
        case ALTGRAD_TENSOR_ACTIVATION: return layer + ".input" + suffix;
        case ALTGRAD_TENSOR_GRADIENT: return layer + ".communication";
        default: return layer + ".output_grad" + suffix;
    }
}

const char* quant_site::role_name() const { return host::role_name(role); }

size_t quant_site::block_length() const {
    switch (spec.granularity) {
        case config::granularity_kind::tensor: return 0;
        case config::granularity_kind::row: return SIZE_MAX;
        default: return static_cast<size_t>(spec.block_size);
    }
}

size_t quant_site::tile_rows() const {
    return spec.granularity == config::granularity_kind::block ? static_cast<size_t>(spec.block_rows) : 1;
}

size_t quant_plan::add_linear(const std::string& layer) {
    const size_t first = sites.size();
    for (altgrad_tensor_role role :
         {ALTGRAD_TENSOR_WEIGHT, ALTGRAD_TENSOR_ACTIVATION, ALTGRAD_TENSOR_OUTPUT_GRADIENT}) {
        quant_site s;
        s.layer = layer;
        s.role = role;
        sites.push_back(std::move(s));
    }
    accumulators.emplace_back();
    transforms.emplace_back();
    second_uses.emplace_back();
    return first;
}

std::string format_name_of(const quant_site& s) { return s.format ? s.format->name() : "fp32"; }

run::tensor_line record_of(const quant_site& s, int64_t step, bool with_bit_stall) {
    run::tensor_line t{step, s.name(), s.role_name(), format_name_of(s), {}};
    run::metric_values& v = t.values;
    v.set("scale", s.scale);
    v.set("amax", s.amax);
    v.set("overflow", static_cast<double>(s.overflow_count));
    v.set("underflow", static_cast<double>(s.underflow_count));
    v.set("count", static_cast<double>(s.count));
    if (with_bit_stall && s.role == ALTGRAD_TENSOR_WEIGHT) v.set("bit_stall_rate", s.bit_stall_rate);
    if (s.block_scaled()) {
        const quant::block_scale_stats& b = s.block_stats;
        v.set("blocks.blocks", static_cast<double>(b.blocks));
        v.set("blocks.saturated", static_cast<double>(b.saturated));
        v.set("blocks.underflowed", static_cast<double>(b.underflowed));
        v.set("blocks.neutral", static_cast<double>(b.neutral));
        v.set("blocks.smallest_scale", b.smallest_scale);
        v.set("blocks.largest_scale", b.largest_scale);
    }
    return t;
}

namespace {

quant::scaling_config scaling_of(const config::quantization_config& q) {
    quant::scaling_config s;
    s.mode = q.scaling;
    s.history_len = static_cast<int>(q.amax_history_len);
    s.compute = q.amax_compute;
    s.margin = static_cast<int>(q.margin);
    s.values = q.tensor_scale;
    s.first = q.first_scale;
    return s;
}

}  // namespace

void set_format(quant_site& s, std::shared_ptr<const format_handle> format) {
    s.format = std::move(format);
    s.spec.format = format_name_of(s);  // an intervention's switch changes the spec's format too
    const double max = s.format ? s.format->info().max_finite : 1.0;
    s.scaling.reset(max);
    s.blocks.element_max = max;
}

namespace {

// A site's settings from its operand's, as the recipe resolved them.
void set_operand(quant_site& s, const config::quantization_config& q, const config::operand_spec& o,
                 format_library& formats, const std::string& where) {
    s.spec = o;
    s.where = where;
    s.overflow = q.overflow;
    s.random_bits = static_cast<uint32_t>(q.sr_bits);
    s.scaling = quant::scaling_state(scaling_of(q), 1.0);
    s.blocks.rule = o.scale_rule;
    set_format(s, formats.get(o.format));
    if (s.block_scaled()) s.blocks.grid = &formats.scale_format(o.scale_format);
}

// Why a product's operands cannot go through an instruction ("" when they
// can). An instruction takes format values (the hardware's operands), so
// each copy is taken back to them by its scales, which must be powers of two
// for that to be exact; the scales then act as a GPU applies them: per
// tensor after the instructions (the epilogue's alpha), per block inside a
// block-scaled instruction (UE8M0 scales per 32 elements), or, through an
// instruction without scales, on each promoted sum (DeepSeek-V3's blocks,
// as long as promote_every). A tile (block_rows > 1) is square, so its
// transpose is blocks of the same length.
std::string instruction_problem(const accumulator_handle& acc, const config::product_recipe& product,
                                const config::quantization_config& q) {
    const uint32_t kinds = acc.info().scale_kinds;
    const bool unscaled = (kinds & (1u << ALTGRAD_ACC_SCALE_NONE)) != 0;
    const bool ue8m0 = (kinds & (1u << ALTGRAD_ACC_SCALE_UE8M0_32)) != 0;
    const int64_t every = product.accumulator->promote_every;
    const std::string promote = quant::promote_every_problem(acc, static_cast<size_t>(every));
    if (!promote.empty()) return "promote_every = " + std::to_string(every) + ": " + promote;
    if (!unscaled && !ue8m0)
        return "instruction '" + acc.name() +
               "' takes UE4M3 block scales (NVFP4's), which the trainer does not "
               "pass yet";
    const int64_t length = unscaled ? every : 32;
    bool blocks = false;
    for (const config::operand_spec& o : product.operands) {
        if (o.format == "fp32") continue;
        const std::string key = "key '" + o.key + "'";
        if (o.pre_scale != 1.0) return "an instruction takes no pre_scale yet, and " + key + " gives one";
        if (o.granularity == config::granularity_kind::row)
            return "an instruction takes operands per tensor or in blocks, and " + key +
                   " gives granularity \"row\"";
        if (o.granularity == config::granularity_kind::tensor) {
            if (q.scaling != config::scaling_mode::none && q.tensor_scale != config::tensor_scale_kind::pow2)
                return "an instruction takes operands scaled by powers of two (quantization.tensor_scale = "
                       "\"pow2\"), so their values times the scale are the format's";
            continue;
        }
        blocks = true;
        if (o.scale_format != "pow2" && o.scale_format != "ue8m0")
            return "an instruction takes block scales that are powers of two (scale_format \"pow2\" or "
                   "\"ue8m0\"), and " +
                   key + " gives \"" + o.scale_format + "\"";
        if (o.block_size != length || (o.block_rows != 1 && o.block_rows != o.block_size))
            return unscaled
                       ? "blocks through instruction '" + acc.name() +
                             "' are as long as promote_every (their scales multiply each promoted sum, as "
                             "DeepSeek-V3's), square as tiles, and " +
                             key + " gives blocks of " + std::to_string(o.block_rows) + "x" +
                             std::to_string(o.block_size) + " with promote_every = " + std::to_string(every)
                       : "instruction '" + acc.name() + "' takes a scale per 32 elements, and " + key +
                             " gives blocks of " + std::to_string(o.block_rows) + "x" +
                             std::to_string(o.block_size);
    }
    if (!blocks && !unscaled)
        return "instruction '" + acc.name() +
               "' takes block scales, and this product's operands are per tensor";
    return "";
}

// A product's accumulator, as the recipe resolved it.
product_accumulator accumulator_of(const config::product_recipe& product,
                                   const config::quantization_config& q, format_library& formats) {
    const config::accumulator_config& a = *product.accumulator;
    product_accumulator out;
    if (a.instruction.empty()) {
        const quant::accumulator_spec spec{a.rounding, static_cast<size_t>(a.mma_depth),
                                           static_cast<size_t>(a.promote_every)};
        out.model =
            std::make_shared<quant::accumulator>(formats.accumulator_format(a.format, a.params), spec);
        return out;
    }
    out.instruction = formats.instruction(a.instruction, a.params);
    out.promote_every = static_cast<size_t>(a.promote_every);
    const std::string problem = instruction_problem(*out.instruction, product, q);
    if (!problem.empty()) throw error(problem);
    return out;
}

// A linear layer's accumulators and transforms, as the recipe resolved them.
void set_products(quant_plan& plan, size_t layer, const config::layer_recipe& recipe,
                  const config::quantization_config& q, const std::string& where, format_library& formats) {
    for (size_t p = 0; p < config::kProducts; ++p) {
        const config::product_recipe& product = recipe.products[p];
        plan.accumulators[layer][p] = {};
        if (product.accumulator) {
            try {
                plan.accumulators[layer][p] = accumulator_of(product, q, formats);
                if (plan.accumulators[layer][p].instruction) plan.keep_copy_scales = true;
            } catch (const error& e) {
                throw error(where + ": key '" + product.accumulator_key + "' (" + recipe.layer +
                            "): " + e.what());
            }
        }
        product_transform& slot = plan.transforms[layer][p];
        slot = {};
        if (const auto& t = product.transform) {
            slot.key = where + ": key '" + product.transform_key + "' (" + recipe.layer + ")";
            try {
                slot.handle = formats.transform(*t);
            } catch (const error& e) {
                throw error(slot.key + ": " + e.what());
            }
        }
    }
}

}  // namespace

void assign_formats(quant_plan& plan, const config::run_config& c, format_library& formats) {
    const config::quantization_config& q = c.quantization;
    plan.sites.resize(plan.first_use_sites());  // second uses' own sites are made below
    for (auto& layer : plan.second_uses) layer.fill(second_use{});
    plan.keep_copy_scales = false;
    if (!q.enabled) return;
    std::vector<std::string> layers;
    for (size_t layer = 0; layer < plan.second_uses.size(); ++layer)
        layers.push_back(plan.sites[3 * layer].layer);
    const config::resolved_recipe recipe = config::resolve(q, layers);
    // A layer's sites are W, x, dy: the operands in that order.
    using config::operand_kind;
    const operand_kind operands[3] = {operand_kind::w, operand_kind::x, operand_kind::dy};
    const std::string where = c.source.string();
    for (size_t layer = 0; layer < recipe.layers.size(); ++layer) {
        const config::layer_recipe& r = recipe.layers[layer];
        set_products(plan, layer, r, q, where, formats);
        for (size_t k = 0; k < 3; ++k) {
            const size_t first = 3 * layer + k;
            set_operand(plan.sites[first], q, r.first_use(operands[k]), formats, where);
            second_use& use = plan.second_uses[layer][k];
            use.source = r.second_use(operands[k]).source;
            if (!r.second_use_owns(operands[k])) continue;
            quant_site own;
            own.layer = r.layer;
            own.role = plan.sites[first].role;
            own.use = config::product_names().name(config::second_use_of(operands[k]));
            set_operand(own, q, r.second_use(operands[k]), formats, where);
            use.own = plan.sites.size();
            plan.sites.push_back(std::move(own));
        }
    }
}

std::vector<size_t> add_communication_sites(quant_plan& plan, const config::run_config& c,
                                            format_library& formats,
                                            const std::vector<std::string>& parameters) {
    const config::operand_spec spec = config::communication_spec(c.quantization);
    if (spec.format == "fp32") return {};
    config::quantization_config q = c.quantization;
    if (q.communication.scaling) q.scaling = *q.communication.scaling;
    std::vector<size_t> out;
    for (const std::string& parameter : parameters) {
        quant_site s;
        s.layer = parameter;
        s.role = ALTGRAD_TENSOR_GRADIENT;
        set_operand(s, q, spec, formats, c.source.string());
        out.push_back(plan.sites.size());
        plan.sites.push_back(std::move(s));
    }
    return out;
}

std::vector<run::format_switch> switch_formats(quant_plan& plan, const std::string& pattern,
                                               const std::string& to, format_library& formats) {
    std::vector<run::format_switch> done;
    for (quant_site& s : plan.sites) {
        if (!glob_match(pattern, s.name()) || format_name_of(s) == to) continue;
        const std::string from = format_name_of(s);
        set_format(s, formats.get(to));
        run::format_switch sw;
        sw.tensor = s.name();
        sw.from = from;
        sw.to = to;
        done.push_back(std::move(sw));
    }
    return done;
}

}  // namespace altgrad::host::train
