// The experiment config of `altgrad-host run` (TOML, documented key by key in
// docs/config.md): read, overridden from the command line (--set KEY=VALUE),
// validated, defaults filled in; written back out fully resolved by
// config/writer.hpp.
//
// Every field is named exactly as its key and starts at its default, so a
// default-constructed run_config is the default config (with an empty name:
// the loaders fill in the config file's stem).
//
// Errors: every problem throws host::error (util/error.hpp) with one line that
// names the file and the dotted key and says what was expected, e.g.
//   configs/x.toml: key 'training.max_steps': expected an integer 1..1000000000, got -5
//   configs/x.toml: key 'training.max_stesp': unknown key (a typo?); did you mean 'training.max_steps'?
//   configs/x.toml: --set model.activation=relu: key 'model.activation': expected one of gelu, swiglu, got
//   "relu"
// (every choice is checked against its name table, which also lists the names).
//   configs/x.toml:7: not valid TOML: ...
// Not checked here (the trainer checks them against the data and the plugin
// folder): that data.path exists, model.vocab_size / data.vocab_size against
// the data, and that the named format plugins exist.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <altgrad/altgrad.h>

#include "plugins/params.hpp"
#include "quant/vocabulary.hpp"
#include "util/name_table.hpp"

namespace altgrad::host::config {

// The config's choices, enums from the moment they are parsed. Their names
// (the TOML values) are in the tables below; rounding and overflow are the
// ABI's own enums, named by util/abi_names.hpp.
enum class activation_function { gelu, swiglu };
enum class data_format { auto_detect, text, nanogpt };  // auto_detect: a folder holding train.bin is nanogpt
enum class lr_schedule_kind { cosine, constant };
enum class compute_device { cpu, cuda };
// The c10d backend of a distributed run: auto is gloo on the CPU, nccl with device "cuda".
enum class distributed_backend { automatic, gloo, nccl };
// The kernels' terms, which quant/ owns (quant/vocabulary.hpp): per-tensor
// scaling, granularity, the scale rules.
using quant::amax_compute_kind;
using quant::first_scale_kind;
using quant::granularity_kind;
using quant::scaling_mode;
using quant::tensor_scale_kind;
using scale_rule_kind = quant::scale_rule;
// The three matrix products of a linear layer (x: input [T, in], W: weight
// [out, in], dy: output gradient [T, out]): forward y = x·Wᵀ, input gradient
// dx = dy·W, weight gradient dW = dyᵀ·x. The per-product selection of the
// config ([quantization.forward], ...) is indexed by it.
enum class product_kind { forward, input_gradient, weight_gradient };
constexpr size_t kProducts = 3;
// The tensors of a linear layer as operands of its products: the input x
// [T, in], the weight W [out, in], the output gradient dy [T, out]. Each
// enters two products, so each is quantized for two uses: its first use
// (W and x in forward, dy in input_gradient: the role's settings, the
// copy the metrics call the tensor) and its second (W in input_gradient,
// x and dy in weight_gradient: TransformerEngine's columnwise copy).
enum class operand_kind { x, w, dy };
constexpr size_t kOperands = 3;
// A product's operands (A, B) of A·B: forward {x, w}, input_gradient {dy, w},
// weight_gradient {dy, x}.
std::array<operand_kind, 2> operands_of(product_kind p);
// The product of an operand's first use.
product_kind first_use_of(operand_kind o);
// The role whose keys an operand's settings derive from: "weight", "activation", "gradient".
const char* role_of(operand_kind o);
// What an operand's second copy is quantized from: the unquantized tensor
// (the default), or its first copy as quantized and dequantized (TE's
// columnwise_source, "rowwise").
enum class copy_source { unquantized, rowwise };

const name_table<activation_function>& activation_names();  // gelu, swiglu
const name_table<data_format>& data_format_names();         // auto, text, nanogpt
const name_table<lr_schedule_kind>& lr_schedule_names();    // cosine, constant
const name_table<compute_device>& device_names();           // cpu, cuda
const name_table<distributed_backend>& backend_names();     // auto, gloo, nccl
using quant::amax_compute_names;
using quant::first_scale_names;
using quant::granularity_names;
using quant::scale_rule_names;
using quant::scaling_names;
using quant::tensor_scale_names;
const name_table<product_kind>& product_names();     // forward, input_gradient, weight_gradient
const name_table<operand_kind>& operand_names();     // x, w, dy
const name_table<copy_source>& copy_source_names();  // unquantized, rowwise

struct model_config {
    int64_t n_layer = 4;      // 1..64
    int64_t n_head = 4;       // 1..64
    int64_t n_embd = 128;     // 8..4096, divisible by n_head
    int64_t block_size = 64;  // 2..8192 (context length)
    double dropout = 0.0;     // [0, 1)
    bool bias = true;         // biases in Linear and LayerNorm
    activation_function activation = activation_function::gelu;
    int64_t vocab_size = 0;  // 0..65535; 0 = from the data
};

struct data_config {
    std::string path = "/usr/share/games/fortunes";  // text file, folder of text files, or nanoGPT folder
    data_format format = data_format::auto_detect;
    double val_fraction = 0.1;  // (0, 0.5]
    int64_t vocab_size = 0;     // 0..65535; 0 = from the data
};

struct training_config {
    int64_t max_steps = 500;      // 1..1e9
    int64_t batch_size = 12;      // 1..65536: rows of one forward (a micro-batch)
    int64_t grad_accum = 1;       // 1..65536: micro-batches per step, their gradients summed
    double learning_rate = 6e-4;  // (0, 10]
    double min_lr = 6e-5;         // [0, 10], <= learning_rate
    int64_t warmup_steps = 50;    // 0..1e9, <= max_steps
    lr_schedule_kind lr_schedule = lr_schedule_kind::cosine;
    double weight_decay = 0.1;   // [0, 10]
    double beta1 = 0.9;          // [0, 1)
    double beta2 = 0.95;         // [0, 1)
    double grad_clip = 1.0;      // [0, 1e6]; 0 = off
    int64_t seed = 42;           // 0..2^63-1
    int64_t eval_interval = 50;  // 1..1e9
    int64_t eval_batches = 10;   // 1..1e6
    int64_t log_interval = 10;   // 1..1e9
    compute_device device = compute_device::cpu;
    int64_t threads = 1;  // 0..1024; 0 = all cores
};

// [training.distributed]: how the ranks of a data-parallel run talk
// (docs/distributed.md). Where the ranks are comes from the launcher's
// environment (run --nproc, torchrun, srun), not from the config.
struct distributed_config {
    distributed_backend backend = distributed_backend::automatic;
    int64_t timeout_s = 300;  // 1..86400: how long a rank waits for the others before the run stops
};

// Parameters for plugins, as given: plugin name -> key -> value text (a TOML
// string's contents, or the TOML text of a number or boolean). Checked against
// each plugin's manifest when the trainer loads it, not here.
using plugin_params = std::map<std::string, host::given_params>;

// How one operand of one product of one layer is quantized, every key
// resolved: the one shape a per-operand setting has from the resolver
// (config/recipe.hpp) to the kernels. resolve() builds it from the least
// specific level to the most: quantization's keys, the role's table
// ([quantization.weight]), [quantization.PRODUCT] OPERAND = {...}, then the
// first rule matching the layer (its formats and scaling keys, then its
// PRODUCT = { OPERAND = {...} }), each level an operand_overlay.
struct operand_spec {
    std::string format;  // a format plugin name; "fp32": not quantized
    altgrad_rounding rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    // One scale per tensor (quantization.scaling and the amax_* keys), per
    // row of the consuming product's reduction dimension, or per block of
    // block_size consecutive elements along it.
    granularity_kind granularity = granularity_kind::tensor;
    int64_t block_size = 32;  // 1..1048576 (granularity block)
    // Granularity block: rows per block. 1: blocks of block_size along a
    // row (1xN); R > 1: tiles of R rows by block_size columns (RxC, e.g.
    // 16x16), so a weight's two uses see one quantized tensor.
    int64_t block_rows = 1;  // 1..1048576
    // Row and block: the decode scales' own format ("fp32", "pow2" or a
    // format plugin's name) and the rule that derives them from each block's
    // amax (quant/vocabulary.hpp).
    std::string scale_format = "pow2";
    scale_rule_kind scale_rule = scale_rule_kind::mx_floor;
    // A constant c the operand is multiplied by before rounding and divided
    // by after: element x becomes q(x*s*c)/(s*c), s its scale (Tseng et
    // al.'s 3/4, so OCP's floor-rule blocks do not clip in E2M1).
    double pre_scale = 1.0;  // (0, 1e6]
    // What a second use is quantized from: the unquantized tensor, or its
    // first copy as quantized and dequantized.
    copy_source source = copy_source::unquantized;
    // The most specific key or table that set something, for errors: the format's key
    // ("quantization.weight_format") unless a table overrides it ("quantization.weight",
    // "quantization.rules[1]").
    std::string key;
    // The key that gave block_rows ("quantization.weight.block_rows"): a tile
    // that does not divide its tensor is that key's error, not the table's.
    std::string tile_key = "quantization.block_rows";
};

// What one level of the config says of an operand: [quantization.forward]
// x = {...}, a rule's forward = { x = {...} }, and (scaling keys only) a role
// table [quantization.weight] or a rule's own granularity, block_size, ...
// Each key unset (nullopt) is decided by the level above. Its keys are
// operand_spec's, one row each in the schema's overlay table
// (config/schema.hpp, overlay_fields), which reads, writes, compares and
// applies them: a new operand key is a field here, one in operand_spec and
// one row there.
struct operand_overlay {
    std::optional<std::string> format;
    std::optional<altgrad_rounding> rounding;
    std::optional<granularity_kind> granularity;
    std::optional<int64_t> block_size;
    std::optional<int64_t> block_rows;
    std::optional<std::string> scale_format;
    std::optional<scale_rule_kind> scale_rule;
    std::optional<double> pre_scale;
    std::optional<copy_source> source;  // second uses only
    bool empty() const;
    // Sets in `s` each key given here.
    void apply_to(operand_spec& s) const;
};
bool operator==(const operand_overlay& a, const operand_overlay& b);
inline bool operator!=(const operand_overlay& a, const operand_overlay& b) { return !(a == b); }

// A product's accumulator (docs/accumulation.md), one of two kinds. The
// chunked model (`format`): the reduction is summed in chunks of mma_depth
// elements, each chunk exactly, into an accumulator of format `format`
// rounded with `rounding` after each chunk. A GPU instruction
// (`instruction`, an accumulator plugin such as sm90_wgmma_fp8): the
// instructions chained along K as a kernel runs them, the plugin deciding
// depth and rounding. Either is added into a float32 total every
// promote_every elements (0: never). Both empty is "none": the plain float32
// product (a rule's way to take a layer out).
struct accumulator_config {
    std::string format;         // format plugin name; empty: not the chunked model
    std::string instruction;    // accumulator plugin name; empty: not an instruction
    host::given_params params;  // the plugin's parameters; empty: [quantization.params.FORMAT]
    altgrad_rounding rounding = ALTGRAD_ROUND_TOWARD_ZERO;  // or ALTGRAD_ROUND_NEAREST_EVEN (the model's)
    int64_t mma_depth = 32;                                 // 1..16777216 (the model's)
    int64_t promote_every = 0;                              // 0..1e9
    bool modelled() const { return !format.empty() || !instruction.empty(); }
};
bool operator==(const accumulator_config& a, const accumulator_config& b);

// A product's transform (docs/transforms.md): a transform plugin applied
// along the reduction dimension to both operands before they are quantized,
// so the exact product is unchanged and only the rounding sees it. An empty
// `name` is "none" (a rule's way to take a layer out).
struct transform_config {
    std::string name;           // transform plugin name; empty: none
    host::given_params params;  // the plugin's parameters
    bool applied() const { return !name.empty(); }
};
bool operator==(const transform_config& a, const transform_config& b);

// What the config says of one product ([quantization.forward], a rule's
// forward = {...}); nullopt or empty: not said here, the level above decides.
struct product_config {
    std::optional<accumulator_config> accumulator;
    std::optional<transform_config> transform;
    std::array<operand_overlay, kOperands> operands;  // by operand_kind; only the product's two
    bool empty() const {
        return !accumulator && !transform &&
               std::all_of(operands.begin(), operands.end(),
                           [](const operand_overlay& o) { return o.empty(); });
    }
};
bool operator==(const product_config& a, const product_config& b);
using product_configs = std::array<product_config, kProducts>;  // by product_kind

// One [[quantization.rules]] entry. The file's `format` key is folded in at
// load time: it fills whichever of weight/activation/gradient the rule does
// not set itself (gradient: the layer's output gradient, as gradient_format). A direction left empty
// (nullopt) takes the global format.
struct quantization_rule {
    // Which layers the rule takes: exactly one of a name pattern, the last N
    // linear layers in the model's order, or the last fraction f of them
    // (ceil(f * count)): the last two hold for any network, so a recipe that
    // keeps its last layers in BF16 applies to a user's model as to the GPT.
    std::string pattern;  // glob over layer names: '*' any run (dots too), '?' one character; "" = not this
    std::optional<std::string> weight, activation, gradient;
    operand_overlay scaling;      // its scaling keys (granularity, block_size, ...): every role of its layers
    product_configs products;     // forward = {...}, input_gradient = {...}, weight_gradient = {...}
    std::optional<int64_t> last;  // 1..1000000: the last N linear layers
    std::optional<double> last_fraction;  // (0, 1]: the last ceil(f * count) of them
};

// [quantization.communication]: what a data-parallel step sends between
// ranks, quantized as MS-AMP's FP8 gradient all-reduce sends it
// (docs/distributed.md, "Quantized communication"). Each micro-batch's
// gradient of each parameter is quantized through a format plugin before it
// is added to the step's sum; the sum stays float32 in micro-batch order, so
// one process with grad_accum = N quantizes exactly as N ranks do.
struct communication_config {
    // gradients = {...}: an operand's keys but `source`, resolved from
    // quantization's global keys (rounding: backward_rounding, as a
    // gradient's). Empty, or format "fp32": sent as computed (the default).
    operand_overlay gradients;
    // gradients.scaling: their per-tensor scaling; unset: quantization.scaling.
    std::optional<scaling_mode> scaling;
    bool quantizes() const { return gradients.format && *gradients.format != "fp32"; }
};
bool operator==(const communication_config& a, const communication_config& b);

struct quantization_config {
    bool enabled = true;
    std::string weight_format = "e5m2";      // format plugin names, [a-z0-9][a-z0-9_]*
    std::string activation_format = "e5m2";  // each quantized layer's input
    std::string gradient_format = "e5m2";    // each quantized layer's output gradient (the gradient flowing
                                             // back into its output), not the weights' gradients
    altgrad_rounding forward_rounding = ALTGRAD_ROUND_NEAREST_EVEN;  // weights and activations
    altgrad_rounding backward_rounding = ALTGRAD_ROUND_STOCHASTIC;   // output gradients
    altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE;
    // 1..32: stochastic rounding uses the top sr_bits of each element's 32
    // random bits (ABI 1.4 random_bits); 32 is full StochasticA.
    int64_t sr_bits = 32;
    scaling_mode scaling = scaling_mode::delayed;
    int64_t amax_history_len = 16;  // 1..1024
    amax_compute_kind amax_compute = amax_compute_kind::max;
    int64_t margin = 0;                                        // 0..64; scale = 2^-margin * format_max / amax
    tensor_scale_kind tensor_scale = tensor_scale_kind::pow2;  // that scale's values
    first_scale_kind first_scale = first_scale_kind::amax;     // delayed scaling's first scale
    bool shadow_weights = true;                                // FP32 master weights
    int64_t diagnostic_interval = 50;                          // 1..1e9
    // The scaling of every quantized tensor (operand_spec says what each
    // key is), unless a role table or a rule says otherwise.
    granularity_kind granularity = granularity_kind::tensor;
    int64_t block_size = 32;            // 1..1048576
    int64_t block_rows = 1;             // 1..1048576
    std::string scale_format = "pow2";  // "fp32", "pow2" or a format plugin name
    scale_rule_kind scale_rule = scale_rule_kind::mx_floor;
    // [quantization.weight] etc.: their scaling keys only.
    operand_overlay weight_scaling, activation_scaling, gradient_scaling;
    product_configs products;  // [quantization.forward], [quantization.input_gradient], [...weight_gradient]
    communication_config communication;    // [quantization.communication]
    std::vector<quantization_rule> rules;  // ordered; the first match wins
    // [quantization.params.NAME]: parameters of format plugin NAME, which
    // some format or scale_format key of this config must name.
    plugin_params params;
};

// [stability]: the intervention plugins, asked every step in this order.
struct stability_config {
    std::vector<std::string> interventions;  // plugin names
    plugin_params params;                    // [stability.params.NAME]; NAME must be enabled
};

// [diagnostics]: the diagnostic plugins, run every quantization.diagnostic_interval steps.
struct diagnostics_config {
    std::vector<std::string> plugins;  // plugin names
    plugin_params params;              // [diagnostics.params.NAME]; NAME must be enabled
};

// [failure]: when a run counts as collapsed (the seeds' thresholds). A rate
// condition collapses the run once it has held at `patience` consecutive
// measurements; the first of them is the step the evidence appeared.
struct failure_config {
    double bit_stall = 0.5;            // [0, 1] weight bit-stall rate (all weights, by element)
    double min_progress = 0.01;        // [0, 1] relative loss improvement per diagnostic interval
                                       // below which a high bit-stall rate counts as a stall
    double overflow = 0.1;             // [0, 1] overflow rate of the worst quantized tensor
    double vanishing = 0.7;            // [0, 1] fraction of near-zero parameter-gradient elements
    double near_zero = 1e-8;           // [0, 1] |g| at or below which a gradient element is near zero
    double early_stop = 0.1;           // [0, 1] a run that stops before this fraction of max_steps
    int64_t patience = 3;              // 1..1e6 consecutive measurements
    int64_t max_nonfinite_steps = 10;  // 1..1e6 consecutive non-finite steps tolerated while an
                                       // intervention may act (none enabled: the first stops the run)
};

struct output_config {
    std::string dir = "runs";
    int64_t checkpoint_interval = 100;  // 1..1e9
    int64_t keep_checkpoints = 2;       // 1..1000
};

struct run_config {
    std::string name;  // default: the config file's stem
    model_config model;
    data_config data;
    training_config training;
    distributed_config distributed;
    quantization_config quantization;
    stability_config stability;
    diagnostics_config diagnostics;
    failure_config failure;
    output_config output;
    std::filesystem::path source;  // the file it was read from (not compared by ==, not written by to_toml)
    std::vector<std::string>
        notes;  // defaults the reader adjusted, for the run's log (not compared, not written)
};

// Reads `file`, applies `overrides` in order ("training.max_steps=50"; the value
// is parsed as a TOML value (50, 6e-4, true, "e4m3"); a value that is not valid
// TOML, like e4m3 or /data/x, is taken as a string, and so is any value given
// to a string key), validates, fills in defaults. quantization.rules is
// replaced as a whole list (a TOML array), never key by key. Throws
// host::error (usage_error for an override without '=').
run_config load_config(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});

