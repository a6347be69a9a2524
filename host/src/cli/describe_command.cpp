// altgrad-host describe: what a plugin is; for a format, its exact encoding
// and, with --table, the value of every code; for a diagnostic, the headline
// values a report draws (ABI 1.3); for a transform, its block size and kind (ABI 1.4);
// for an accumulator, the instruction it computes (ABI 1.5).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "plugins/accumulator_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/headlines.hpp"
#include "plugins/plugin_json.hpp"
#include "plugins/registry.hpp"
#include "plugins/transform_handle.hpp"
#include "util/abi_names.hpp"
#include "util/error.hpp"
#include "util/json_output.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::cli {

namespace {

std::string modes(uint32_t bits) {
    std::string s;
    for (const auto& [mode, name] : rounding_names().entries())
        if (bits & (1u << mode)) s += (s.empty() ? "" : ", ") + std::string(name);
    return s;
}

std::string memory_text(uint32_t bits) {
    std::string s;
    for (const auto& [kind, name] : memory_kind_names().entries())
        if (bits & (1u << kind)) s += (s.empty() ? "" : ", ") + std::string(name);
    return s.empty() ? "none" : s;
}

std::string comma_list(const std::vector<std::string>& items) {
    std::string s;
    for (const std::string& item : items) s += (s.empty() ? "" : ", ") + item;
    return s;
}

// "%a (%.9g)": exact and readable.
std::string both(double x) {
    char buf[48];
    std::snprintf(buf, sizeof buf, " (%.9g)", x);
    return hex_float(x) + buf;
}

std::string binary(uint32_t code, uint32_t bits) {
    std::string s;
    for (int b = static_cast<int>(bits) - 1; b >= 0; --b) s += ((code >> b) & 1u) ? '1' : '0';
    return s;
}

void print_format_text(const altgrad_format_info& i) {
    std::cout << "family          " << format_family_names().name(i.family) << "\n"
              << "bits            " << i.total_bits << " (exponent " << i.exponent_bits << ", mantissa "
              << i.mantissa_bits << ", bias " << i.bias << ", " << (i.is_signed ? "signed" : "unsigned")
              << ")\n"
              << "zero            " << zero_kind_names().name(i.zero) << "\n"
              << "subnormals      " << (i.has_subnormals ? "yes" : "no") << "\n"
              << "infinities      " << (i.has_inf ? "+-Inf" : "none") << "\n"
              << "NaN codes       " << i.nan_code_count;
    if (i.nan_code_count > 0)
        std::cout << " (canonical 0x" << std::hex << i.canonical_nan_code << std::dec << ")";
    std::cout << "\n"
              << "max finite      " << both(i.max_finite) << "\n"
              << "lowest finite   " << both(i.lowest_finite) << "\n"
              << "min normal      " << both(i.min_normal) << "\n"
              << "min subnormal   " << (i.min_subnormal > 0 ? both(i.min_subnormal) : "none") << "\n"
              << "rounding        " << modes(i.rounding_modes) << "\n"
              << "memory          " << memory_text(i.memory_kinds) << "\n";
}

// Every code: hex, bits, value.
void print_code_table(const altgrad_format_info& i, const std::vector<float>& values) {
    std::cout << "\nCODE    BITS" << std::string(i.total_bits > 4 ? i.total_bits - 4 : 0, ' ') << "  VALUE\n";
    for (size_t c = 0; c < values.size(); ++c) {
        char code[16];
        std::snprintf(code, sizeof code, "0x%0*zx", static_cast<int>((i.total_bits + 3) / 4), c);
        std::cout << code << std::string(8 - std::string(code).size(), ' ')
                  << binary(static_cast<uint32_t>(c), i.total_bits) << "  " << both(values[c]) << "\n";
    }
}

// What a report draws for a diagnostic: each headline's series, how it is
// summarised over tensors, its title and axis; or why nothing is declared.
void print_headlines(const loaded_plugin& plugin) {
    if (plugin.headlines.empty()) {
        const bool older = !has_headline_fields(*plugin.entry);
        std::cout << "headlines       none declared" << (older ? " (built before ABI 1.3)" : "")
                  << ": a report shows every value it writes, each the mean over tensors\n";
        return;
    }
    for (const diagnostic_headline& h : plugin.headlines)
        std::cout << "headline        " << h.series << ": the " << headline_summary_names().name(h.summary)
                  << " over tensors of " << h.value << "\n"
                  << "  title         " << h.title << "\n"
                  << "  axis          " << h.label << (h.unit.empty() ? "" : " (" + h.unit + ")")
                  << (h.log_scale ? ", log scale" : "") << "\n";
}

// A transform's info (ABI 1.4), as created with the given parameters.
void print_transform_text(const altgrad_transform_info& i) {
    std::cout << "block size      " << i.block_size << " (a row's length must be a multiple)\n"
              << "self-inverse    " << (i.self_inverse ? "yes" : "no: the inverse is T^T") << "\n"
              << "uses seed       "
              << (i.uses_seed ? "yes: T depends on each call's seed" : "no: the same T in every call") << "\n"
              << "memory          " << memory_text(i.memory_kinds) << "\n";
}

// An accumulator's instruction (ABI 1.5), as created with the given parameters.
void print_accumulator_text(const altgrad_accumulator_info& i) {
    std::string scales;
    for (const auto& [kind, name] : acc_scale_kind_names().entries())
        if (i.scale_kinds & (1u << kind)) scales += (scales.empty() ? "" : ", ") + std::string(name);
    const char* output = i.output == ALTGRAD_ACC_OUTPUT_FLOAT16 ? "float16 (rounded to nearest even)"
                         : i.output == ALTGRAD_ACC_OUTPUT_E8M13
                             ? "e8m13 (float32 truncated to 13 fraction bits)"
                             : "float32 (truncated toward zero)";
    std::cout << "depth           " << i.depth << " products per instruction\n"
              << "fraction bits   " << i.fraction_bits
              << " (each term truncated below the largest exponent)\n"
              << "halves          "
              << (i.halves == 2 ? "2: two fused dot-adds of " + std::to_string(i.depth / 2) + " in sequence"
                                : std::string("1: one fused dot-add"))
              << "\n"
              << "groups          "
              << (i.group_size
                      ? std::to_string(i.group_size) + " E2M1 products summed exactly before their scales"
                      : std::string("none"))
              << "\n"
              << "output          " << output << "\n"
              << "scales          " << scales << "\n"
              << "memory          " << memory_text(i.memory_kinds) << "\n";
}

void print_text(const loaded_plugin& plugin, const format_handle* f, bool table, const transform_handle* t,
                const accumulator_handle* acc) {
    const manifest& m = plugin.info;
    std::cout << "name            " << m.name << " " << version_string(m.version) << " (" << kind_name(m.kind)
              << ", ABI " << version_string(m.abi_version, false) << ")\n"
              << (m.aliases.empty() ? "" : "aliases         " + comma_list(m.aliases) + "\n")
              << "description     " << m.description << "\n"
              << "library         " << m.library.string() << "\n";
    for (const param_decl& p : m.params) std::cout << "parameter       " << param_summary(p) << "\n";
    if (m.kind == ALTGRAD_KIND_DIAGNOSTIC) print_headlines(plugin);
    if (t != nullptr) print_transform_text(t->info());
    if (acc != nullptr) print_accumulator_text(acc->info());
    if (f == nullptr) return;
    print_format_text(f->info());
    if (table) print_code_table(f->info(), f->decode_all_codes());
}

}  // namespace

