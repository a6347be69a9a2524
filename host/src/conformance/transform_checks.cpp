// The transform.* checks (ABI 1.4): products preserved, the inverse undoes
// the transform, results independent of chunking, threads, seeds a transform
// does not use and fresh instances, guarded buffers and in-place calls, and
// bad arguments refused with a message.
//
// The tolerance of products and inverses: a transform computed in
// k = ceil(log2 d) stages of two-term sums and differences (a butterfly) and
// one scaling, in float32, has a computed T~a with
// ||T~a - Ta||_2 <= (k + 1) u ||a||_2 + O(u^2), u = 2^-24 (each stage is
// sqrt(2) times an orthogonal map and rounds each output once, relatively by
// at most u). Hence, the kit's dot products being in double,
//   |T~a . T~b - a . b| <= 2 (k + 1) u ||a|| ||b|| + O(u^2)
//   ||T~^-1 T~ a - a||  <= 2 (k + 1) u ||a|| + O(u^2),
// and the checks allow 2 (k + 2) u, one u of slack per side for the
// second-order terms. A non-orthogonal T misses by O(1) relative error.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "conformance/checks.hpp"
#include "plugins/transform_handle.hpp"

namespace altgrad::host::conformance {

namespace {

using transform_ptr = std::shared_ptr<transform_handle>;

// Load the plugin and create an instance with the kit's parameters; a
// failure is load.* or params.*'s finding, so skip.
bool make_transform(env& e, transform_ptr& t, result& why) {
    if (!load_for_check(e, why)) return false;
    try {
        t = transform_handle::create(e.plugin, e.opts.params, "conformance --param");
        return true;
    } catch (const std::exception& x) {
        why = skip(std::string("the plugin does not create (see params.defaults): ") + x.what());
        return false;
    }
}

std::string shape_text(size_t rows, size_t cols, uint64_t seed, bool inverse) {
    return std::to_string(rows) + " x " + std::to_string(cols) + ", seed " + std::to_string(seed) +
           (inverse ? ", inverse" : "");
}

// apply on guarded copies (input read-only); no call note (threads).
std::vector<float> apply_unnoted(const transform_handle& t, const std::vector<float>& in, size_t rows,
                                 size_t cols, uint64_t seed, bool inverse) {
    guarded_array<float> input(in, "input");
    input.seal();
    guarded_array<float> output(in.size(), "output");
    t.apply(input.data(), output.data(), rows, cols, seed, inverse);
    expect_front_intact(output.buffer(), "apply (" + shape_text(rows, cols, seed, inverse) + ")", "output");
    return output.to_vector();
}

std::vector<float> apply(const transform_handle& t, const std::vector<float>& in, size_t rows, size_t cols,
                         uint64_t seed, bool inverse = false) {
    const call_note note("apply (" + shape_text(rows, cols, seed, inverse) + ")");
    return apply_unnoted(t, in, rows, cols, seed, inverse);
}

// The same in place: one guarded buffer for input and output.
std::vector<float> apply_in_place(const transform_handle& t, const std::vector<float>& in, size_t rows,
                                  size_t cols, uint64_t seed) {
    const std::string call = "apply in place (" + shape_text(rows, cols, seed, false) + ")";
    const call_note note(call);
    guarded_array<float> data(in, "data");
    t.apply(data.data(), data.data(), rows, cols, seed, false);
    expect_front_intact(data.buffer(), call, "data");
    return data.to_vector();
}

// rows x cols normal values, now and then scaled by 2^+-20 (outliers and
// tiny values are what a Hadamard transform is for).
std::vector<float> random_matrix(env& e, size_t rows, size_t cols) {
    e.drew_random = true;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<float> m(rows * cols);
    for (float& x : m) {
        x = normal(e.rng);
        const double r = u(e.rng);
        if (r < 0.02) x *= 0x1p20f;
        else if (r < 0.04) x *= 0x1p-20f;
    }
    return m;
}

// The row lengths the checks use: multiples of d, one block up to several.
std::vector<size_t> row_lengths(uint32_t d) { return {d, 2u * size_t{d}, 5u * size_t{d}}; }

double allowed(uint32_t d) {
    int k = 0;
    while ((uint64_t{1} << k) < d) ++k;
    return 2.0 * (k + 2) * 0x1p-24;
}

double dot(const float* a, const float* b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

double norm(const float* a, size_t n) { return std::sqrt(dot(a, a, n)); }

// The first element where two results differ in their bits, or npos.
size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); ++i)
        if (!same(a[i], b[i])) return i;
    return a.size() == b.size() ? std::string::npos : a.size();
}

