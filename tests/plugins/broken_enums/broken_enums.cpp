// Test plugin: a correct E4M3 that stores 1000, no value of any ABI enum, in
// the enum field named by the environment variable ALTGRAD_TEST_BROKEN_ENUM:
// "kind" (the descriptor's), "param_type" (its parameter's), "family" or
// "zero" (get_info's); unset, every field is valid. The host must read each
// such field as an integer and refuse it naming the plugin and the field: a
// C++ load of it as the enum is undefined behaviour (UBSan reports it).
#include <cstdlib>
#include <cstring>

#include "../broken_common.hpp"

namespace {

constexpr int32_t kNoEnumValue = 1000;

bool broken(const char* field) {
    const char* chosen = std::getenv("ALTGRAD_TEST_BROKEN_ENUM");
    return chosen != nullptr && std::strcmp(chosen, field) == 0;
}

// Stored as the integer: the plugin itself loads no out-of-range enum.
template <class E>
void set_enum(E& field, const char* name, E valid) {
    const int32_t v = broken(name) ? kNoEnumValue : static_cast<int32_t>(valid);
    std::memcpy(&field, &v, sizeof v);
}

altgrad_status get_info(const altgrad_format* f, altgrad_format_info* info, altgrad_error* e) {
    const altgrad_status s = broken::e4m3_adapter::get_info(f, info, e);
    if (s == ALTGRAD_STATUS_OK) {
        set_enum(info->family, "family", ALTGRAD_FAMILY_FLOAT);
        set_enum(info->zero, "zero", ALTGRAD_ZERO_SIGNED);
    }
    return s;
}

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static altgrad_param_spec spec = {sizeof(altgrad_param_spec), "unused", ALTGRAD_PARAM_INT, "not read"};
    static altgrad_descriptor descriptor = {sizeof(altgrad_descriptor),
                                            ALTGRAD_KIND_FORMAT,
                                            "broken_enums",
                                            {1, 0, 0},
                                            "Test plugin: E4M3 with an enum field out of range",
                                            &spec,
                                            1};
    // Chosen again at every load: a test process loads the library once per case.
    set_enum(descriptor.kind, "kind", ALTGRAD_KIND_FORMAT);
    set_enum(spec.type, "param_type", ALTGRAD_PARAM_INT);
    static const altgrad_format_vtable table = [] {
        altgrad_format_vtable v = *broken::e4m3_adapter::vtable();
        v.get_info = get_info;
        return v;
    }();
    static const altgrad_entry entry = {
        sizeof(altgrad_entry), ALTGRAD_ABI_VERSION_INIT, &descriptor, &table, nullptr, nullptr};
    return &entry;
}
