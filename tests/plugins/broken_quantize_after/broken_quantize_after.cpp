// Test plugin: a correct E4M3 whose quantize writes through NULL (SIGSEGV) on
// every call after the first N, where N is the environment variable
// ALTGRAD_TEST_CRASH_AFTER_CALLS; without it the plugin never crashes. Lets a
// test crash a training run mid-way and resume it without the variable.
#include <atomic>
#include <cstdlib>

#include "../broken_common.hpp"

namespace {
int* volatile null_pointer = nullptr;  // volatile: the compiler cannot see it is NULL
std::atomic<long long> calls{0};

altgrad_status quantize_then_crash(const altgrad_format* f, altgrad_quantize_args* a, altgrad_error* e) {
    if (const char* after = std::getenv("ALTGRAD_TEST_CRASH_AFTER_CALLS"))
        if (calls.fetch_add(1) >= std::atoll(after)) *null_pointer = 1;
    return broken::e4m3_adapter::quantize(f, a, e);
}
}  // namespace

BROKEN_E4M3_TABLE_PLUGIN(
    "broken_quantize_after", quantize, quantize_then_crash,
    "Test plugin: E4M3 whose quantize writes through NULL after ALTGRAD_TEST_CRASH_AFTER_CALLS calls")