std::string difference_text(const std::vector<float>& got, const std::vector<float>& want, size_t i,
                            size_t cols) {
    return "row " + std::to_string(i / cols) + " element " + std::to_string(i % cols) + ": " +
           (i < got.size() ? hex_float(got[i]) : "missing") + " vs " +
           (i < want.size() ? hex_float(want[i]) : "missing");
}

}  // namespace

result check_transform_products(env& e) {
    transform_ptr t;
    result why;
    if (!make_transform(e, t, why)) return why;
    const uint32_t d = t->info().block_size;
    const uint64_t seed = e.rng();
    double worst = 0;
    size_t products = 0;
    for (size_t n : row_lengths(d)) {
        // Two operands transformed in separate calls with different row counts,
        // as a product's are: every pair of rows keeps its dot product.
        const size_t rows_a = 7, rows_b = 3;
        const std::vector<float> a = random_matrix(e, rows_a, n), b = random_matrix(e, rows_b, n);
        const std::vector<float> ta = apply(*t, a, rows_a, n, seed), tb = apply(*t, b, rows_b, n, seed);
        for (size_t i = 0; i < rows_a; ++i)
            for (size_t j = 0; j < rows_b; ++j) {
                const double exact = dot(&a[i * n], &b[j * n], n);
                const double got = dot(&ta[i * n], &tb[j * n], n);
                const double scale = norm(&a[i * n], n) * norm(&b[j * n], n);
                const double ratio = std::fabs(got - exact) / (allowed(d) * scale);
                worst = std::max(worst, ratio);
                ++products;
                if (!(ratio <= 1.0))
                    return fail("dot(Ta, Tb) = " + std::to_string(got) +
                                    " but a . b = " + std::to_string(exact) + ", off by " +
                                    std::to_string(std::fabs(got - exact) / scale) +
                                    " ||a|| ||b||, beyond the allowed " + std::to_string(allowed(d)),
                                "row " + std::to_string(i) + " of a (" + shape_text(rows_a, n, seed, false) +
                                    ") and row " + std::to_string(j) + " of b (" +
                                    shape_text(rows_b, n, seed, false) + ")",
                                "T must be orthogonal (T^T T = I) and the same T in both calls: the same "
                                "seed and row length, never the row index or the row count");
            }
    }
    return pass(std::to_string(products) + " products of rows of lengths " + std::to_string(d) + ", " +
                std::to_string(2 * d) + ", " + std::to_string(5 * d) + " preserved; the worst used " +
                std::to_string(worst) + " of the allowed 2 (ceil(log2 d) + 2) u ||a|| ||b||");
}

