// The memory.* checks, which every kind runs last: repeated calls leave the
// heap and the resident size as they were.
#include <malloc.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
// ASan's allocator statistics (sanitizer/allocator_interface.h, which GCC
// does not install; libasan exports the function).
extern "C" size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "conformance/accumulator_calls.hpp"
#include "conformance/checks.hpp"

namespace altgrad::host::conformance {

namespace {

// Heap bytes in use by the allocator's own count: glibc's, or ASan's in a
// sanitizer build (its malloc replaces glibc's, whose counters then see
// nothing).
int64_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
    return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
#else
    const struct mallinfo2 m = ::mallinfo2();
    return static_cast<int64_t>(m.uordblks + m.hblkhd);
#endif
}

// Resident set size (catches memory a plugin maps itself and never unmaps).
// Not under ASan, whose quarantine keeps freed memory resident by design.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCheckResident = false;
#else
constexpr bool kCheckResident = true;
#endif
int64_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    int64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

// Rounds of calls after a warm-up (lazy initialisation, first-touch pages and
// the allocator's own caches settle there). The heap slack lets a plugin
// allocate up to 16 KiB once, later than the warm-up, yet fails any leak of
// more than 16 bytes a round; glibc's smallest chunk is 32 bytes, so a leak of
// one allocation a round cannot pass. The resident slack is coarser (8 KiB a
// round): the page cache of /proc and the stack move it a little.
constexpr int kLeakWarmup = 50, kLeakRounds = 1000;
constexpr int64_t kHeapSlack = 16 << 10, kResidentSlack = 8 << 20;

result check_leak_rounds(const std::function<void(int)>& round, const std::string& what) {
    for (int k = 0; k < kLeakWarmup; ++k) round(k);
    const int64_t heap0 = heap_in_use(), resident0 = resident_bytes();
    for (int k = 0; k < kLeakRounds; ++k) round(kLeakWarmup + k);
    const int64_t heap = heap_in_use() - heap0, resident = resident_bytes() - resident0;
    const std::string rounds = std::to_string(kLeakRounds) + " rounds of " + what + ", after " +
                               std::to_string(kLeakWarmup) + " rounds of warm-up";
    const char* hint =
        "free everything a call allocates (or keep it in the instance and free it in destroy); memory "
        "that grows with every call runs a long training out of memory";
    if (heap > kHeapSlack)
        return fail("the heap grew by " + std::to_string(heap) + " bytes (" +
                        std::to_string(heap / kLeakRounds) + " a round; at most " +
                        std::to_string(kHeapSlack) + " in all is allowed)",
                    rounds, hint);
    if (kCheckResident && resident > kResidentSlack)
        return fail("the resident size grew by " + std::to_string(resident) + " bytes (" +
                        std::to_string(resident / kLeakRounds) + " a round; at most " +
                        std::to_string(kResidentSlack) + " in all is allowed)",
                    rounds, hint);
    return pass("heap " + std::to_string(heap) + " bytes, resident size " + std::to_string(resident) +
                " bytes of growth over " + rounds);
}

// Create, apply forward and back to 64 rows of 2 blocks, destroy.
result check_transform_leak(env& e) {
    std::shared_ptr<transform_handle> t;
    try {
        t = transform_handle::create(e.plugin, e.opts.params);
    } catch (const std::exception& x) {
        return skip(std::string("the plugin does not create (see params.defaults): ") + x.what());
    }
    const size_t rows = 64, cols = 2 * size_t{t->info().block_size};
    e.drew_random = true;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> in(rows * cols), out(rows * cols);
    for (float& x : in) x = normal(e.rng);
    return check_leak_rounds(
        [&](int k) {
            t = transform_handle::create(e.plugin, e.opts.params);
            t->apply(in.data(), out.data(), rows, cols, static_cast<uint64_t>(k), false);
            t->apply(out.data(), out.data(), rows, cols, static_cast<uint64_t>(k), true);
            t.reset();
        },
        "create, apply forward to " + std::to_string(rows) + " rows of " + std::to_string(cols) +
            " elements, back in place, destroy");
}

// Create, one call on a 16 x 16 tile at the full depth, destroy.
result check_accumulator_leak(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    const acc_call x = random_call(e, *acc, 16, 16, acc->info().depth);
    std::vector<float> d(x.m * x.n);
    return check_leak_rounds(
        [&](int) {
            acc = accumulator_handle::create(e.plugin, e.opts.params);
            acc->dot_add(x.own(d.data()));
            acc.reset();
        },
        "create, dot_add on 16 x 16 outputs at the full depth, destroy");
}

}  // namespace

result check_leak(env& e) {
    result why;
    if (!load_for_check(e, why)) return why;
    if (e.plugin->info.kind == ALTGRAD_KIND_TRANSFORM) return check_transform_leak(e);
    if (e.plugin->info.kind == ALTGRAD_KIND_ACCUMULATOR) return check_accumulator_leak(e);
    if (e.plugin->info.kind != ALTGRAD_KIND_FORMAT) {
        if (!prepare(e, why)) return why;
        constexpr size_t kInputs = 40;
        std::unique_ptr<history_runner> run = make_runner(e, kInputs);
        const size_t instance = run->fresh();
        return check_leak_rounds(
            [&](int k) { run->answer(instance, 0, static_cast<size_t>(k) % kInputs); },
            std::string(e.plugin->info.kind == ALTGRAD_KIND_INTERVENTION ? "observe" : "measure") +
                " on one instance (a " + std::to_string(kInputs) + "-input random history, repeated)");
    }
    try {
        e.format = format_handle::create(e.plugin, e.opts.params);
    } catch (const std::exception& x) {
        return skip(std::string("the plugin does not create (see load.descriptor): ") + x.what());
    }
    const std::vector<float> in = random_probes(e, 1024);
    std::vector<altgrad_rounding> modes;
    for (altgrad_rounding r :
         {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_ROUND_TOWARD_ZERO})
        if (e.format->info().rounding_modes & (1u << r)) modes.push_back(r);
    return check_leak_rounds(
        [&](int) {
            e.format = format_handle::create(e.plugin, e.opts.params);
            for (altgrad_rounding r : modes) quantize(e, in, mode(r));
            decode(e, encode(e, in, mode(ALTGRAD_ROUND_NEAREST_EVEN)));
            e.format.reset();
        },
        "create, quantize " + std::to_string(in.size()) +
            " random values under each rounding mode, encode and "
            "decode them, destroy");
}

}  // namespace altgrad::host::conformance
