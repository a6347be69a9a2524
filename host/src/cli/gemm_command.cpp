// altgrad-host gemm: a matrix product of random inputs through the accumulation
// model (quant/accumulate.hpp, docs/accumulation.md) when --accumulator names a
// format plugin, or through an accumulator plugin's instructions
// (quant/instruction_product.hpp) when it names one of those, the inputs then
// rounded to --a-format and --b-format; and its error against the float64
// product of the same inputs: maximum, median and norm-wise, at --k or, with
// --csv, at K = 256, 512, 1024, ... up to --k.
//
// Inputs are seeded and the same for every K: element (i, k) of A and (k, j)
// of B are drawn from Philox streams by their index k * M + i and k * N + j, so
// the operands at a smaller K are the leading part of those at a larger one
// (A is kept as its transpose [K, M], whose leading rows are that part).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/philox.hpp>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/tensor_files.hpp"
#include "plugins/accumulator_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "quant/accumulate.hpp"
#include "quant/instruction_product.hpp"
#include "util/abi_names.hpp"
#include "util/error.hpp"
#include "util/name_table.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::cli {

namespace {

enum class distribution { normal, uniform, fp8_e4m3 };

const name_table<distribution>& distribution_names() {
    static const name_table<distribution> t = {{distribution::normal, "normal"},
                                               {distribution::uniform, "uniform"},
                                               {distribution::fp8_e4m3, "fp8-e4m3"}};
    return t;
}

struct gemm_request {
    size_t k = 0, rows = 256, cols = 256;
    uint64_t seed = 0;
    distribution inputs = distribution::normal;
    quant::accumulator_spec spec;
    std::string format;  // the plugin --accumulator names
    // An accumulator plugin's instructions (not the model), on operands of these formats.
    bool instructions = false;
    std::string a_format, b_format;
    host::given_params params;
    unsigned threads = 0;
    bool csv = false;
    std::string save;  // a folder for a.npy, b.npy, c.npy; empty: none
};

// The i-th value of stream `stream` (0: A, 1: B) under `seed`: Philox4x32-10's block at
// counter (i, stream), its 128 bits made into N(0,1) by Box-Muller, U[0, 1) or N(0,1) rounded
// to OCP FP8 E4M3 (nearest-even, saturating: the values an FP8 GEMM multiplies).
float draw(distribution d, uint64_t seed, uint32_t stream, uint64_t i) {
    const sdk::philox_block r =
        sdk::philox4x32_10(static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32), stream, 0u,
                           static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    if (d == distribution::uniform) return static_cast<float>(r.word[0] >> 8) * 0x1p-24f;
    const double u1 = (static_cast<double>((uint64_t{r.word[0]} << 21) | (r.word[1] >> 11)) + 1.0) * 0x1p-53;
    const double u2 = static_cast<double>((uint64_t{r.word[2]} << 21) | (r.word[3] >> 11)) * 0x1p-53;
    const auto x = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    if (d == distribution::normal) return x;
    static const sdk::exmy_format e4m3({4, 3, 7, sdk::exmy_specials::finite_nan});  // plugins/e4m3
    sdk::element_counts counts{};
    uint32_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    b = e4m3.quantize_bits<ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE>(b, 0u, counts);
    float q = 0;
    std::memcpy(&q, &b, sizeof q);
    return q;
}

struct operands {
    std::vector<float> a_t;  // Aᵀ: [K, M]
    std::vector<float> b;    // [K, N]
};

operands draw_operands(const gemm_request& r) {
    operands o{std::vector<float>(r.k * r.rows), std::vector<float>(r.k * r.cols)};
    for (size_t i = 0; i < o.a_t.size(); ++i) o.a_t[i] = draw(r.inputs, r.seed, 0, i);
    for (size_t i = 0; i < o.b.size(); ++i) o.b[i] = draw(r.inputs, r.seed, 1, i);
    return o;
}

// The float64 product of the leading K of the operands, for each K of `ks`, and the sum of
// the products' magnitudes (each element's error is measured against it): one pass over k,
// summing in k order.
struct reference {
    std::vector<double> product, magnitude;  // [M, N] each
};

std::vector<reference> float64_references(const gemm_request& r, const operands& o,
                                          const std::vector<size_t>& ks) {
    std::vector<reference> out;
    reference now{std::vector<double>(r.rows * r.cols), std::vector<double>(r.rows * r.cols)};
    size_t next = 0;
    for (size_t k = 0; k < r.k; ++k) {
        for (size_t i = 0; i < r.rows; ++i) {
            const double x = o.a_t[k * r.rows + i];
            double* row = now.product.data() + i * r.cols;
            double* size = now.magnitude.data() + i * r.cols;
            const float* b = o.b.data() + k * r.cols;
            for (size_t j = 0; j < r.cols; ++j) {
                const double p = x * static_cast<double>(b[j]);
                row[j] += p;
                size[j] += std::fabs(p);
            }
        }
        if (next < ks.size() && k + 1 == ks[next]) out.push_back(now), ++next;
    }
    return out;
}

struct product_errors {
    double max = 0, median = 0, normwise = 0;
};

// Element (i, j)'s error |c - r| / sum_k |a_ik b_kj| (0 where both are 0; NaN where c is);
// their maximum and median (NaN if any is NaN), and ||C - R|| / ||R|| (Frobenius norms).
product_errors errors_of(const std::vector<float>& c, const reference& ref) {
    std::vector<double> e(c.size());
    double diff = 0, norm = 0;
    bool nan = false;
    for (size_t x = 0; x < c.size(); ++x) {
        const double d = std::fabs(static_cast<double>(c[x]) - ref.product[x]);
        e[x] = d == 0 ? 0.0 : d / ref.magnitude[x];
        nan = nan || std::isnan(e[x]);
        diff += d * d;
        norm += ref.product[x] * ref.product[x];
    }
    product_errors out;
    out.normwise = std::sqrt(diff) / std::sqrt(norm);
    if (nan) {
        out.max = out.median = std::numeric_limits<double>::quiet_NaN();
        return out;
    }
    const size_t half = e.size() / 2;
    std::nth_element(e.begin(), e.begin() + half, e.end());
    out.median = e[half];
    if (e.size() % 2 == 0) out.median = (out.median + *std::max_element(e.begin(), e.begin() + half)) / 2;
    out.max = *std::max_element(e.begin(), e.end());
    return out;
}

// The product at the leading K of the operands: through the model or the instructions.
using product_at = std::function<std::vector<float>(const operands&, size_t)>;

// The accumulation model's product; a format that cannot be this accumulator is a bad argument.
product_at model_path(registry& reg, const gemm_request& r) {
    std::shared_ptr<const quant::accumulator> acc;
    try {
        acc = std::make_shared<quant::accumulator>(
            format_handle::create(reg.load(r.format, ALTGRAD_KIND_FORMAT), r.params), r.spec);
    } catch (const usage_error&) {
        throw;
    } catch (const error& e) {
        throw usage_error("gemm: --accumulator " + r.format + ": " + first_line(e.what()));
    }
    return [acc, &r](const operands& o, size_t k) {
        std::vector<float> c(r.rows * r.cols);
        acc->gemm({o.a_t.data(), quant::operand_layout::transposed, o.b.data(), quant::operand_layout::as_is,
                   r.rows, k, r.cols},
                  c.data(), r.threads);
        return c;
    };
}

// A plugin made for --OPTION NAME; a usage error naming both when it cannot be.
template <class Make>
auto made_for(const char* option, const std::string& name, Make&& make) {
    try {
        return make();
    } catch (const error& e) {
        throw usage_error("gemm: --" + std::string(option) + " " + name + ": " + first_line(e.what()));
    }
}

// The rows x k leading columns of x [K, rows] (a stored transposed), row-major.
std::vector<float> leading_rows(const std::vector<float>& x_t, size_t rows, size_t k) {
    std::vector<float> out(rows * k);
    for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < k; ++j) out[i * k + j] = x_t[j * rows + i];
    return out;
}

