// The pinned CPU kernels (cpu_kernels.hpp).
#include "util/cpu_kernels.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

namespace altgrad::host {

namespace {

constexpr const char* kChoiceVariable = "ALTGRAD_CPU_KERNELS";  // "native": no pin

std::string& note() {
    static std::string n;
    return n;
}

bool is(const char* variable, const std::string& value) {
    const char* v = std::getenv(variable);
    return v != nullptr && value == v;
}

bool has_avx2_and_fma() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

}  // namespace

cpu_kernel_pin cpu_kernel_pin_here() {
    cpu_kernel_pin pin;
    pin.variables = {{"OPENBLAS_CORETYPE", "Haswell"}, {"ATEN_CPU_CAPABILITY", "avx2"}};
    pin.name = "OpenBLAS Haswell, ATen avx2";
    if (is(kChoiceVariable, "native"))
        pin.unpinned = "ALTGRAD_CPU_KERNELS=native: bits may differ between CPU models";
    else if (!has_avx2_and_fma())
        pin.unpinned = "not pinned: no AVX2 and FMA here; bits may differ from runs pinned to " + pin.name;
    return pin;
}

bool cpu_kernels_pinned_in_environment(const cpu_kernel_pin& pin) {
    for (const auto& [variable, value] : pin.variables)
        if (!is(variable.c_str(), value)) return false;
    return true;
}

void pin_cpu_kernels(char** argv) {
    const cpu_kernel_pin pin = cpu_kernel_pin_here();
    if (!pin.unpinned.empty()) {
        note() = "as this CPU chooses them (" + pin.unpinned + ")";
        return;
    }
    if (cpu_kernels_pinned_in_environment(pin)) {
        note() = pin.name +
                 " (pinned: the same bits on every x86-64 machine with AVX2; ALTGRAD_CPU_KERNELS=native "
                 "unpins)";
        return;
    }
    for (const auto& [variable, value] : pin.variables) ::setenv(variable.c_str(), value.c_str(), 1);
    ::execv("/proc/self/exe", argv);
    note() =
        "as this CPU chooses them (the pin's re-execution failed: " + std::string(std::strerror(errno)) + ")";
}

std::string cpu_kernels_note() { return note().empty() ? "as this CPU chooses them (not pinned)" : note(); }

}  // namespace altgrad::host
