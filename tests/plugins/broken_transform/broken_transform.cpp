// Test plugin: a correct Hadamard transform (d = 16) with the bug the
// environment variable ALTGRAD_TEST_BROKEN_TRANSFORM names planted, for the
// conformance kit's transform.* checks to catch; unset, it is correct:
//   "unnormalised"  H_d without the 1/sqrt(d): not orthogonal
//   "row_index"     every odd row of a call negated: depends on the row index
//   "hidden_seed"   declares uses_seed = 0 but negates the block when seed is odd
//   "in_place"      in place (output == input), element 0 comes out doubled
//   "lenient"       a row length that is not a multiple of 16 is accepted (OK, nothing done)
#include <cstdlib>
#include <cstring>

#include <altgrad/sdk/hadamard.hpp>
#include <altgrad/sdk/transform_plugin.hpp>

namespace {

bool broken(const char* bug) {
    const char* chosen = std::getenv("ALTGRAD_TEST_BROKEN_TRANSFORM");
    return chosen != nullptr && std::strcmp(chosen, bug) == 0;
}

class planted_transform {
public:
    altgrad_transform_info info() const {
        altgrad_transform_info i{};
        i.block_size = 16;
        i.self_inverse = 1;
        return i;
    }
    void apply(float* data, size_t rows, size_t cols, uint64_t seed, bool) const {
        const size_t blocks = rows * (cols / 16);
        if (broken("unnormalised")) {
            for (size_t b = 0; b < blocks; ++b) altgrad::sdk::fwht_unnormalised(data + 16 * b, 16);
            return;
        }
        altgrad::sdk::fwht(data, blocks, 16);
        for (size_t r = 0; r < rows; ++r)
            if ((broken("row_index") && r % 2 == 1) || (broken("hidden_seed") && seed % 2 == 1))
                for (size_t j = 0; j < cols; ++j) data[r * cols + j] = -data[r * cols + j];
    }
};

planted_transform make(const altgrad::sdk::param_view&) { return {}; }

using adapter = altgrad::sdk::transform_adapter<planted_transform, &make>;

altgrad_status apply(const altgrad_transform* t, const altgrad_transform_args* a, altgrad_error* e) {
    if (broken("lenient") && a != nullptr && a->cols % 16 != 0) return ALTGRAD_STATUS_OK;
    const altgrad_status s = adapter::apply(t, a, e);
    if (broken("in_place") && s == ALTGRAD_STATUS_OK && a->rows * a->cols > 0 && a->output == a->input)
        a->output[0] *= 2;
    return s;
}

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {sizeof(altgrad_descriptor),
                                                  ALTGRAD_KIND_TRANSFORM,
                                                  "broken_transform",
                                                  {1, 0, 0},
                                                  "a Hadamard transform with a planted bug",
                                                  nullptr,
                                                  0};
    static const altgrad_transform_vtable table = {sizeof(altgrad_transform_vtable), adapter::create,
                                                   adapter::destroy, adapter::get_info, &apply};
    static const altgrad_entry entry = {
        sizeof(altgrad_entry), ALTGRAD_ABI_VERSION_INIT, &descriptor, nullptr, nullptr, nullptr, &table};
    return &entry;
}