// The instructions' product, the operands first rounded (nearest even) to --a-format and
// --b-format; a block-scaled instruction gets scales of 1.
product_at instruction_path(registry& reg, const gemm_request& r, operands& o, size_t& depth) {
    const auto acc = made_for("accumulator", r.format, [&] {
        return accumulator_handle::create(reg.load(r.format, ALTGRAD_KIND_ACCUMULATOR), r.params);
    });
    const auto a_format = made_for("a-format", r.a_format, [&] {
        return format_handle::create(reg.load(r.a_format, ALTGRAD_KIND_FORMAT));
    });
    const auto b_format = made_for("b-format", r.b_format, [&] {
        return format_handle::create(reg.load(r.b_format, ALTGRAD_KIND_FORMAT));
    });
    const std::string problem = quant::promote_every_problem(*acc, r.spec.promote_every);
    if (!problem.empty())
        throw usage_error("gemm: --promote-every " + std::to_string(r.spec.promote_every) + ": " + problem);
    a_format->quantize(o.a_t.data(), o.a_t.data(), o.a_t.size(), quantize_options{});
    b_format->quantize(o.b.data(), o.b.data(), o.b.size(), quantize_options{});
    depth = acc->info().depth;
    const uint32_t kinds = acc->info().scale_kinds;
    const altgrad_acc_scale_kind kind = (kinds & (1u << ALTGRAD_ACC_SCALE_NONE)) != 0 ? ALTGRAD_ACC_SCALE_NONE
                                        : (kinds & (1u << ALTGRAD_ACC_SCALE_UE8M0_32))
                                            ? ALTGRAD_ACC_SCALE_UE8M0_32
                                            : ALTGRAD_ACC_SCALE_UE4M3_16;
    const int32_t a_min = quant::min_exponent(*a_format), b_min = quant::min_exponent(*b_format);
    return [acc, a_min, b_min, kind, &r](const operands& o, size_t k) {
        const std::vector<float> a = leading_rows(o.a_t, r.rows, k), b = leading_rows(o.b, r.cols, k);
        const size_t block = quant::scale_block(kind), blocks = block ? (k + block - 1) / block : 0;
        const std::vector<float> a_scales(r.rows * blocks, 1.0f), b_scales(r.cols * blocks, 1.0f);
        quant::instruction_operands p;
        p.a = a.data();
        p.b = b.data();
        p.m = r.rows;
        p.n = r.cols;
        p.k = k;
        p.a_min_exponent = a_min;
        p.b_min_exponent = b_min;
        p.scale_kind = kind;
        p.a_scales = block ? a_scales.data() : nullptr;
        p.b_scales = block ? b_scales.data() : nullptr;
        std::vector<float> c(r.rows * r.cols);
        quant::instruction_product(*acc, p, r.spec.promote_every, c.data(), r.threads);
        return c;
    };
}

