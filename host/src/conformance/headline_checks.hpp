// The conformance kit's check of a diagnostic's headline values (ABI 1.3,
// abi/diagnostic.h): measure.headlines. Runs in the kit's child process for
// the check, like every check.
#pragma once

#include "conformance/checks.hpp"

namespace altgrad::host::conformance {

// measure.headlines: the declaration read out of the library is well formed
// (every rule of abi/diagnostic.h, as the loader applies them), and each
// declared value is one measure() writes, for some tensor or for
// ALTGRAD_ALL_TENSORS, over two calls on the kit's random tensors of every
// role the diagnostic asks for (drawn from the check's seed). Skipped for a
// plugin built before ABI 1.3, one that declares none, and one whose entry
// another check refuses.
result check_measure_headlines(env& e);

}  // namespace altgrad::host::conformance
