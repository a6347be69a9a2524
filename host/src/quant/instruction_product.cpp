// A product through an accumulator plugin's instructions
// (instruction_product.hpp). The operands are repacked once, slice by slice
// along K, so that each instruction's a, b and scales are contiguous as the
// ABI takes them; threads take contiguous ranges of output rows, and every
// output goes through the same instructions in the same order whatever the
// range, so the thread count changes no bit.
#include "quant/instruction_product.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>
#include <vector>

#include <altgrad/sdk/call_args.hpp>

#include "util/abi_names.hpp"
#include "util/error.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::quant {

namespace {

// One matrix [rows, k] (and its scales [rows, ceil(k / block)]) laid out
// slice after slice: slice s holds columns [s * depth, s * depth + kk) of
// every row, [rows, kk] row-major, at rows * s * depth.
struct sliced {
    std::vector<float> values, scales;
};

// Into `out`, whose vectors keep their capacity from call to call (the
// caller's are per thread: a training step's products reuse one allocation).
void slice(const float* x, const float* scales, size_t rows, size_t k, size_t depth, size_t block,
           sliced& out) {
    out.values.clear();
    out.scales.clear();
    out.values.reserve(rows * k);
    for (size_t k0 = 0; k0 < k; k0 += depth) {
        const size_t kk = std::min(depth, k - k0);
        for (size_t r = 0; r < rows; ++r)
            out.values.insert(out.values.end(), x + r * k + k0, x + r * k + k0 + kk);
    }
    if (block == 0) return;
    const size_t columns = (k + block - 1) / block, per_slice = depth / block;
    for (size_t c0 = 0; c0 < columns; c0 += per_slice) {
        const size_t cc = std::min(per_slice, columns - c0);
        for (size_t r = 0; r < rows; ++r)
            out.scales.insert(out.scales.end(), scales + r * columns + c0, scales + r * columns + c0 + cc);
    }
}

struct sliced_operands {
    sliced a, b;
};

// Output rows [r0, r1) of the product, into c (the whole [m, n] output).
void product_rows(const accumulator_handle& acc, const instruction_operands& p, const sliced_operands& s,
                  size_t promote_every, size_t r0, size_t r1, float* c) {
    const size_t depth = acc.info().depth, block = scale_block(p.scale_kind), rows = r1 - r0;
    std::vector<float> chain(rows * p.n, 0.0f), total(rows * p.n, 0.0f);
    sdk::dot_add_operands o;
    o.m = rows;
    o.n = p.n;
    o.a_min_exponent = p.a_min_exponent;
    o.b_min_exponent = p.b_min_exponent;
    o.scale_kind = p.scale_kind;
    o.c = o.d = chain.data();
    const bool scaled = p.a_promotion_scales != nullptr;
    const size_t intervals = promote_every == 0 ? 0 : (p.k + promote_every - 1) / promote_every;
    for (size_t k0 = 0; k0 < p.k; k0 += depth) {
        o.k = std::min(depth, p.k - k0);
        o.a = s.a.values.data() + p.m * k0 + r0 * o.k;
        o.b = s.b.values.data() + p.n * k0;
        if (block != 0) {
            const size_t done = k0 / block, blocks = (o.k + block - 1) / block;
            o.a_scales = s.a.scales.data() + p.m * done + r0 * blocks;
            o.b_scales = s.b.scales.data() + p.n * done;
        }
        acc.dot_add(o);
        const bool last = k0 + o.k == p.k;
        if (promote_every != 0 && ((k0 + o.k) % promote_every == 0 || last)) {
            const size_t interval = k0 / promote_every;
            for (size_t x = 0; x < chain.size(); ++x) {  // float32, nearest even
                if (!scaled) {
                    total[x] += chain[x];
                    continue;
                }
                const size_t i = r0 + x / p.n, j = x % p.n;
                const float scale = p.a_promotion_scales[i * intervals + interval] *
                                    p.b_promotion_scales[j * intervals + interval];
                total[x] += chain[x] * scale;
            }
            std::fill(chain.begin(), chain.end(), 0.0f);
        }
    }
    const std::vector<float>& result = promote_every != 0 ? total : chain;
    std::copy(result.begin(), result.end(), c + r0 * p.n);
}

// Whether x is a scale of the kind: UE8M0 a power of two in 2^-127 .. 2^127 or NaN; UE4M3 an E4M3
// value taken by magnitude (2^-9 steps below 2^-6, 4 significant bits above, at most 448).
bool is_scale(altgrad_acc_scale_kind kind, float x) {
    if (std::isnan(x)) return kind == ALTGRAD_ACC_SCALE_UE8M0_32;
    const float m = std::fabs(x);
    if (!std::isfinite(m)) return false;
    if (kind == ALTGRAD_ACC_SCALE_UE8M0_32)
        return x > 0 && m == std::ldexp(1.0f, std::ilogb(m)) && std::ilogb(m) <= 127 && std::ilogb(m) >= -127;
    if (m > 448.0f) return false;
    const int e = m == 0 ? -6 : std::max(std::ilogb(m), -6);
    const float step = std::ldexp(1.0f, e - 3);
    return std::floor(m / step) * step == m;
}

void check_call(const accumulator_handle& acc, const instruction_operands& p, size_t promote_every) {
    const std::string problem = promote_every_problem(acc, promote_every);
    if (!problem.empty()) throw error("promote_every " + std::to_string(promote_every) + ": " + problem);
    const size_t block = scale_block(p.scale_kind);
    if ((acc.info().scale_kinds & (1u << p.scale_kind)) == 0)
        throw error("accumulator '" + acc.name() + "': " +
                    (block == 0 ? std::string("needs block scales")
                                : "takes no block scales of " + std::to_string(block) + " elements"));
    if (block != 0 && acc.info().depth % block != 0)
        throw error("accumulator '" + acc.name() + "': its depth " + std::to_string(acc.info().depth) +
                    " is not a whole number of scale blocks of " + std::to_string(block));
    if ((block != 0) != (p.a_scales != nullptr && p.b_scales != nullptr))
        throw error("accumulator '" + acc.name() + "': block scales for both operands, or none");
    if ((p.a_promotion_scales == nullptr) != (p.b_promotion_scales == nullptr) ||
        (p.a_promotion_scales != nullptr && promote_every == 0))
        throw error("promotion scales: for both operands, and with promote_every > 0");
    if (block == 0) return;
    const size_t blocks = (p.k + block - 1) / block;
    check_scales(p.scale_kind, p.a_scales, p.m, blocks, "a's scales");
    check_scales(p.scale_kind, p.b_scales, p.n, blocks, "b's scales");
}

}  // namespace

