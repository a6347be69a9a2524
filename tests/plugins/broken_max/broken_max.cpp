// Test plugin: a correct E4M3 whose info declares max_finite 480 (and
// lowest_finite -480), while its largest finite code decodes to 448. The kit's
// codes.declared_range must fail.
#include "../broken_common.hpp"

namespace {
struct wrong_max : broken::e4m3 {
    altgrad_format_info info() const {
        altgrad_format_info i = f_.info();
        i.max_finite = 480.0;
        i.lowest_finite = -480.0;
        return i;
    }
};
}  // namespace

BROKEN_E4M3_PLUGIN("broken_max", wrong_max,
                   "Test plugin: E4M3 declaring max_finite 480 (its codes reach 448)")