result check_transform_inverse(env& e) {
    transform_ptr t;
    result why;
    if (!make_transform(e, t, why)) return why;
    const altgrad_transform_info& info = t->info();
    const uint64_t seed = e.rng();
    const size_t rows = 9;
    for (size_t n : row_lengths(info.block_size)) {
        const std::vector<float> a = random_matrix(e, rows, n);
        // Self-inverse: T(T a) with inverse = 0 both times; else T^-1(T a) and T(T^-1 a).
        const bool self = info.self_inverse != 0;
        const std::vector<float> there_back = apply(*t, apply(*t, a, rows, n, seed), rows, n, seed, !self);
        const std::vector<float> back_there =
            self ? there_back : apply(*t, apply(*t, a, rows, n, seed, true), rows, n, seed, false);
        for (const std::vector<float>* r : {&there_back, &back_there})
            for (size_t i = 0; i < rows; ++i) {
                double err = 0;
                for (size_t j = 0; j < n; ++j) {
                    const double diff = static_cast<double>((*r)[i * n + j]) - a[i * n + j];
                    err += diff * diff;
                }
                const double bound = allowed(info.block_size) * norm(&a[i * n], n);
                if (!(std::sqrt(err) <= bound))
                    return fail(std::string(self               ? "T(T a)"
                                            : r == &there_back ? "T^-1(T a)"
                                                               : "T(T^-1 a)") +
                                    " differs from a by " + std::to_string(std::sqrt(err)) +
                                    " in the 2-norm, beyond the allowed " + std::to_string(bound),
                                "row " + std::to_string(i) + " (" + shape_text(rows, n, seed, false) + ")",
                                self ? "a transform declaring self_inverse = 1 must undo itself; declare 0 "
                                       "and implement inverse = 1 otherwise"
                                     : "inverse = 1 must apply T^T, the inverse of an orthogonal T");
            }
    }
    return pass(std::string(info.self_inverse ? "T(T a) = a" : "T^-1(T a) = a and T(T^-1 a) = a") +
                " within 2 (ceil(log2 d) + 2) u ||a|| for rows of 1, 2 and 5 blocks");
}

namespace {

// One call of all rows, then the rows split into calls of 1, 5, 13 and the
// rest, then row r moved to another position: the same bits each time.
result chunking_body(env& e, const transform_handle& t, size_t n, uint64_t seed) {
    const size_t rows = 37;
    const std::vector<float> a = random_matrix(e, rows, n);
    const std::vector<float> whole = apply(t, a, rows, n, seed);
    std::vector<float> pieces;
    for (size_t first = 0, k = 0; first < rows; ++k) {
        const size_t count = std::min(k == 0   ? size_t{1}
                                      : k == 1 ? size_t{5}
                                      : k == 2 ? size_t{13}
                                               : rows,
                                      rows - first);
        const std::vector<float> part(a.begin() + first * n, a.begin() + (first + count) * n);
        const std::vector<float> out = apply(t, part, count, n, seed);
        pieces.insert(pieces.end(), out.begin(), out.end());
        first += count;
    }
    const size_t diff = first_difference(pieces, whole);
    if (diff != std::string::npos)
        return fail("the rows split across calls of 1, 5, 13 and 18 rows differ from one call: " +
                        difference_text(pieces, whole, diff, n),
                    shape_text(rows, n, seed, false),
                    "a row's result must depend on its values and the seed only");
    std::vector<float> moved(a.begin() + 20 * n, a.begin() + 21 * n);  // row 20 as row 0 of one
    const std::vector<float> alone = apply(t, moved, 1, n, seed);
    const std::vector<float> want(whole.begin() + 20 * n, whole.begin() + 21 * n);
    const size_t moved_diff = first_difference(alone, want);
    if (moved_diff != std::string::npos)
        return fail("row 20 transformed alone differs from row 20 in the full call: " +
                        difference_text(alone, want, moved_diff, n),
                    shape_text(rows, n, seed, false),
                    "never use the row index: both operands must meet the same T");
    return pass("");
}

// kThreads threads, each applying to its own matrix kRepeats times at once.
result threads_body(env& e, const transform_handle& t, size_t n, uint64_t seed) {
    constexpr int kThreads = 8, kRepeats = 5;
    const size_t rows = 16;
    std::vector<std::vector<float>> inputs, serial;
    for (int k = 0; k < kThreads; ++k) {
        inputs.push_back(random_matrix(e, rows, n));
        serial.push_back(apply(t, inputs.back(), rows, n, seed));
    }
    std::vector<std::string> problems(kThreads);
    const call_note note("apply from " + std::to_string(kThreads) + " threads at once (" +
                         shape_text(rows, n, seed, false) + " each)");
    std::vector<std::thread> pool;
    for (int k = 0; k < kThreads; ++k)
        pool.emplace_back([&, k] {
            try {
                for (int rep = 0; rep < kRepeats && problems[k].empty(); ++rep) {
                    const std::vector<float> out = apply_unnoted(t, inputs[k], rows, n, seed, false);
                    const size_t diff = first_difference(out, serial[k]);
                    if (diff != std::string::npos)
                        problems[k] = "thread " + std::to_string(k) + ", " +
                                      difference_text(out, serial[k], diff, n) + " (concurrently vs alone)";
                }
            } catch (const std::exception& x) {
                problems[k] = x.what();
            }
        });
    for (std::thread& th : pool) th.join();
    for (const std::string& p : problems)
        if (!p.empty())
            return fail(p, shape_text(rows, n, seed, false) + " from each of 8 threads",
                        "apply must not write shared state: no global or instance buffers");
    return pass("");
}

}  // namespace

