// The pinned CPU kernels (cpu_kernels.hpp).
#include "util/cpu_kernels.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

namespace altgrad::host {

namespace {

constexpr const char* kBlasVariable = "OPENBLAS_CORETYPE";
constexpr const char* kBlasCore = "Haswell";
constexpr const char* kAtenVariable = "ATEN_CPU_CAPABILITY";
constexpr const char* kAtenCapability = "avx2";
constexpr const char* kChoiceVariable = "ALTGRAD_CPU_KERNELS";  // "native": no pin

std::string& note() {
    static std::string n;
    return n;
}

bool is(const char* variable, const char* value) {
    const char* v = std::getenv(variable);
    return v != nullptr && std::strcmp(v, value) == 0;
}

bool has_avx2_and_fma() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

}  // namespace

void pin_cpu_kernels(char** argv) {
    const std::string pinned = std::string("OpenBLAS ") + kBlasCore + ", ATen " + kAtenCapability;
    if (is(kChoiceVariable, "native")) {
        note() = "as this CPU chooses them (ALTGRAD_CPU_KERNELS=native: bits may differ between CPU models)";
        return;
    }
    if (!has_avx2_and_fma()) {
        note() =
            "as this CPU chooses them (not pinned: no AVX2 and FMA here; bits may differ from runs pinned "
            "to " +
            pinned + ")";
        return;
    }
    if (is(kBlasVariable, kBlasCore) && is(kAtenVariable, kAtenCapability)) {
        note() = pinned +
                 " (pinned: the same bits on every x86-64 machine with AVX2; ALTGRAD_CPU_KERNELS=native "
                 "unpins)";
        return;
    }
    ::setenv(kBlasVariable, kBlasCore, 1);
    ::setenv(kAtenVariable, kAtenCapability, 1);
    ::execv("/proc/self/exe", argv);
    note() =
        "as this CPU chooses them (the pin's re-execution failed: " + std::string(std::strerror(errno)) + ")";
}

std::string cpu_kernels_note() { return note().empty() ? "as this CPU chooses them (not pinned)" : note(); }

}  // namespace altgrad::host
