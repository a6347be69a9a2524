// Test plugin: a correct E4M3 whose library constructor writes through NULL,
// so merely loading it kills the process with SIGSEGV. Discovery must probe it
// in a child process and list it as broken, naming the signal.
#include "../broken_common.hpp"

namespace {
int* volatile null_pointer = nullptr;  // volatile: the compiler cannot see it is NULL

__attribute__((constructor)) void crash_on_load() { *null_pointer = 1; }
}  // namespace

BROKEN_E4M3_PLUGIN("broken_load_segv", broken::e4m3,
                   "Test plugin: E4M3 whose library constructor writes through NULL")