result check_transform_chunking(env& e) {
    transform_ptr t;
    result why;
    if (!make_transform(e, t, why)) return why;
    const uint64_t seed = e.rng();
    for (size_t n : row_lengths(t->info().block_size)) {
        result r = chunking_body(e, *t, n, seed);
        if (r.status != outcome::passed) return r;
        r = threads_body(e, *t, n, seed);
        if (r.status != outcome::passed) return r;
    }
    return pass(
        "rows split across calls, moved to another row index and run from 8 threads at once give "
        "the bits of one call");
}

result check_transform_reproducible(env& e) {
    transform_ptr t;
    result why;
    if (!make_transform(e, t, why)) return why;
    const altgrad_transform_info info = t->info();
    const size_t rows = 11, n = 2 * size_t{info.block_size};
    const uint64_t seed = e.rng();
    const std::vector<float> a = random_matrix(e, rows, n);
    const std::vector<float> first = apply(*t, a, rows, n, seed);
    t.reset();
    const transform_ptr fresh = transform_handle::create(e.plugin, e.opts.params, "conformance --param");
    const std::vector<float> again = apply(*fresh, a, rows, n, seed);
    const size_t diff = first_difference(again, first);
    if (diff != std::string::npos)
        return fail("a fresh instance gave other bits: " + difference_text(again, first, diff, n),
                    shape_text(rows, n, seed, false),
                    "results must depend on the parameters, the values and the seed only: no clocks, no "
                    "addresses, no unseeded randomness");
    if (info.uses_seed == 0) {
        const std::vector<float> other = apply(*fresh, a, rows, n, seed ^ 0x5DEECE66Dull);
        const size_t seed_diff = first_difference(other, first);
        if (seed_diff != std::string::npos)
            return fail(
                "uses_seed is 0 but another seed gave other bits: " +
                    difference_text(other, first, seed_diff, n),
                shape_text(rows, n, seed, false) + ", then seed " + std::to_string(seed ^ 0x5DEECE66Dull),
                "declare uses_seed = 1 when T depends on args.seed");
    }
    return pass(std::string("a fresh instance gives the same bits") +
                (info.uses_seed ? "" : "; another seed too (uses_seed is 0)"));
}

result check_transform_buffers(env& e) {
    transform_ptr t;
    result why;
    if (!make_transform(e, t, why)) return why;
    const uint64_t seed = e.rng();
    for (size_t n : row_lengths(t->info().block_size)) {
        const size_t rows = 5;
        const std::vector<float> a = random_matrix(e, rows, n);
        const std::vector<float> out = apply(*t, a, rows, n, seed);  // guarded: a stray write faults
        const std::vector<float> in_place = apply_in_place(*t, a, rows, n, seed);
        const size_t diff = first_difference(in_place, out);
        if (diff != std::string::npos)
            return fail("in place (output == input) differs from a separate output: " +
                            difference_text(in_place, out, diff, n),
                        shape_text(rows, n, seed, false),
                        "read a block completely before writing it, or work on a copy of the block");
    }
    return pass(
        "guarded input (read-only) and output buffers untouched outside rows x cols; in place "
        "gives the same bits");
}

