// Test plugin: an E4M3 as the ABI 1.1 headers built it. Its entry says 1.1
// and its quantize, encode and decode read the args structs only up to their
// 1.1 end (the block-scale fields of ABI 1.2 lie beyond what it knows), so
// given block scales it would use `scale` for every element. The host must
// split a block-scaled call into one call per block for it.
#include <cstddef>

#include "../broken_common.hpp"

namespace {

// The 1.1 view of a call: the struct cut where 1.1 ended (the SDK adapter
// then reads `scale` only, as a 1.1 plugin did).
template <class Args>
Args as_abi11(const Args* a) {
    Args old = *a;
    old.struct_size = offsetof(Args, block_scales);
    old.block_scales = nullptr;
    old.block_size = 0;
    return old;
}

// Quantize or encode through the correct adapter, seeing the 1.1 struct only;
// the counts go back into the caller's struct.
template <class Args, altgrad_status (*Call)(const altgrad_format*, Args*, altgrad_error*)>
altgrad_status convert11(const altgrad_format* f, Args* a, altgrad_error* e) {
    if (a == nullptr) return Call(f, a, e);
    Args old = as_abi11(a);
    const altgrad_status s = Call(f, &old, e);
    a->overflow_count = old.overflow_count;
    a->underflow_count = old.underflow_count;
    return s;
}

altgrad_status decode11(const altgrad_format* f, altgrad_decode_args* a, altgrad_error* e) {
    if (a == nullptr) return broken::e4m3_adapter::decode(f, a, e);
    altgrad_decode_args old = as_abi11(a);
    return broken::e4m3_adapter::decode(f, &old, e);
}

const altgrad_format_vtable* table() {
    static const altgrad_format_vtable t = {
        sizeof(altgrad_format_vtable),
        &broken::e4m3_adapter::create,
        &broken::e4m3_adapter::destroy,
        &broken::e4m3_adapter::get_info,
        &convert11<altgrad_quantize_args, &broken::e4m3_adapter::quantize>,
        &convert11<altgrad_encode_args, &broken::e4m3_adapter::encode>,
        &decode11};
    return &t;
}

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {sizeof(altgrad_descriptor),
                                                  ALTGRAD_KIND_FORMAT,
                                                  "abi11_format",
                                                  {1, 0, 0},
                                                  "Test plugin: an ABI 1.1 E4M3 (no block scales)",
                                                  nullptr,
                                                  0};
    static const altgrad_entry entry = {
        sizeof(altgrad_entry), {1, 1, 0}, &descriptor, table(), nullptr, nullptr};
    return &entry;
}