int describe_command(const context& ctx, const args& a) {
    po::options_description options("describe options");
    std::vector<std::string> params;
    po::options_description operands;
    operands.add_options()("name", po::value<std::string>());
    options.add_options()("json", "print JSON")(
        "table", "list every code with its value (formats of at most 16 bits)")(
        "param", po::value<std::vector<std::string>>(&params), "KEY=VALUE plugin parameter (repeatable)");
    po::positional_options_description pos;
    pos.add("name", 1);
    po::variables_map vm;
    const command_help help{
        "describe",
        {"[--plugins DIR] describe NAME [--json] [--table] [--param KEY=VALUE]..."},
        "altgrad-host --plugins build/plugins describe e4m3 --table",
        {{0, "the plugin was described"}, {1, "an error: no such plugin, a broken one, or a bad parameter"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;
    if (!vm.count("name"))
        throw usage_error(
            "describe: which plugin? Give a plugin's name, e.g. 'describe e4m3' "
            "('altgrad-host --plugins DIR list' shows them)");
    const std::string name = vm["name"].as<std::string>();
    const bool as_json = vm.count("json") > 0, table = vm.count("table") > 0;

    registry reg(ctx.plugins);
    const auto plugin = reg.load(name);  // by its name or an alias; the output shows its name
    const manifest& m = plugin->info;
    if (m.kind != ALTGRAD_KIND_FORMAT && table)
        throw usage_error("describe --table: '" + name + "' is not a format plugin");
    std::shared_ptr<format_handle> f;
    if (m.kind == ALTGRAD_KIND_FORMAT) f = format_handle::create(plugin, parse_param_assignments(params));
    std::shared_ptr<transform_handle> t;
    if (m.kind == ALTGRAD_KIND_TRANSFORM)
        t = transform_handle::create(plugin, parse_param_assignments(params));
    std::shared_ptr<accumulator_handle> acc;
    if (m.kind == ALTGRAD_KIND_ACCUMULATOR)
        acc = accumulator_handle::create(plugin, parse_param_assignments(params));
    if (table && f->info().total_bits > 16)
        throw usage_error("describe --table: '" + name + "' has " + std::to_string(f->info().total_bits) +
                          " bits; tables are limited to formats of at most 16 bits");

    if (as_json) std::cout << json_output(describe_json(*plugin, f.get(), table, t.get(), acc.get()));
    else print_text(*plugin, f.get(), table, t.get(), acc.get());
    return 0;
}

}  // namespace altgrad::host::cli
