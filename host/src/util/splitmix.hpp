// SplitMix64's output step (Steele, Lea and Flood, 2014): add the golden
// gamma, then its finaliser. One definition for every seed the host derives
// (a batch's rows, a quantization's stochastic rounding, a transform's signs):
// distinct inputs give unrelated 64-bit outputs.
#pragma once

#include <cstdint>

namespace altgrad::host {

constexpr uint64_t splitmix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace altgrad::host