// The same from text; `source_name` stands for the file in errors, gives the
// default name (its stem) and becomes run_config::source.
run_config parse_config(const std::string& toml_text, const std::string& source_name,
                        const std::vector<std::string>& overrides = {});

// The same for a model other than the trainer's (altgrad.torch.quantize_model's
// nn.Linear layers): the rules must reach `layers` instead of the [model]'s.
run_config parse_config_for_layers(const std::string& toml_text, const std::string& source_name,
                                   const std::vector<std::string>& layers,
                                   const std::vector<std::string>& overrides = {});

// Every format name `q` holds (the three format keys, every scale_format and
// rule format, the [quantization.params.NAME] names, "fp32" and "pow2"
// included) replaced by rename(key, name), `key` saying where it stands
// ("quantization.weight_format", "quantization.rules[2]"): the trainer gives
// plugins' aliases their plugin's name this way, so "float32" is "fp32"
// (float32 itself), and names an unknown format's key.
void rename_formats(
    quantization_config& q,
    const std::function<std::string(const std::string& key, const std::string& name)>& rename);

// Everything but `source`.
bool operator==(const quantization_rule& a, const quantization_rule& b);
bool operator==(const run_config& a, const run_config& b);
inline bool operator!=(const run_config& a, const run_config& b) { return !(a == b); }

