// altgrad-host quantize: numbers from standard input (or a file: text, .npy,
// raw float32) through a format, one C99 hex-float (or shortest decimal) per
// line, or into a file of the same kinds. The quick way to see what a format
// does to a value, and to a real tensor.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/tensor_files.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "quant/block_scales.hpp"
#include "quant/vocabulary.hpp"
#include "util/abi_names.hpp"
#include "util/error.hpp"
#include "util/file_text.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::cli {

namespace {

// The value of --OPTION by its name in `names`; a usage error listing the names otherwise.
template <class E>
E parse_choice(const name_table<E>& names, const char* option, const std::string& s) {
    if (const std::optional<E> v = names.value(s)) return *v;
    throw usage_error("quantize: --" + std::string(option) + " \"" + s + "\": expected one of " +
                      names.list());
}

// "nearest | stochastic | toward-zero" for the help.
template <class E>
std::string alternatives(const name_table<E>& names) {
    std::string s;
    for (const auto& [value, name] : names.entries()) s += (s.empty() ? "" : " | ") + std::string(name);
    return s;
}

// The shortest decimal that reads back as the float32 `x` ("0.1015625", "448",
// "-0", "nan"): exact, and readable.
std::string float_decimal(float x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    char buf[48];
    for (int digits = 1; digits <= 9;
         ++digits) {  // 9 significant digits always read back as the same float32
        std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(x));
        if (std::strtof(buf, nullptr) == x) break;
    }
    return buf;
}

float_tensor read_input(const std::string& file) {
    if (file.empty()) {
        float_tensor t;
        t.values = read_floats(std::cin, "quantize: standard input", kTensorFileLimit);
        t.shape = {t.values.size()};
        return t;
    }
    switch (tensor_file_kind_of(file)) {
        case tensor_file_kind::npy: return read_npy(file);
        case tensor_file_kind::raw_f32: {
            float_tensor t;
            t.values = read_raw_f32(file);
            t.shape = {t.values.size()};
            return t;
        }
        case tensor_file_kind::text: break;
    }
    std::ifstream in(file);
    if (!in) throw error(file + ": cannot read");
    float_tensor t;
    t.values = read_floats(in, file, kTensorFileLimit);
    t.shape = {t.values.size()};
    return t;
}

void write_output(const std::string& file, const float_tensor& t, bool decimal) {
    const tensor_file_kind kind = file.empty() ? tensor_file_kind::text : tensor_file_kind_of(file);
    if (kind == tensor_file_kind::npy) return write_npy(file, t);
    if (kind == tensor_file_kind::raw_f32) return write_raw_f32(file, t.values);
    std::ostringstream text;
    for (const float y : t.values) text << (decimal ? float_decimal(y) : hex_float(y)) << "\n";
    if (file.empty()) {
        std::cout << text.str();
        return;
    }
    std::ofstream out(file, std::ios::trunc);
    out << text.str();
    out.close();
    if (!out) throw error(file + ": cannot write");
}

// --sr-bits B: stochastic rounding with the top B of each element's 32 random bits.
uint32_t sr_bits_option(const std::string& text) {
    const std::optional<uint64_t> b = parse_uint64(text);
    if (!b || *b < 1 || *b > 32)
        throw usage_error("quantize: --sr-bits \"" + text + "\": expected an integer 1 .. 32");
    return static_cast<uint32_t>(*b);
}

// --block-size and the options that go with it: the trainer's block
// scaling (quant::quantize_blocked) on the input as [rows, row length].
struct block_options {
    std::string size, rows = "1", rule = "mx_floor", scale_format = "pow2", cols, pre_scale = "1";
};

void add_block_options(po::options_description& options, block_options& b) {
    options.add_options()("block-size", po::value<std::string>(&b.size),
                          "N: one scale per block of N elements along each row, derived from the block's "
                          "amax (the last block of a row may be short; N >= the row length: one per row)")(
        "block-rows", po::value<std::string>(&b.rows)->default_value("1"),
        "R: blocks of R rows by N, one scale per tile (R > 1: the tiles must divide the input)")(
        "scale-rule", po::value<std::string>(&b.rule)->default_value("mx_floor"),
        (quant::scale_rule_choices() + ": how a block's scale follows from its amax (docs/config.md)")
            .c_str())(
        "scale-format", po::value<std::string>(&b.scale_format)->default_value("pow2"),
        "the values a block's decode scale may take: fp32, pow2, or a format plugin (ue8m0, e4m3, ...)")(
        "cols", po::value<std::string>(&b.cols),
        "K: the row length (the count must be a multiple); default: a .npy's last dimension, else the "
        "whole input is one row")("pre-scale", po::value<std::string>(&b.pre_scale)->default_value("1"),
                                  "C: every block's scale s is multiplied by C: q(x*s*C)/(s*C)");
}