namespace {

// One refused call: its expected status and the args that break the contract.
struct bad_call {
    std::string what;
    altgrad_status want;
    altgrad_transform_args args;
};

std::vector<bad_call> bad_calls(const altgrad_transform_info& info, float* data, size_t n) {
    const uint32_t d = info.block_size;
    altgrad_transform_args ok{};
    ok.struct_size = sizeof ok;
    ok.input = data;
    ok.output = data + n;
    ok.rows = 1;
    ok.cols = n;
    ok.memory = ALTGRAD_MEMORY_HOST;
    std::vector<bad_call> calls;
    auto add = [&](const std::string& what, altgrad_status want, auto edit) {
        bad_call c{what, want, ok};
        edit(c.args);
        calls.push_back(c);
    };
    const auto invalid = ALTGRAD_STATUS_INVALID_ARGUMENT;
    if (d > 1) add("cols = d + 1, not a multiple of d", invalid, [&](auto& a) { a.cols = d + 1; });
    add("input NULL with rows * cols > 0", invalid, [](auto& a) { a.input = nullptr; });
    add("output NULL with rows * cols > 0", invalid, [](auto& a) { a.output = nullptr; });
    add("struct_size one field short", invalid,
        [](auto& a) { a.struct_size = offsetof(altgrad_transform_args, cuda_stream); });
    add("inverse = 2", invalid, [](auto& a) { a.inverse = 2; });
    add("output overlapping input by one element", invalid, [&](auto& a) { a.output = data + n - 1; });
    add("memory kind 7 (unknown)", invalid, [](auto& a) { a.memory = static_cast<altgrad_memory_kind>(7); });
    if ((info.memory_kinds & (1u << ALTGRAD_MEMORY_CUDA)) == 0)
        add("CUDA memory, not in memory_kinds", ALTGRAD_STATUS_UNSUPPORTED,
            [](auto& a) { a.memory = ALTGRAD_MEMORY_CUDA; });
    add("rows * cols beyond size_t", invalid, [&](auto& a) {
        a.rows = SIZE_MAX / d;
        a.cols = 2 * size_t{d};
    });
    return calls;
}

}  // namespace

result check_transform_bad_arguments(env& e) {
    transform_ptr t;
    result why;
    if (!make_transform(e, t, why)) return why;
    const size_t n = t->info().block_size;
    // Input then output, side by side in one guarded buffer (the overlap case needs both).
    guarded_array<float> data(std::vector<float>(2 * n + 1, 1.0f), "data");
    size_t refused = 0;
    for (const bad_call& c : bad_calls(t->info(), data.data(), n)) {
        std::string message;
        const call_note note("apply with " + c.what);
        const altgrad_status s = t->apply_raw(c.args, message);
        if (s != c.want)
            return fail(std::string("apply returned ") + status_name(s) + ", expected " + status_name(c.want),
                        c.what,
                        "check every argument before touching the buffers (abi/transform.h lists "
                        "the statuses)");
        if (message.empty() || message == "no message")
            return fail("apply refused without a message", c.what, "fill altgrad_error.message");
        ++refused;
    }
    altgrad_transform_args empty{};
    empty.struct_size = sizeof empty;
    empty.memory = ALTGRAD_MEMORY_HOST;
    std::string message;
    const call_note note("apply with rows = 0 and NULL buffers");
    const altgrad_status s = t->apply_raw(empty, message);
    if (s != ALTGRAD_STATUS_OK)
        return fail(std::string("an empty call failed: ") + status_name(s) + ": " + message,
                    "rows = 0, cols = 0, input and output NULL", "an empty call does nothing and succeeds");
    return pass(std::to_string(refused) +
                " broken calls refused with the right status and a message; an "
                "empty call succeeds");
}

}  // namespace altgrad::host::conformance