// ---- Per-layer formats (for the trainer; the same semantics the loader checks) ----

// Whole-name glob: '*' matches any run of characters (dots included, empty too),
// '?' exactly one character; everything else matches itself.
bool pattern_matches(std::string_view pattern, std::string_view name);

// How many of `count` layers "the last fraction f" takes: ceil(f * count), of
// the decimal f as written (0.1 of 10 is 1; 0.15 of 17 is 3).
size_t last_fraction_count(double fraction, size_t count);

// Whether rule `r` takes the layer named `layer`, at position `index` of the
// model's `count` linear layers in order (its pattern, or its place among the last).
bool rule_selects(const quantization_rule& r, std::string_view layer, size_t index, size_t count);

// The key that names a rule's layers: "last", "last_fraction" or "pattern".
const char* rule_selector_key(const quantization_rule& r);
// How a rule names its layers, for messages: "\"blocks.3.mlp.*\"", "last = 3", "last_fraction = 0.15".
std::string rule_selector(const quantization_rule& r);

// The quantized layers of the model (its linear layers), in model order, as
// rules see them (no ".weight"): per block N: blocks.N.attn.qkv,
// blocks.N.attn.proj, blocks.N.mlp.fc, blocks.N.mlp.gate (swiglu only),
// blocks.N.mlp.proj; then lm_head (tied to the token embedding). Embeddings
// and LayerNorms stay float32 (their weights are quantized only through the
// tied head). The loader rejects a rule that matches none of these, or whose
// every match is taken by an earlier rule. The names are the model's own
// (config/layer_names.hpp, the one definition both use).
std::vector<std::string> layer_names(const model_config& model);

}  // namespace altgrad::host::config