// K = 256, 512, ... below --k, then --k (--csv); --k alone otherwise.
std::vector<size_t> ks_of(const gemm_request& r) {
    std::vector<size_t> ks;
    if (r.csv)
        for (size_t k = 256; k < r.k; k *= 2) ks.push_back(k);
    ks.push_back(r.k);
    return ks;
}

void save_operands(const gemm_request& r, const operands& o, const std::vector<float>& c) {
    const std::filesystem::path dir = r.save;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw error(r.save + ": cannot create the folder: " + ec.message());
    float_tensor a{std::vector<float>(r.rows * r.k), {r.rows, r.k}};
    for (size_t i = 0; i < r.rows; ++i)
        for (size_t k = 0; k < r.k; ++k) a.values[i * r.k + k] = o.a_t[k * r.rows + i];
    write_npy(dir / "a.npy", a);
    write_npy(dir / "b.npy", {o.b, {r.k, r.cols}});
    write_npy(dir / "c.npy", {c, {r.rows, r.cols}});
}

// depth: the instruction's (0 for the model).
void print_result(const gemm_request& r, size_t depth, const product_errors& e) {
    const std::string promote =
        r.spec.promote_every ? "promoted every " + std::to_string(r.spec.promote_every) : "never promoted";
    // The parameters as given (KEY=VALUE, in key order): "float" alone names no format.
    std::string params;
    for (const auto& [key, value] : r.params)
        params += (params.empty() ? " (" : ", ") + key + "=" + value.text;
    if (!params.empty()) params += ")";
    const std::string how = r.instructions ? "instructions of depth " + std::to_string(depth)
                                           : std::string(rounding_name(r.spec.rounding)) + ", mma depth " +
                                                 std::to_string(r.spec.mma_depth);
    const std::string inputs =
        r.instructions ? " rounded to " + r.a_format + " (A) and " + r.b_format + " (B)" : "";
    std::cout << "accumulator      " << r.format << params << ", " << how << ", " << promote << "\n"
              << "product          " << r.rows << " x " << r.k << " x " << r.cols << " (M x K x N), "
              << distribution_names().name(r.inputs) << " inputs" << inputs << ", seed " << r.seed << "\n"
              << "max error        " << shortest_decimal(e.max) << "\n"
              << "median error     " << shortest_decimal(e.median) << "\n"
              << "norm-wise error  " << shortest_decimal(e.normwise) << "\n";
}

