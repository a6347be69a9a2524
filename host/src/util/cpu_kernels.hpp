// The CPU kernels a training run computes with, the same on every x86-64
// machine. OpenBLAS (LibTorch's BLAS here) and ATen choose their matrix and
// vector kernels by CPU model, and those round differently: the demo's
// final loss was 2.55004 on a Zen 4 and 2.54717 on a Zen 5. A training
// command pins both to the kernels of x86-64 with AVX2 and FMA (docs/study.md,
// "Reproducing a run"), so the same config gives the same bits anywhere;
// Python's `import altgrad` sets the same pin (docs/python.md) from
// cpu_kernel_pin, the one definition of it.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace altgrad::host {

// The pin: the environment variables OpenBLAS and ATen read when they are
// loaded (OPENBLAS_CORETYPE=Haswell, ATEN_CPU_CAPABILITY=avx2), and, when
// this process should not be pinned, why (non-empty `unpinned`): the CPU
// lacks AVX2 or FMA (those kernels' instructions: the CPU's own choice
// stays), or ALTGRAD_CPU_KERNELS=native asks for the CPU's own choice.
struct cpu_kernel_pin {
    std::vector<std::pair<std::string, std::string>> variables;
    std::string name;      // "OpenBLAS Haswell, ATen avx2", for notes
    std::string unpinned;  // why no pin applies here; empty: it does
};
cpu_kernel_pin cpu_kernel_pin_here();

// Whether the environment holds the pin's variables already.
bool cpu_kernels_pinned_in_environment(const cpu_kernel_pin& pin);

// OpenBLAS reads OPENBLAS_CORETYPE when it is loaded, before main: the pin
// re-executes this program (/proc/self/exe, the same arguments) with the
// pin's variables set, unless they are set so already or no pin applies.
// Returns when no re-execution is needed, or when the exec fails
// (cpu_kernels_note says so).
void pin_cpu_kernels(char** argv);

// One line for a run's log: which kernels, and whether they are pinned.
std::string cpu_kernels_note();

}  // namespace altgrad::host
