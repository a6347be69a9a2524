// The accumulator.* checks of the call's contract (ABI 1.5): the declared
// depth respected, results independent of the tile, the instance and the
// thread, guarded buffers and in place, and bad arguments refused with their
// status and a message. accumulator_checks.cpp holds the arithmetic ones.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "conformance/accumulator_calls.hpp"

namespace altgrad::host::conformance {

// ---------------------------------------------------------------- depth

namespace {

// x with its k columns padded by zeros to `to` (scales padded by 1).
acc_call zero_padded(const acc_call& x, size_t to) {
    acc_call p = x;
    p.k = to;
    p.a.assign(x.m * to, 0.0f);
    p.b.assign(x.n * to, 0.0f);
    for (size_t i = 0; i < x.m; ++i) std::copy_n(&x.a[i * x.k], x.k, &p.a[i * to]);
    for (size_t j = 0; j < x.n; ++j) std::copy_n(&x.b[j * x.k], x.k, &p.b[j * to]);
    return p;
}

}  // namespace

result check_accumulator_depth(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    const size_t depth = acc->info().depth;
    acc_call x = random_call(e, *acc, 3, 4, depth);
    for (const size_t k : {depth + 1, depth * 2}) {
        acc_call over = random_call(e, *acc, 2, 2, k);
        std::vector<float> d(4);
        std::string message;
        const call_note note("dot_add with k " + std::to_string(k) + " > depth " + std::to_string(depth));
        const altgrad_status s = acc->dot_add_raw(sdk::accumulator_args(over.own(d.data())), message);
        if (s != ALTGRAD_STATUS_INVALID_ARGUMENT || message.empty())
            return fail(std::string("k = ") + std::to_string(k) + " beyond the declared depth " +
                            std::to_string(depth) + " gave " + status_name(s) +
                            (message.empty() ? " without a message" : ": " + message),
                        over.text(),
                        "refuse k > info.depth with ALTGRAD_STATUS_INVALID_ARGUMENT and a message");
    }
    std::string diff = against_model(*acc, x);
    if (!diff.empty())
        return fail("k = depth: " + diff, x.text(), "compute the definition at the full depth");
    if (!grouped(*acc) && depth > 1) {
        // Fewer products are the instruction zero-padded: the padding's products 0 x 0 lie below every term.
        x = random_call(e, *acc, 3, 4, depth / 2 + 1);
        diff = difference(x, run(*acc, x), run(*acc, zero_padded(x, depth)),
                          "the call zero-padded to the depth gives");
        if (!diff.empty())
            return fail(
                "k = " + std::to_string(x.k) + ": " + diff, x.text(),
                "a call with k < depth is the instruction with fewer products, as zero operands padding "
                "it to the depth give");
    }
    return pass("k beyond the depth " + std::to_string(depth) + " refused; k = depth gives the definition" +
                (grouped(*acc) ? "" : "; a shorter k equals the call zero-padded to the depth"));
}

// ---------------------------------------------------------------- determinism

namespace {

// Rows [i0, i1) of a and [j0, j1) of b as a call of their own.
acc_call sub_tile(const acc_call& x, size_t i0, size_t i1, size_t j0, size_t j1) {
    acc_call s = x;
    s.m = i1 - i0;
    s.n = j1 - j0;
    const size_t per = x.scales_per_row();
    s.a.assign(x.a.begin() + i0 * x.k, x.a.begin() + i1 * x.k);
    s.b.assign(x.b.begin() + j0 * x.k, x.b.begin() + j1 * x.k);
    s.a_scales.assign(x.a_scales.begin() + i0 * per, x.a_scales.begin() + i1 * per);
    s.b_scales.assign(x.b_scales.begin() + j0 * per, x.b_scales.begin() + j1 * per);
    s.c.clear();
    for (size_t i = i0; i < i1; ++i)
        s.c.insert(s.c.end(), x.c.begin() + i * x.n + j0, x.c.begin() + i * x.n + j1);
    return s;
}

// The whole tile, then in four sub-tiles (rows 0..4 and 5..12, columns 0..2 and
// 3..10), then output (7, 9) alone: the same bits.
std::string tiling_difference(const accumulator_handle& acc, const acc_call& x) {
    const std::vector<float> whole = run(acc, x);
    std::vector<float> pieces(whole.size());
    for (const auto& [i0, i1] : {std::pair<size_t, size_t>{0, 5}, {5, x.m}})
        for (const auto& [j0, j1] : {std::pair<size_t, size_t>{0, 3}, {3, x.n}}) {
            const std::vector<float> part = run(acc, sub_tile(x, i0, i1, j0, j1));
            for (size_t i = i0; i < i1; ++i)
                for (size_t j = j0; j < j1; ++j) pieces[i * x.n + j] = part[(i - i0) * (j1 - j0) + (j - j0)];
        }
    const std::vector<float> alone = run(acc, sub_tile(x, 7, 8, 9, 10));
    pieces[7 * x.n + 9] = alone[0];
    return difference(x, pieces, whole, "the whole tile in one call gives");
}

// kThreads threads, each calling on its own tile kRepeats times at once.
std::string threads_difference(env& e, const accumulator_handle& acc) {
    constexpr int kThreads = 8, kRepeats = 4;
    std::vector<acc_call> calls;
    std::vector<std::vector<float>> serial;
    for (int t = 0; t < kThreads; ++t) {
        calls.push_back(random_call(e, acc, 6, 6, acc.info().depth));
        serial.push_back(run(acc, calls.back()));
    }
    std::vector<std::string> problems(kThreads);
    const call_note note("dot_add from " + std::to_string(kThreads) + " threads at once");
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t)
        pool.emplace_back([&, t] {
            try {
                for (int rep = 0; rep < kRepeats && problems[t].empty(); ++rep)
                    problems[t] =
                        difference(calls[t], run_unnoted(acc, calls[t]), serial[t], "alone it gives");
            } catch (const std::exception& x) {
                problems[t] = x.what();
            }
        });
    for (std::thread& th : pool) th.join();
    for (int t = 0; t < kThreads; ++t)
        if (!problems[t].empty()) return "thread " + std::to_string(t) + ": " + problems[t];
    return "";
}

}  // namespace