int run_gemm(registry& reg, const gemm_request& r) {
    operands o = draw_operands(r);
    size_t depth = 0;
    const product_at product = r.instructions ? instruction_path(reg, r, o, depth) : model_path(reg, r);
    const std::vector<size_t> ks = ks_of(r);
    const std::vector<reference> refs = float64_references(r, o, ks);
    if (r.csv) std::cout << "k,max_error,median_error,normwise_error\n";
    for (size_t t = 0; t < ks.size(); ++t) {
        const std::vector<float> c = product(o, ks[t]);
        const product_errors e = errors_of(c, refs[t]);
        if (r.csv)
            std::cout << ks[t] << "," << shortest_decimal(e.max) << "," << shortest_decimal(e.median) << ","
                      << shortest_decimal(e.normwise) << "\n";
        else print_result(r, depth, e);
        if (!r.save.empty() && ks[t] == r.k) save_operands(r, o, c);
    }
    return 0;
}

// A whole number in [low, high] for --OPTION; a usage error naming it otherwise.
size_t count_option(const char* option, const std::string& text, uint64_t low, uint64_t high) {
    const uint64_t v = unsigned_option("gemm", option, text);
    if (v < low || v > high)
        throw usage_error("gemm: --" + std::string(option) + " " + text + ": expected " +
                          std::to_string(low) + " .. " + std::to_string(high));
    return static_cast<size_t>(v);
}

// The options as given, before they are checked.
struct gemm_texts {
    std::string k, promote, rows, cols, seed, depth, threads, rounding, inputs;
    std::vector<std::string> params;
};

void add_gemm_options(po::options_description& options, gemm_texts& t, gemm_request& r) {
    options.add_options()("k", po::value<std::string>(&t.k), "K, the reduction's length (required)")(
        "accumulator", po::value<std::string>(&r.format),
        "a format plugin (the accumulation model) or an accumulator plugin (its instructions) (required)")(
        "promote-every", po::value<std::string>(&t.promote),
        "N: elements between promotions into the float32 total, 0 for never (required for a format; "
        "for instructions a multiple of their depth, default 0)")(
        "a-format", po::value<std::string>(&r.a_format),
        "instructions: the format plugin A's values are rounded to (required)")(
        "b-format", po::value<std::string>(&r.b_format),
        "instructions: the format plugin B's values are rounded to (required)")(
        "rounding", po::value<std::string>(&t.rounding)->default_value("toward-zero"),
        "the model: nearest | toward-zero")("mma-depth",
                                            po::value<std::string>(&t.depth)->default_value("32"),
                                            "the model: G, elements per exactly summed chunk")(
        "rows", po::value<std::string>(&t.rows)->default_value("256"), "M: rows of A and C")(
        "cols", po::value<std::string>(&t.cols)->default_value("256"), "N: columns of B and C")(
        "seed", po::value<std::string>(&t.seed)->default_value("0"), "the inputs' seed")(
        "distribution", po::value<std::string>(&t.inputs)->default_value("normal"),
        "normal: N(0,1) | uniform: [0, 1) | fp8-e4m3: N(0,1) rounded to E4M3")(
        "param", po::value<std::vector<std::string>>(&t.params),
        "KEY=VALUE accumulator plugin parameter (repeatable)")(
        "csv", "a table over K = 256, 512, ... up to --k instead")(
        "threads", po::value<std::string>(&t.threads)->default_value("0"),
        "threads for the product, 0 for every core (the same result for any)")(
        "save", po::value<std::string>(&r.save),
        "write a.npy, b.npy and c.npy (the product at --k) into DIR");
}

// Whether --accumulator names an accumulator plugin (its instructions); an unknown name is left
// to the model's path, whose error names the format plugins.
bool names_instructions(registry& reg, const std::string& name) {
    try {
        return reg.kind_of(name) == ALTGRAD_KIND_ACCUMULATOR;
    } catch (const error&) {
        return false;
    }
}

