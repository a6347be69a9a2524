// Running the plan: quantizing a site's tensor (per tensor, per row or per
// block, on the CPU or a GPU) and the quantized linear layer's autograd
// function; building it is quant_plan_build.cpp.
#include "train/quant_plan.hpp"

#include <ATen/Parallel.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <vector>

#include "quant/instruction_product.hpp"
#include "quant/seeds.hpp"
#include "util/error.hpp"

namespace altgrad::host::train {

namespace {

// The stochastic-rounding seed of a weight stored in its format at this step (quant/seeds.hpp).
uint64_t seed_of(const quant_plan& plan, uint64_t stream) {
    return quant::seed_of(plan.seed, plan.step, stream);
}

// The stochastic-rounding seed of an operand's copy, in micro-batch `micro`
// of `step`, of the layer whose sites start at s (a weight's: the step's).
uint64_t copy_seed(const quant_plan& plan, uint64_t step, uint64_t micro, size_t s, quant::operand_role role,
                   bool second_copy = false) {
    const uint64_t key = role == quant::operand_role::weight ? step : quant::micro_batch_key(step, micro);
    return quant::seed_of(plan.seed, key,
                          quant::operand_stream(s / 3, role, plan.second_uses.size(), second_copy));
}

// q(in*s)/s of a float32 tensor into out (same size and device; out may be
// in) through the format plugin. CPU: chunked over LibTorch's threads; chunks
// carry their offset, so results do not depend on the thread count. With
// `amax`, the amax of in is taken in the same pass (quant::quantize_taking_amax:
// for a scale known before the tensor). CUDA: one call on the device's
// default stream, whose counts make it wait for the result.
quantize_counts quantize_tensor(const format_handle& format, const torch::Tensor& in, torch::Tensor& out,
                                quantize_options o, float* amax = nullptr) {
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = in.numel();
    if (in.device().is_cuda()) {
        o.memory = ALTGRAD_MEMORY_CUDA;
        o.device_index = in.device().index();
        return format.quantize(src, dst, static_cast<size_t>(n), o);
    }
    std::atomic<uint64_t> overflow{0}, underflow{0};
    std::mutex m;
    if (amax) *amax = 0.0f;
    at::parallel_for(0, n, 1 << 15, [&](int64_t begin, int64_t end) {
        auto quantize = [&](size_t first, size_t count) {
            quantize_options piece = o;
            piece.offset = static_cast<uint64_t>(begin) + first;
            const quantize_counts c = format.quantize(src + begin + first, dst + begin + first, count, piece);
            overflow += c.overflow;
            underflow += c.underflow;
        };
        const size_t count = static_cast<size_t>(end - begin);
        if (!amax) return quantize(0, count);
        const float chunk_amax = quant::quantize_taking_amax(src + begin, count, quantize);
        const std::lock_guard<std::mutex> lock(m);
        *amax = quant::larger_amax(*amax, chunk_amax);
    });
    return {overflow, underflow};
}

// The call's options at scale s: s times the site's pre-scale (block
// scales are multiplied where they are derived).
quantize_options options_of(const quant_site& site, float scale) {
    quantize_options o;
    o.rounding = site.spec.rounding;
    o.overflow = site.overflow;
    o.scale = scale * site.pre_scale();
    o.random_bits = site.random_bits;
    return o;
}

// A tensor the site's format plugin can take: float32, on the CPU, or on a
// GPU when the plugin has a CUDA implementation.
void check_quantizable(const torch::Tensor& x, const quant_site& site) {
    if (x.scalar_type() != torch::kFloat32)
        throw error("quantize " + site.name() + ": only float32 tensors are supported");
    if (x.device().is_cuda() && !site.format->accepts(ALTGRAD_MEMORY_CUDA))
        throw error("quantize " + site.name() + ": format plugin '" + site.format->name() +
                    "' has no CUDA implementation (build it with ALTGRAD_CUDA=ON, or train on cpu)");
    if (!x.device().is_cpu() && !x.device().is_cuda())
        throw error("quantize " + site.name() + ": tensors on " + x.device().str() + " are not supported");
}

// The block length along rows of k elements: the site's block size, at most
// one row (a row shorter than a block is one short block), at least 1.
int64_t block_length(int64_t k, const quant_site& site) {
    return std::max<int64_t>(
        1, std::min<int64_t>(k, static_cast<int64_t>(std::min<size_t>(site.block_length(), INT64_MAX))));
}

// How x (float32, contiguous) splits into blocks: rows of k elements (the
// last dimension), `block` elements per block, ceil(k / block) per row, a
// row's last one possibly short.
struct block_layout {
    int64_t n = 0, k = 1, rows = 0, block = 1, per_row = 0;
    block_layout(const torch::Tensor& x, const quant_site& site)
        : n(x.numel()),
          k(x.dim() ? x.size(-1) : 1),
          rows(k ? n / k : 0),
          block(block_length(k, site)),
          per_row((k + block - 1) / block) {}
    int64_t blocks() const { return rows * per_row; }
};

// LibTorch's threads (training.threads) for quant::quantize_blocked's work on the CPU.
void over_torch_threads(size_t units, size_t grain, const std::function<void(size_t, size_t)>& work) {
    at::parallel_for(
        0, static_cast<int64_t>(units), static_cast<int64_t>(grain),
        [&](int64_t begin, int64_t end) { work(static_cast<size_t>(begin), static_cast<size_t>(end)); });
}

// On the CPU: the trainer's block quantization is the host's one, quant::quantize_blocked (the CLI's
// and Python's), over LibTorch's threads: every block's (or tile's) scale by the site's recipe, and,
// given a format, q(x*s*c)/(s*c) into dst (may be x); `scales` (given) receives the scales s.
quant::blocked_quantize_result quantize_blocks_cpu(const float* src, float* dst, const block_layout& l,
                                                   const quant_site& site, const format_handle* format,
                                                   const quantize_options& o, float* scales = nullptr) {
    return quant::quantize_blocked(format, src, dst, static_cast<size_t>(l.rows), static_cast<size_t>(l.k),
                                   {site.tile_rows(), static_cast<size_t>(l.block)}, site.blocks, o,
                                   site.pre_scale(), over_torch_threads, scales);
}

// On a GPU: the blocks' amaxes on the device, the rule on the host (one
// small copy each way); the scales back on the device.
struct block_scales_of {
    torch::Tensor scales;
    quant::block_scale_stats stats;
};
block_scales_of derive_block_scales_cuda(const torch::Tensor& x, const quant_site& site,
                                         const block_layout& l) {
    torch::Tensor padded = x.reshape({l.rows, l.k});
    if (l.per_row * l.block != l.k) padded = torch::constant_pad_nd(padded, {0, l.per_row * l.block - l.k});
    torch::Tensor amax =
        padded.reshape({l.rows, l.per_row, l.block}).abs().amax(-1).to(torch::kCPU).contiguous();
    const double tensor_amax = amax.numel() ? amax.max().item<double>() : 0.0;  // NaN if a block's is
    block_scales_of out;
    out.stats = quant::scales_from_amaxes(amax.data_ptr<float>(), static_cast<size_t>(amax.numel()),
                                          site.blocks, tensor_amax);
    out.stats.amax = tensor_amax;
    out.scales = amax.to(x.device());
    return out;
}

// Tiles (block_rows > 1) must divide x as [rows, K]: an error naming the site's key otherwise.
void check_tiles(const quant_site& site, const block_layout& l) {
    const int64_t tile_rows = static_cast<int64_t>(site.tile_rows());
    if (tile_rows > 1 && (l.k % l.block != 0 || l.rows % tile_rows != 0))
        throw error(site.tile_key() + ": tiles of " + std::to_string(tile_rows) + "x" +
                    std::to_string(l.block) + " do not divide " + site.name() + " as [" +
                    std::to_string(l.rows) + ", " + std::to_string(l.k) +
                    "] (rows by its product's reduction dimension)");
}

// On a GPU: the scales of R x C tiles of x as [rows, K] (the site's
// block_rows by its block length), one per tile, repeated for each of its
// rows: the block scales of a call with blocks of C along the rows.
block_scales_of tile_scales_cuda(const torch::Tensor& x, const quant_site& site, const block_layout& l) {
    const int64_t tile_rows = static_cast<int64_t>(site.tile_rows());
    check_tiles(site, l);
    // |x| per tile; amax propagates a NaN, as block_amaxes does.
    torch::Tensor amax = x.reshape({l.rows / tile_rows, tile_rows, l.per_row, l.block})
                             .abs()
                             .amax({1, 3})
                             .to(torch::kCPU)
                             .contiguous();
    const double tensor_amax = amax.numel() ? amax.max().item<double>() : 0.0;
    block_scales_of out;
    out.stats = quant::scales_from_amaxes(amax.data_ptr<float>(), static_cast<size_t>(amax.numel()),
                                          site.blocks, tensor_amax);
    out.stats.amax = tensor_amax;
    out.scales = amax.repeat_interleave(tile_rows, 0).contiguous().to(x.device());
    return out;
}

// q(x*s)/s with one scale per block along x's rows (or per tile), into out (may be x);
// on the CPU, `scales` (given) receives every block's s (quantize_blocked's).
quantize_counts quantize_blocks(const format_handle& format, const torch::Tensor& x, torch::Tensor& out,
                                quantize_options o, const quant_site& site, quant::block_scale_stats* stats,
                                float* scales = nullptr) {
    const block_layout l(x, site);
    if (l.n == 0 || l.k == 0) return {};
    check_tiles(site, l);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    if (!x.device().is_cuda()) {
        const quant::blocked_quantize_result r = quantize_blocks_cpu(src, dst, l, site, &format, o, scales);
        if (stats) stats->add(r.stats);
        return r.counts;
    }
    o.block_size = static_cast<size_t>(l.block);
    o.scale = 1.0f;  // the block scales replace it (format.h); a block site keeps no per-tensor scale
    o.memory = ALTGRAD_MEMORY_CUDA;
    o.device_index = x.device().index();
    if (site.tile_rows() > 1) {
        block_scales_of t = tile_scales_cuda(x, site, l);
        if (stats) stats->add(t.stats);
        if (site.pre_scale() != 1.0f) t.scales.mul_(site.pre_scale());
        o.block_scales = t.scales.data_ptr<float>();
        return format.quantize(src, dst, static_cast<size_t>(l.n), o);
    }
    block_scales_of b = derive_block_scales_cuda(x, site, l);
    if (stats) stats->add(b.stats);
    if (site.pre_scale() != 1.0f) b.scales.mul_(site.pre_scale());
    const float* derived = b.scales.data_ptr<float>();
    // One call per segment: the whole tensor when rows are whole blocks, else each row.
    const int64_t segment = l.k % l.block == 0 ? l.n : l.k, per_segment = (segment + l.block - 1) / l.block;
    quantize_counts total;
    for (int64_t first = 0; first < l.n; first += segment) {
        o.offset = static_cast<uint64_t>(first);
        o.block_scales = derived + first / segment * per_segment;
        const quantize_counts c = format.quantize(src + first, dst + first, static_cast<size_t>(segment), o);
        total.overflow += c.overflow, total.underflow += c.underflow;
    }
    return total;
}

}  // namespace

torch::Tensor fake_quantize(const torch::Tensor& t, quant_site& site, const quant_plan& plan, uint64_t seed,
                            bool again) {
    if (plan.capture && site.role != ALTGRAD_TENSOR_WEIGHT && !again && !site.second_use())
        site.captured = t.detach();
    if (!site.format) return t;
    const torch::Tensor x = t.contiguous();
    check_quantizable(x, site);
    const int64_t n = x.numel();
    if (site.block_scaled()) {
        torch::Tensor out = torch::empty_like(x);
        quantize_options o = options_of(site, 1.0f);
        o.seed = seed;
        if (!again) site.block_stats = {}, site.overflow_count = 0, site.underflow_count = 0, site.count = 0;
        float* scales = nullptr;
        if (plan.keep_copy_scales && x.device().is_cpu()) {
            const block_layout l(x, site);
            site.copy_scales = torch::empty({l.rows, l.per_row}, x.options());
            scales = site.copy_scales.data_ptr<float>();
        }
        const quantize_counts c = quantize_blocks(*site.format, x, out, o, site, &site.block_stats, scales);
        site.overflow_count += c.overflow;
        site.underflow_count += c.underflow;
        site.count += static_cast<uint64_t>(n);
        site.amax = site.block_stats.amax;
        site.scale = NAN;  // no one scale: block_stats has their range
        return out;
    }
    if (again) {  // a second copy (transformed) at the first copy's scale: the history is the first's
        torch::Tensor out = torch::empty_like(x);
        quantize_options o = options_of(site, site.scale);
        o.seed = seed;
        const quantize_counts c = quantize_tensor(*site.format, x, out, o);
        site.overflow_count += c.overflow;
        site.underflow_count += c.underflow;
        site.count += static_cast<uint64_t>(n);
        return out;
    }
    // Delayed scaling with a history (and none) knows the scale before the
    // tensor: the amax it records is then taken in the quantize pass itself.
    const bool amax_in_pass = x.device().is_cpu() && !site.scaling.needs_current_amax();
    double amax = 0.0;
    if (n > 0 && !amax_in_pass) {  // one pass, no |x| temporary; NaN propagates as from abs().max()
        const auto [lo_t, hi_t] = torch::aminmax(x);
        const double lo = lo_t.item<double>(), hi = hi_t.item<double>();  // one read each (a GPU sync each)
        amax = std::isnan(lo) || std::isnan(hi) ? NAN : std::max(std::fabs(lo), std::fabs(hi));
    }
    const float scale = site.scaling.scale_for(amax);
    torch::Tensor out = torch::empty_like(x);
    quantize_options o = options_of(site, scale);
    o.seed = seed;
    float pass_amax = 0.0f;
    const quantize_counts c = quantize_tensor(*site.format, x, out, o, amax_in_pass ? &pass_amax : nullptr);
    if (amax_in_pass) amax = pass_amax;
    site.scaling.record(amax);
    site.amax = amax;
    site.scale = scale;
    site.overflow_count = c.overflow;
    site.underflow_count = c.underflow;
    site.count = static_cast<uint64_t>(n);
    return out;
}

torch::Tensor quantize_nearest(const torch::Tensor& t, const quant_site& site) {
    const torch::Tensor x = t.contiguous();
    torch::Tensor out = torch::empty_like(x);
    if (!site.format) return out.copy_(x);
    check_quantizable(x, site);
    quantize_options o;  // nearest-even, saturating: no seed needed
    o.scale = site.scale;
    if (site.block_scaled()) quantize_blocks(*site.format, x, out, o, site, nullptr);
    else quantize_tensor(*site.format, x, out, o);
    return out;
}

site_block_scales block_scales_for(const torch::Tensor& t, const quant_site& site) {
    const torch::Tensor x = t.contiguous();
    check_quantizable(x, site);
    const block_layout l(x, site);
    check_tiles(site, l);
    if (x.device().is_cuda())
        return {(site.tile_rows() > 1 ? tile_scales_cuda(x, site, l) : derive_block_scales_cuda(x, site, l))
                    .scales.to(torch::kCPU)
                    .contiguous(),
                static_cast<size_t>(l.block)};
    torch::Tensor scales = torch::empty({l.blocks()}, x.options());
    if (l.n > 0 && l.k > 0)
        quantize_blocks_cpu(x.data_ptr<float>(), nullptr, l, site, nullptr, {}, scales.data_ptr<float>());
    return {scales, static_cast<size_t>(l.block)};
}

void store_in_format(torch::Tensor& w, const quant_site& site, const quant_plan& plan, uint64_t stream) {
    if (!site.format) return;
    check_quantizable(w, site);
    if (!w.is_contiguous()) throw error("store " + site.name() + ": the parameter is not contiguous");
    quantize_options o = options_of(site, site.scale);
    o.seed = seed_of(plan, stream);
    if (site.block_scaled()) quantize_blocks(*site.format, w, w, o, site, nullptr);  // in place
    else quantize_tensor(*site.format, w, w, o);
}

namespace {

// How a 2-D float32 tensor is stored for quant::accumulator: as it is
// (row-major), as the transpose of a row-major tensor (a .t() view), or, if
// neither, copied into `keep` first.
struct stored_operand {
    const float* data;
    quant::operand_layout layout;
};
stored_operand stored(const torch::Tensor& t, torch::Tensor& keep) {
    if (t.is_contiguous()) return {t.data_ptr<float>(), quant::operand_layout::as_is};
    if (t.t().is_contiguous()) return {t.data_ptr<float>(), quant::operand_layout::transposed};
    keep = t.contiguous();
    return {keep.data_ptr<float>(), quant::operand_layout::as_is};
}

// The copy an operand of a product is, as an instruction needs it: the site
// that made it (its format; per tensor, its scale s: the copy is q(x*s)/s)
// and, block-scaled, the copy's encode scales per (row, block) with the
// block's length along the product's reduction dimension.
struct made_by {
    const quant_site* site = nullptr;  // null: a float32 operand
    torch::Tensor scales;              // block-scaled: s per row of the operand and block along K
    int64_t block = 0;                 // block-scaled: elements per block along K
    // The format's smallest normal exponent (the instruction's split); float32's without one.
    int32_t min_exponent() const { return site && site->format ? quant::min_exponent(*site->format) : -126; }
    float scale() const { return site && site->format ? site->scale : 1.0f; }
};

// A copy the site made, of rows of k elements, and its scales (`scales`:
// the site's last copy's when left out), if blocks.
made_by copy_by(const quant_site& site, int64_t k, const torch::Tensor& scales) {
    made_by m{&site};
    if (site.format && site.block_scaled() && scales.defined()) {
        m.scales = scales;
        m.block = static_cast<int64_t>(std::min<size_t>(site.block_length(), static_cast<size_t>(k)));
    }
    return m;
}
made_by copy_by(const quant_site& site, int64_t k) { return copy_by(site, k, site.copy_scales); }

// The first copy of a tiled tensor (tiles of R rows by C columns) read
// transposed, as a second use holds it: each tile's scale, now per row of
// the transpose and block of R along its rows.
made_by transposed_tiles(const made_by& first, int64_t tile_rows) {
    made_by m{first.site};
    if (!first.scales.defined()) return m;
    const int64_t rows = first.scales.size(0), blocks = first.scales.size(1);
    const torch::Tensor per_tile = first.scales.reshape({rows / tile_rows, tile_rows, blocks}).select(1, 0);
    m.scales = per_tile.t().repeat_interleave(first.block, 0).contiguous();
    m.block = tile_rows;
    return m;
}

// An operand [rows, K] as an instruction takes it: its format's values (the
// copy times its scales, exactly: powers of two) and its decode scales
// 1 / s per (row, block of `block`); a per-tensor copy's are all one value.
struct instruction_operand {
    torch::Tensor values, decode;
};
instruction_operand format_values(const torch::Tensor& t, const made_by& by, int64_t block) {
    const int64_t rows = t.size(0), k = t.size(1), blocks = block ? (k + block - 1) / block : 0;
    if (!by.scales.defined()) {
        const float s = by.scale();
        return {(s == 1.0f ? t : t * s).contiguous(),
                block ? torch::full({rows, blocks}, 1.0f / s, t.options()) : torch::Tensor()};
    }
    const torch::Tensor per_element = by.scales.repeat_interleave(by.block, 1).narrow(1, 0, k);
    return {(t * per_element).contiguous(), (1.0f / by.scales).contiguous()};
}

// a·b (a: [M, K], b: [K, N]) through an accumulator plugin's instructions,
// as a GPU runs it: the instructions take the operands' format values.
// Per-tensor copies: the float32 result is multiplied by the scales'
// inverses after them (the epilogue's alpha; exact for powers of two).
// Block-scaled copies: their decode scales go into the instruction (a
// block-scaled instruction, blocks of its scale kind), or multiply each
// promoted D on its way into the float32 total (DeepSeek-V3's blocks, one
// per promotion interval).
torch::Tensor instruction_gemm(const torch::Tensor& a, const torch::Tensor& b, const product_accumulator& acc,
                               const made_by& by_a, const made_by& by_b, unsigned threads) {
    const int64_t block = std::max(by_a.block, by_b.block);
    if (by_a.block && by_b.block && by_a.block != by_b.block)
        throw error("an instruction's operands are blocks of " + std::to_string(by_a.block) + " and " +
                    std::to_string(by_b.block) + " elements along the product: one length is needed");
    const instruction_operand ia = format_values(a, by_a, block), ib = format_values(b.t(), by_b, block);
    torch::Tensor c =
        torch::empty({a.size(0), b.size(1)}, a.options().memory_format(torch::MemoryFormat::Contiguous));
    quant::instruction_operands p;
    p.a = ia.values.data_ptr<float>();
    p.b = ib.values.data_ptr<float>();
    p.m = static_cast<size_t>(a.size(0)), p.n = static_cast<size_t>(b.size(1)),
    p.k = static_cast<size_t>(a.size(1));
    p.a_min_exponent = by_a.min_exponent(), p.b_min_exponent = by_b.min_exponent();
    if (block != 0) {
        const uint32_t kinds = acc.instruction->info().scale_kinds;
        const bool one_block = block >= a.size(1);  // a row shorter than a block: its one block
        if ((kinds & (1u << ALTGRAD_ACC_SCALE_NONE)) != 0) {
            if (acc.promote_every != static_cast<size_t>(block) &&
                !(one_block && acc.promote_every >= static_cast<size_t>(block)))
                throw error(
                    "blocks of " + std::to_string(block) + " along the product through instruction '" +
                    acc.instruction->name() + "' need promote_every = " + std::to_string(block) +
                    " (their scales multiply each promoted sum), not " + std::to_string(acc.promote_every));
            p.a_promotion_scales = ia.decode.data_ptr<float>();
            p.b_promotion_scales = ib.decode.data_ptr<float>();
        } else {
            p.scale_kind = ALTGRAD_ACC_SCALE_UE8M0_32;
            if (static_cast<size_t>(block) != quant::scale_block(p.scale_kind) && !one_block)
                throw error("instruction '" + acc.instruction->name() +
                            "' takes a scale per 32 elements, and " + "the operands' blocks are " +
                            std::to_string(block));
            p.a_scales = ia.decode.data_ptr<float>();
            p.b_scales = ib.decode.data_ptr<float>();
        }
    }
    quant::instruction_product(*acc.instruction, p, acc.promote_every, c.data_ptr<float>(), threads);
    if (block != 0) return c;
    const float alpha = (1.0f / by_a.scale()) * (1.0f / by_b.scale());
    if (alpha != 1.0f) c.mul_(alpha);
    return c;
}

// a·b (a: [M, K], b: [K, N]) through `acc`: its chunked model, its
// instructions, or LibTorch's float32 product when it has neither.
torch::Tensor product(const torch::Tensor& a, const torch::Tensor& b, const product_accumulator& acc,
                      const made_by& by_a, const made_by& by_b, unsigned threads) {
    if (!acc.modelled()) return torch::matmul(a, b);
    if (!a.device().is_cpu() || !b.device().is_cpu())
        throw error("an accumulator is modelled on the CPU only (training.device = \"cpu\")");
    if (acc.instruction) return instruction_gemm(a, b, acc, by_a, by_b, threads);
    torch::Tensor keep_a, keep_b;
    const stored_operand sa = stored(a, keep_a), sb = stored(b, keep_b);
    torch::Tensor c =
        torch::empty({a.size(0), b.size(1)}, a.options().memory_format(torch::MemoryFormat::Contiguous));
    acc.model->gemm({sa.data, sa.layout, sb.data, sb.layout, static_cast<size_t>(a.size(0)),
                     static_cast<size_t>(a.size(1)), static_cast<size_t>(b.size(1))},
                    c.data_ptr<float>(), threads);
    return c;
}

// The backward pass's products reduce along other dimensions than the
// forward's: dx = dy w reduces over w's rows (its output features), and
// dw = dy^T x over the tokens. Each tensor's second use (struct second_use)
// is quantized as its product holds it, the reduction dimension last.
// t's shape with its last dimension `last` (a product's [.., T, N] from [.., T, K]).
std::vector<int64_t> output_shape(const torch::Tensor& t, int64_t last) {
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    shape.back() = last;
    return shape;
}

// The transform of product p of the layer whose sites start at s, or null.
const product_transform& transform_of(const quant_plan& plan, size_t s, config::product_kind p) {
    return plan.transforms[s / 3][static_cast<size_t>(p)];
}

// The seed both operands of one product's transform take in this step:
// (run seed, step, layer, product), apart from the rounding streams.
uint64_t transform_seed(const quant_plan& plan, uint64_t step, size_t s, config::product_kind p) {
    return quant::seed_of(plan.seed, step, quant::transform_stream(s / 3, static_cast<size_t>(p)));
}

// t as [rows, K] (its last dimension K the product's reduction dimension)
// through the transform (or its inverse), into a new tensor; t itself when
// there is none.
torch::Tensor transformed(const torch::Tensor& t, const product_transform& tr, uint64_t seed,
                          bool inverse = false) {
    if (!tr.handle) return t;
    if (t.device().is_cuda() && !tr.handle->accepts(ALTGRAD_MEMORY_CUDA))
        throw error(tr.key + ": transform plugin '" + tr.handle->name() +
                    "' has no CUDA implementation (build the plugins with ALTGRAD_CUDA=ON, or use "
                    "training.device = \"cpu\")");
    const torch::Tensor x = t.contiguous();
    const int64_t k = x.dim() ? x.size(-1) : 1, d = tr.handle->info().block_size;
    if (k % d != 0)
        throw error(tr.key + ": transform '" + tr.handle->name() + "' (d = " + std::to_string(d) +
                    ") along a reduction dimension of " + std::to_string(k) + ", which d does not divide");
    torch::Tensor out = torch::empty_like(x);
    tr.handle->apply(x.data_ptr<float>(), out.data_ptr<float>(),
                     static_cast<size_t>(x.numel() / std::max<int64_t>(k, 1)), static_cast<size_t>(k), seed,
                     inverse, x.device().is_cuda() ? x.device().index() : -1);
    return out;
}

// Whether a second use needs its tensor's unquantized values (saved for the
// backward pass): when it is quantized again from them (its own settings,
// blocks along rows, or a transform on either of the tensor's products).
bool needs_unquantized(const quant_site& first, const second_use& use, bool transforms) {
    return use.source == config::copy_source::unquantized &&
           (use.own || transforms || (first.block_scaled() && first.tile_rows() == 1));
}

// A tensor's copy for its second use, in the second product's layout:
// `t` the unquantized tensor and `q` its first copy, both as views in that
// layout (`first_by`: how the first copy was made, as the first product
// holds it). As its first use (one scale per tensor or tiles: the first copy
// itself; blocks along rows: quantized again, along the new rows, with the
// first use's settings, adding to its statistics), or through its own site.
// With a transform on either product (`transformed_first`: the first copy's,
// `t2`/`seed`: this product's), the copy is quantized again from the
// unquantized tensor, through this product's transform if it has one.
struct copy_made {
    torch::Tensor values;
    made_by by;
};
copy_made second_copy(const torch::Tensor& t, const torch::Tensor& q, quant_site& first,
                      const made_by& first_by, const second_use& use, quant_plan& plan,
                      uint64_t rounding_seed, bool transformed_first, const product_transform& t2,
                      uint64_t seed) {
    const bool any_transform = transformed_first || t2.handle;
    const torch::Tensor from = any_transform                                ? transformed(t, t2, seed)
                               : use.source == config::copy_source::rowwise ? q
                                                                            : t;
    const int64_t k = q.dim() ? q.size(-1) : 1;
    if (use.own) {
        quant_site& own = plan.sites[*use.own];
        torch::Tensor values = fake_quantize(from.contiguous(), own, plan, rounding_seed);
        return {values, copy_by(own, k)};
    }
    if (!any_transform && !first.block_scaled()) return {q, {&first}};
    if (!any_transform && first.tile_rows() > 1)
        return {q, transposed_tiles(first_by, static_cast<int64_t>(first.tile_rows()))};
    torch::Tensor values = fake_quantize(from.contiguous(), first, plan, rounding_seed, /*again=*/true);
    return {values, copy_by(first, k)};
}

struct QuantizedLinearFunction : public torch::autograd::Function<QuantizedLinearFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 const torch::Tensor& w, const torch::Tensor& b, quant_plan* plan,
                                 int64_t first_site) {
        const size_t s = static_cast<size_t>(first_site);
        quant_site& w_site = plan->sites[s];
        quant_site& x_site = plan->sites[s + 1];
        const std::array<second_use, 3>& second = plan->second_uses[s / 3];
        using config::product_kind;
        const product_transform& tf = transform_of(*plan, s, product_kind::forward);
        // The step and micro-batch key every seed of this call, its backward's
        // too (Python's layers count their own steps).
        const uint64_t step = plan->step, micro = plan->micro_batch;
        const uint64_t seed = transform_seed(*plan, step, s, product_kind::forward);
        const torch::Tensor qx =
            fake_quantize(transformed(x, tf, seed), x_site, *plan,
                          copy_seed(*plan, step, micro, s, quant::operand_role::activation));
        const made_by x_by = copy_by(x_site, qx.size(-1));
        const torch::Tensor qw = fake_quantize(transformed(w, tf, seed), w_site, *plan,
                                               copy_seed(*plan, step, micro, s, quant::operand_role::weight));
        const made_by w_by = copy_by(w_site, qw.size(-1));
        // The unquantized operands, for their second copies (empty when not needed).
        const torch::Tensor none;
        const bool x_transforms = tf.handle || transform_of(*plan, s, product_kind::weight_gradient).handle;
        const bool w_transforms = tf.handle || transform_of(*plan, s, product_kind::input_gradient).handle;
        if (plan->operand_tap) {
            plan->operand_tap(s, "x", qx);
            plan->operand_tap(s, "w", qw);
        }
        ctx->save_for_backward({qx, qw, needs_unquantized(x_site, second[1], x_transforms) ? x : none,
                                needs_unquantized(w_site, second[0], w_transforms) ? w : none});
        ctx->saved_data["plan"] = reinterpret_cast<int64_t>(plan);
        ctx->saved_data["site"] = first_site;
        ctx->saved_data["step"] = static_cast<int64_t>(step);
        ctx->saved_data["micro_batch"] = static_cast<int64_t>(micro);
        ctx->saved_data["bias"] = b.numel() > 0;
        ctx->saved_data["x_scales"] = x_by.scales;  // the first copies' block scales, for their second uses
        ctx->saved_data["w_scales"] = w_by.scales;
        const product_accumulators& acc = plan->accumulators[s / 3];
        const product_accumulator& fwd = acc[static_cast<size_t>(config::product_kind::forward)];
        torch::Tensor y = fwd.modelled() ? product(qx.reshape({-1, qw.size(1)}), qw.t(), fwd, x_by, w_by,
                                                   plan->gemm_threads)
                                               .reshape(output_shape(qx, qw.size(0)))
                                         : torch::matmul(qx, qw.t());
        if (b.numel() > 0) y = y + b;
        return y;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const torch::Tensor &qx = saved[0], &qw = saved[1], &x = saved[2], &w = saved[3];
        quant_plan& plan = *reinterpret_cast<quant_plan*>(ctx->saved_data["plan"].toInt());
        const size_t s = static_cast<size_t>(ctx->saved_data["site"].toInt());
        const uint64_t step = static_cast<uint64_t>(ctx->saved_data["step"].toInt());
        const uint64_t micro = static_cast<uint64_t>(ctx->saved_data["micro_batch"].toInt());
        quant_site &w_site = plan.sites[s], &x_site = plan.sites[s + 1], &g_site = plan.sites[s + 2];
        const std::array<second_use, 3>& second = plan.second_uses[s / 3];
        const int64_t out = qw.size(0), in = qw.size(1);

        using config::product_kind;
        const product_transform &tf = transform_of(plan, s, product_kind::forward),
                                &tdx = transform_of(plan, s, product_kind::input_gradient),
                                &tdw = transform_of(plan, s, product_kind::weight_gradient);
        const uint64_t dx_seed = transform_seed(plan, step, s, product_kind::input_gradient),
                       dw_seed = transform_seed(plan, step, s, product_kind::weight_gradient);
        using quant::operand_role;
        const torch::Tensor qg =
            fake_quantize(transformed(grads[0], tdx, dx_seed), g_site, plan,
                          copy_seed(plan, step, micro, s, operand_role::output_gradient));  // along out
        const made_by g_by = copy_by(g_site, out);
        const torch::Tensor g2 = grads[0].reshape({-1, out});
        // W along out for dx = dy w, as [in, out]; used transposed.
        const copy_made w_cols = second_copy(
            w.defined() ? w.t() : w, qw.t(), w_site,
            copy_by(w_site, in, ctx->saved_data["w_scales"].toTensor()), second[0], plan,
            copy_seed(plan, step, micro, s, operand_role::weight, true), tf.handle != nullptr, tdx, dx_seed);
        // dy and x along the tokens for dw = dy^T x, as [features, tokens].
        const copy_made g_t =
            second_copy(g2.t(), qg.reshape({-1, out}).t(), g_site, g_by, second[2], plan,
                        copy_seed(plan, step, micro, s, operand_role::output_gradient, true),
                        tdx.handle != nullptr, tdw, dw_seed);
        const copy_made x_t =
            second_copy(x.defined() ? x.reshape({-1, in}).t() : x, qx.reshape({-1, in}).t(), x_site,
                        copy_by(x_site, in, ctx->saved_data["x_scales"].toTensor()), second[1], plan,
                        copy_seed(plan, step, micro, s, operand_role::activation, true), tf.handle != nullptr,
                        tdw, dw_seed);
        if (plan.operand_tap) {
            plan.operand_tap(s, "dy", qg);
            plan.operand_tap(s, "w@input_gradient", w_cols.values);
            plan.operand_tap(s, "dy@weight_gradient", g_t.values);
            plan.operand_tap(s, "x@weight_gradient", x_t.values);
        }
        const product_accumulators& acc = plan.accumulators[s / 3];
        const product_accumulator& dx_acc = acc[static_cast<size_t>(config::product_kind::input_gradient)];
        const product_accumulator& dw_acc = acc[static_cast<size_t>(config::product_kind::weight_gradient)];
        torch::Tensor gx = dx_acc.modelled() ? product(qg.reshape({-1, out}), w_cols.values.t(), dx_acc, g_by,
                                                       w_cols.by, plan.gemm_threads)
                                                   .reshape(output_shape(qg, in))
                                             : torch::matmul(qg, w_cols.values.t());
        torch::Tensor gw = product(g_t.values, x_t.values.t(), dw_acc, g_t.by, x_t.by, plan.gemm_threads);
        // The bias gradient: dy's input-gradient copy, in the layer's own basis
        // (a transformed copy is transformed back).
        torch::Tensor gb = ctx->saved_data["bias"].toBool()
                               ? transformed(qg.reshape({-1, out}), tdx, dx_seed, /*inverse=*/true).sum(0)
                               : torch::Tensor();
        return {gx, gw, gb, torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

torch::Tensor quantized_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                               quant_plan& plan, size_t first_site) {
    // Autograd functions take defined tensors only: no bias is an empty one.
    const torch::Tensor bias = b.defined() ? b : torch::zeros({0}, w.options());
    return QuantizedLinearFunction::apply(x, w, bias, &plan, static_cast<int64_t>(first_site));
}

}  // namespace altgrad::host::train
