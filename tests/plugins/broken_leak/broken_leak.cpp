// Test plugin: E4M3 whose quantize allocates 4 KiB a call, touches it and
// never frees it: every answer is right, and a long run still dies of it.
#include <cstdlib>
#include <cstring>

#include "../broken_common.hpp"

namespace {
void* volatile last_leak = nullptr;  // volatile: the allocation cannot be optimised away

altgrad_status quantize_leaking(const altgrad_format* f, altgrad_quantize_args* a, altgrad_error* e) {
    void* p = std::malloc(4096);
    if (p != nullptr) std::memset(p, 1, 4096);
    last_leak = p;
    return broken::e4m3_adapter::quantize(f, a, e);
}
}  // namespace

BROKEN_E4M3_TABLE_PLUGIN("broken_leak", quantize, quantize_leaking,
                         "Test plugin: E4M3 whose quantize leaks 4 KiB a call")