// The options of one path that the other path has no use for: a usage error naming the first.
void check_path(const po::variables_map& vm, const gemm_request& r) {
    if (r.instructions) {
        for (const char* required : {"a-format", "b-format"})
            if (!vm.count(required))
                throw usage_error("gemm: --" + std::string(required) +
                                  " is required with the accumulator plugin " + r.format +
                                  " (e.g. --a-format e4m3 --b-format e4m3)");
        for (const char* model : {"rounding", "mma-depth"})
            if (!vm[model].defaulted())
                throw usage_error("gemm: --" + std::string(model) + ": the accumulation model's; " +
                                  r.format + " is an accumulator plugin, whose instruction fixes it");
        return;
    }
    if (!vm.count("promote-every"))
        throw usage_error(
            "gemm: --promote-every is required (e.g. gemm --k 4096 --accumulator fp16 "
            "--promote-every 128)");
    for (const char* operand : {"a-format", "b-format"})
        if (vm.count(operand))
            throw usage_error("gemm: --" + std::string(operand) +
                              ": only with an accumulator plugin (an "
                              "instruction); " +
                              r.format + " is not one");
}

// The checked request; a usage error naming the first bad option.
void check_request(const gemm_texts& t, const po::variables_map& vm, gemm_request& r) {
    check_path(vm, r);
    constexpr uint64_t kMaxElements = uint64_t{1} << 28;  // 1 GiB of float32 per operand
    r.k = count_option("k", t.k, 1, uint64_t{1} << 24);
    r.rows = count_option("rows", t.rows, 1, uint64_t{1} << 16);
    r.cols = count_option("cols", t.cols, 1, uint64_t{1} << 16);
    if (uint64_t{r.rows} * r.k > kMaxElements || uint64_t{r.cols} * r.k > kMaxElements)
        throw usage_error("gemm: --rows " + t.rows + " --cols " + t.cols + " --k " + t.k +
                          ": an operand of more than " + std::to_string(kMaxElements) + " elements");
    if (vm.count("promote-every"))
        r.spec.promote_every = count_option("promote-every", t.promote, 0, uint64_t{1} << 62);
    r.spec.mma_depth = count_option("mma-depth", t.depth, 1, quant::kMaxMmaDepth);
    r.seed = unsigned_option("gemm", "seed", t.seed);
    r.threads = static_cast<unsigned>(count_option("threads", t.threads, 0, 1024));
    const std::optional<altgrad_rounding> rounding = rounding_names().value(t.rounding);
    if (!rounding || *rounding == ALTGRAD_ROUND_STOCHASTIC)
        throw usage_error("gemm: --rounding \"" + t.rounding + "\": expected nearest or toward-zero");
    r.spec.rounding = *rounding;
    const std::optional<distribution> inputs = distribution_names().value(t.inputs);
    if (!inputs)
        throw usage_error("gemm: --distribution \"" + t.inputs + "\": expected one of " +
                          distribution_names().list());
    r.inputs = *inputs;
    try {
        r.params = parse_param_assignments(t.params);
    } catch (const usage_error& e) {
        throw usage_error(std::string("gemm: ") + e.what());
    }
    r.csv = vm.count("csv") > 0;
}

}  // namespace

int gemm_command(const context& ctx, const args& a) {
    po::options_description options("gemm options");
    gemm_texts texts;
    gemm_request r;
    add_gemm_options(options, texts, r);
    const command_help help{
        "gemm",
        {"[--plugins DIR] gemm --k K --accumulator FORMAT --promote-every N",
         "             [--rounding nearest|toward-zero] [--mma-depth G] [--rows M] [--cols N] [--seed S]",
         "             [--distribution normal|uniform|fp8-e4m3] [--param KEY=VALUE]... [--csv]",
         "             [--threads T] [--save DIR]",
         "[--plugins DIR] gemm --k K --accumulator INSTRUCTION --a-format FORMAT --b-format FORMAT",
         "             [--promote-every N] [--rows M] [--cols N] [--seed S] [--distribution ...]",
         "             [--param KEY=VALUE]... [--csv] [--threads T] [--save DIR]"},
        "altgrad-host gemm --k 4096 --accumulator fp16 --promote-every 128",
        {{0, "the errors were printed"}, {1, "an error: the plugin failed, --save could not write"}}};
    po::variables_map vm;
    if (!parse_subcommand(help, options, {}, {}, a, vm)) return 0;
    for (const char* required : {"k", "accumulator"})
        if (!vm.count(required))
            throw usage_error(std::string("gemm: --") + required +
                              " is required (e.g. gemm --k 4096 --accumulator fp16 --promote-every 128)");
    registry reg(ctx.plugins);
    r.instructions = names_instructions(reg, r.format);
    check_request(texts, vm, r);
    return run_gemm(reg, r);
}

}  // namespace altgrad::host::cli