result check_accumulator_deterministic(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    const acc_call x = random_call(e, *acc, 13, 11, acc->info().depth);
    std::string diff = tiling_difference(*acc, x);
    if (!diff.empty())
        return fail(
            "a sub-tile differs: " + diff, x.text(),
            "an output must depend on its rows of a and b, its C and scales only, never on its position "
            "or the tile's shape");
    const std::vector<float> first = run(*acc, x);
    acc.reset();
    const accumulator_ptr fresh = accumulator_handle::create(e.plugin, e.opts.params, "conformance --param");
    diff = difference(x, run(*fresh, x), first, "the first instance gave");
    if (!diff.empty())
        return fail("a fresh instance gave other bits: " + diff, x.text(),
                    "results must depend on the parameters and the values only: no clocks, no addresses, no "
                    "state kept between calls");
    diff = threads_difference(e, *fresh);
    if (!diff.empty())
        return fail(diff, "6 x 6 outputs per thread, 8 threads at once",
                    "dot_add must not write shared state: no global or instance buffers");
    return pass(
        "sub-tiles and a single output, a fresh instance and 8 threads at once give the bits of one call");
}

result check_accumulator_buffers(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    const acc_call x = random_call(e, *acc, 5, 7, acc->info().depth);
    const std::vector<float> out = run(*acc, x);  // guarded: a stray read or write faults
    const std::string diff = difference(x, run(*acc, x, true), out, "with d apart from c it gives");
    if (!diff.empty())
        return fail("in place (d == c): " + diff, x.text(), "read each C before writing its D");
    return pass(
        "guarded inputs (read-only) and output untouched outside their elements; in place (d == c) gives "
        "the same bits");
}

// ---------------------------------------------------------------- bad arguments