// q(x*s)/s of `in` into `out` with block scales by `b`'s options; nullopt without --block-size.
std::optional<quant::blocked_quantize_result> quantize_in_blocks(const po::variables_map& vm,
                                                                 const block_options& b, registry& reg,
                                                                 const format_handle& f,
                                                                 const float_tensor& in, float_tensor& out,
                                                                 const quantize_options& o) {
    if (!vm.count("block-size")) {
        for (const char* option : {"block-rows", "scale-rule", "scale-format", "cols", "pre-scale"})
            if (!vm[option].defaulted() && vm.count(option))
                throw usage_error("quantize: --" + std::string(option) + " needs --block-size");
        return std::nullopt;
    }
    if (!vm["scale"].defaulted())
        throw usage_error("quantize: --scale and --block-size: block scales replace the per-tensor scale");
    const uint64_t size = unsigned_option("quantize", "block-size", b.size);
    const uint64_t tile_rows = unsigned_option("quantize", "block-rows", b.rows);
    if (size == 0) throw usage_error("quantize: --block-size 0: expected at least 1");
    if (tile_rows == 0) throw usage_error("quantize: --block-rows 0: expected at least 1");
    const std::optional<quant::scale_rule> rule = quant::scale_rule_names().value(b.rule);
    if (!rule)
        throw usage_error("quantize: --scale-rule \"" + b.rule + "\": expected one of " +
                          quant::scale_rule_names().list());
    const std::optional<float> pre_scale = parse_float(b.pre_scale);
    if (!pre_scale || !std::isfinite(*pre_scale) || *pre_scale <= 0.0f)
        throw usage_error("quantize: --pre-scale \"" + b.pre_scale + "\": expected a finite number > 0");
    const size_t n = in.values.size();
    size_t k = n;  // the row length
    if (vm.count("cols")) {
        k = unsigned_option("quantize", "cols", b.cols);
        if (k == 0 || n % k != 0)
            throw error("quantize: --cols " + b.cols + " does not divide the input's " + std::to_string(n) +
                        " values into rows");
    } else if (in.shape.size() >= 2) {
        if (in.fortran_order)
            throw error("quantize: --input " + vm["input"].as<std::string>() +
                        ": a Fortran-order .npy has no contiguous rows; save it in C order "
                        "(numpy.ascontiguousarray) or give --cols");
        k = in.shape.back();
    }
    const quant::scale_grid grid = [&] {
        try {
            return quant::scale_grid_named(b.scale_format, [&] {
                return std::shared_ptr<const format_handle>(
                    format_handle::create(reg.load(b.scale_format, ALTGRAD_KIND_FORMAT)));
            });
        } catch (const error& e) {
            throw error("quantize: --scale-format \"" + b.scale_format + "\": " + e.what());
        }
    }();
    const quant::block_recipe recipe{*rule, &grid, f.info().max_finite};
    try {
        return quant::quantize_blocked(f, in.values.data(), out.values.data(), k ? n / k : 0, k,
                                       {tile_rows, size}, recipe, o, *pre_scale);
    } catch (const error& e) {
        throw error("quantize: " + std::string(e.what()));
    }
}

// --counts on standard error, after the values: the plugin's counts of n, and the blocks' (with
// --block-size).
void print_counts(const quantize_counts& counts, size_t n, const quant::block_scale_stats* blocks) {
    std::cout.flush();  // the counts follow the values on a terminal
    std::fprintf(stderr, "overflow %llu underflow %llu of %zu\n",
                 static_cast<unsigned long long>(counts.overflow),
                 static_cast<unsigned long long>(counts.underflow), n);
    if (blocks)
        std::fprintf(stderr, "blocks %llu saturated %llu underflowed %llu neutral %llu\n",
                     static_cast<unsigned long long>(blocks->blocks),
                     static_cast<unsigned long long>(blocks->saturated),
                     static_cast<unsigned long long>(blocks->underflowed),
                     static_cast<unsigned long long>(blocks->neutral));
}

}  // namespace