size_t scale_block(altgrad_acc_scale_kind kind) {
    return kind == ALTGRAD_ACC_SCALE_UE8M0_32 ? 32 : kind == ALTGRAD_ACC_SCALE_UE4M3_16 ? 16 : 0;
}

void check_scales(altgrad_acc_scale_kind kind, const float* scales, size_t rows, size_t blocks,
                  const std::string& what) {
    for (size_t i = 0; i < rows * blocks; ++i)
        if (!is_scale(kind, scales[i]))
            throw error(what + "[" + std::to_string(i / blocks) + ", " + std::to_string(i % blocks) +
                        "] = " + shortest_decimal(scales[i]) + " is not a " +
                        acc_scale_kind_names().name(kind) + " scale");
}

std::string promote_every_problem(const accumulator_handle& acc, size_t promote_every) {
    const size_t depth = acc.info().depth;
    if (promote_every % depth == 0) return "";
    return "not a multiple of " + acc.name() + "'s instruction depth " + std::to_string(depth) +
           " (0: never promoted)";
}

int32_t min_exponent(const format_handle& format) {
    return static_cast<int32_t>(std::ilogb(format.info().min_normal));
}

void check_values(const format_handle& format, const float* x, size_t rows, size_t cols,
                  const std::string& what) {
    std::vector<float> q(rows * cols);
    format.quantize(x, q.data(), q.size(), quantize_options{});
    for (size_t i = 0; i < q.size(); ++i) {
        if (q[i] == x[i] || (std::isnan(q[i]) && std::isnan(x[i]))) continue;
        throw error(what + "[" + std::to_string(i / cols) + ", " + std::to_string(i % cols) +
                    "] = " + shortest_decimal(x[i]) + " is not a value of " + format.name());
    }
}

void instruction_product(const accumulator_handle& acc, const instruction_operands& p, size_t promote_every,
                         float* c, unsigned threads) {
    check_call(acc, p, promote_every);
    if (p.m == 0 || p.n == 0) return;
    const size_t depth = acc.info().depth, block = scale_block(p.scale_kind);
    thread_local sliced_operands buffers;
    sliced_operands& s =
        buffers;  // the workers capture this one (a thread_local's name is each thread's own)
    slice(p.a, p.a_scales, p.m, p.k, depth, block, s.a);
    slice(p.b, p.b_scales, p.n, p.k, depth, block, s.b);
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    const size_t parts = std::min<size_t>(threads, p.m);
    // One part on this thread: no thread to start, and the plugin's per-thread
    // buffers (fused_dot_add.hpp) last from one product to the next.
    if (parts == 1) return product_rows(acc, p, s, promote_every, 0, p.m, c);
    std::vector<std::thread> workers;
    std::vector<std::exception_ptr> errors(parts);
    for (size_t t = 0; t < parts; ++t)
        workers.emplace_back([&, t] {
            try {
                product_rows(acc, p, s, promote_every, p.m * t / parts, p.m * (t + 1) / parts, c);
            } catch (...) {
                errors[t] = std::current_exception();
            }
        });
    for (std::thread& w : workers) w.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace altgrad::host::quant