namespace {

struct bad_call {
    std::string what;
    altgrad_status want;
    altgrad_accumulator_args args;
};

std::vector<bad_call> bad_calls(const accumulator_handle& acc, acc_call& x, std::vector<float>& d) {
    const altgrad_accumulator_info& info = acc.info();
    const altgrad_accumulator_args ok = sdk::accumulator_args(x.own(d.data()));
    std::vector<bad_call> calls;
    auto add = [&](const std::string& what, altgrad_status want, auto edit) {
        bad_call c{what, want, ok};
        edit(c.args);
        calls.push_back(c);
    };
    const auto invalid = ALTGRAD_STATUS_INVALID_ARGUMENT, unsupported = ALTGRAD_STATUS_UNSUPPORTED;
    add("struct_size one field short", invalid,
        [](auto& a) { a.struct_size = offsetof(altgrad_accumulator_args, cuda_stream); });
    add("a NULL", invalid, [](auto& a) { a.a = nullptr; });
    add("b NULL", invalid, [](auto& a) { a.b = nullptr; });
    add("c NULL", invalid, [](auto& a) { a.c = nullptr; });
    add("d NULL", invalid, [](auto& a) { a.d = nullptr; });
    add("d overlapping c by one element", invalid, [&](auto& a) { a.d = const_cast<float*>(a.c) + 1; });
    add("d overlapping a", invalid, [&](auto& a) { a.d = const_cast<float*>(a.a); });
    add("a_min_exponent 128", invalid, [](auto& a) { a.a_min_exponent = 128; });
    add("b_min_exponent -150", invalid, [](auto& a) { a.b_min_exponent = -150; });
    add("memory kind 7 (unknown)", invalid, [](auto& a) { a.memory = static_cast<altgrad_memory_kind>(7); });
    if ((info.memory_kinds & (1u << ALTGRAD_MEMORY_CUDA)) == 0)
        add("CUDA memory, not in memory_kinds", unsupported, [](auto& a) { a.memory = ALTGRAD_MEMORY_CUDA; });
    add("scale kind 9 (unknown)", invalid,
        [](auto& a) { a.scale_kind = static_cast<altgrad_acc_scale_kind>(9); });
    for (altgrad_acc_scale_kind kind :
         {ALTGRAD_ACC_SCALE_NONE, ALTGRAD_ACC_SCALE_UE8M0_32, ALTGRAD_ACC_SCALE_UE4M3_16})
        if ((info.scale_kinds & (1u << kind)) == 0)
            add(std::string("scale kind ") + acc_scale_kind_names().name(kind) + ", not in scale_kinds",
                unsupported, [&](auto& a) { a.scale_kind = kind; });
    if (x.scale_kind != ALTGRAD_ACC_SCALE_NONE)
        add("a_scales NULL with a scale kind", invalid, [](auto& a) { a.a_scales = nullptr; });
    else add("a_scales set with scale kind none", invalid, [&](auto& a) { a.a_scales = x.a.data(); });
    if (info.group_size != 0)
        add("E4M3 operands (a_min_exponent -6) for E2M1 groups", unsupported,
            [](auto& a) { a.a_min_exponent = -6; });
    add("m x n beyond size_t", invalid, [](auto& a) {
        a.m = SIZE_MAX / 2;
        a.n = 4;
    });
    return calls;
}

}  // namespace

result check_accumulator_bad_arguments(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    acc_call x = random_call(e, *acc, 2, 3, acc->info().depth);
    std::vector<float> d(x.m * x.n);
    size_t refused = 0;
    for (const bad_call& c : bad_calls(*acc, x, d)) {
        std::string message;
        const call_note note("dot_add with " + c.what);
        const altgrad_status s = acc->dot_add_raw(c.args, message);
        if (s != c.want)
            return fail(
                std::string("dot_add returned ") + status_name(s) + ", expected " + status_name(c.want),
                c.what,
                "check every argument before touching the buffers (abi/accumulator.h lists the "
                "statuses)");
        if (message.empty() || message == "no message")
            return fail("dot_add refused without a message", c.what, "fill altgrad_error.message");
        ++refused;
    }
    altgrad_accumulator_args empty{};
    empty.struct_size = sizeof empty;
    empty.memory = ALTGRAD_MEMORY_HOST;
    empty.scale_kind = declared_scales(*acc).empty() || (acc->info().scale_kinds & 1u)
                           ? ALTGRAD_ACC_SCALE_NONE
                           : declared_scales(*acc).front();
    std::string message;
    const call_note note("dot_add with m = n = 0 and NULL buffers");
    const altgrad_status s = acc->dot_add_raw(empty, message);
    if (s != ALTGRAD_STATUS_OK)
        return fail(std::string("an empty call failed: ") + status_name(s) + ": " + message,
                    "m = n = k = 0, every buffer NULL", "an empty call does nothing and succeeds");
    return pass(std::to_string(refused) +
                " broken calls refused with the right status and a message; an empty "
                "call succeeds");
}

}  // namespace altgrad::host::conformance