int quantize_command(const context& ctx, const args& a) {
    po::options_description options("quantize options (numbers are read from standard input)");
    std::vector<std::string> params;
    std::string rounding = "nearest", overflow = "saturate", scale_text = "1", seed_text = "0",
                offset_text = "0", sr_bits_text = "32";
    std::string output_format = "hex", input_file, output_file;
    quantize_options o;
    block_options blocks;
    po::options_description operands;
    operands.add_options()("name", po::value<std::string>());
    options.add_options()("rounding", po::value<std::string>(&rounding)->default_value("nearest"),
                          alternatives(rounding_names()).c_str())(
        "overflow", po::value<std::string>(&overflow)->default_value("saturate"),
        alternatives(overflow_names()).c_str())(
        "scale", po::value<std::string>(&scale_text)->default_value("1"),
        "scale s: each x becomes q(x*s)/s (finite, > 0; decimal or hex-float)")(
        "seed", po::value<std::string>(&seed_text)->default_value("0"), "stochastic rounding seed")(
        "offset", po::value<std::string>(&offset_text)->default_value("0"),
        "index of the first value in the random stream")(
        "sr-bits", po::value<std::string>(&sr_bits_text)->default_value("32"),
        "stochastic rounding uses the top B (1..32) of each value's 32 random bits")(
        "counts", "print the overflow and underflow counts to standard error")(
        "output-format", po::value<std::string>(&output_format)->default_value("hex"),
        "hex | decimal: text output as C99 hex-floats, or as the shortest decimal that reads back exactly")(
        "input", po::value<std::string>(&input_file),
        "read FILE instead of standard input: .npy (float32, any shape), .f32 (raw little-endian float32), "
        "else text")("output", po::value<std::string>(&output_file),
                     "write FILE instead of standard output: .npy (the input's shape), .f32, else text")(
        "param", po::value<std::vector<std::string>>(&params), "KEY=VALUE plugin parameter (repeatable)");
    add_block_options(options, blocks);
    po::positional_options_description pos;
    pos.add("name", 1);
    po::variables_map vm;
    const command_help help{
        "quantize",
        {"[--plugins DIR] quantize NAME [--rounding nearest|stochastic|toward-zero]",
         "             [--overflow saturate|nonfinite] [--scale S] [--seed N] [--offset N] [--sr-bits B]",
         "             [--counts] [--output-format hex|decimal] [--input FILE] [--output FILE]",
         "             [--param KEY=VALUE]...",
         "             [--block-size N [--block-rows R] [--scale-rule " + quant::scale_rule_choices("|") +
             "]",
         "              [--scale-format FORMAT] [--cols K] [--pre-scale C]]   < numbers"},
        "echo \"0.1 464 1e5 nan\" | altgrad-host --plugins build/plugins quantize e4m3 --rounding nearest",
        {{0, "every number was quantized and printed"},
         {1,
          "an error: no such format plugin, a broken one, a bad parameter, or input that is not a number"}}};
    if (!parse_subcommand(help, options, operands, pos, a, vm)) return 0;
    if (!vm.count("name"))
        throw usage_error(
            "quantize: which format? Give a format plugin's name, e.g. 'quantize e4m3' "
            "('altgrad-host --plugins DIR list' shows them)");
    o.rounding = parse_choice(rounding_names(), "rounding", rounding);
    o.overflow = parse_choice(overflow_names(), "overflow", overflow);
    const std::optional<float> scale = parse_float(scale_text);
    if (!scale || !std::isfinite(*scale) || *scale <= 0.0f)
        throw usage_error("quantize: --scale \"" + scale_text + "\": expected a finite number > 0");
    o.scale = *scale;
    o.seed = unsigned_option("quantize", "seed", seed_text);
    o.offset = unsigned_option("quantize", "offset", offset_text);
    o.random_bits = sr_bits_option(sr_bits_text);
    if (output_format != "hex" && output_format != "decimal")
        throw usage_error("quantize: --output-format \"" + output_format +
                          "\": expected one of hex, decimal");
    if (!vm["output-format"].defaulted() && !output_file.empty() &&
        tensor_file_kind_of(output_file) != tensor_file_kind::text)
        throw usage_error("quantize: --output-format is for text output, not the binary file " + output_file);

    registry reg(ctx.plugins);
    const auto f = format_handle::create(reg.load(vm["name"].as<std::string>(), ALTGRAD_KIND_FORMAT),
                                         parse_param_assignments(params));
    const float_tensor in = read_input(input_file);
    float_tensor out = in;
    const std::optional<quant::blocked_quantize_result> blocked =
        quantize_in_blocks(vm, blocks, reg, *f, in, out, o);
    const quantize_counts counts =
        blocked ? blocked->counts : f->quantize(in.values.data(), out.values.data(), in.values.size(), o);
    write_output(output_file, out, output_format == "decimal");
    if (vm.count("counts")) print_counts(counts, in.values.size(), blocked ? &blocked->stats : nullptr);
    return 0;
}

}  // namespace altgrad::host::cli
