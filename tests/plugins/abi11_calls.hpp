// Shared by abi11_format and rebuilt_abi11_format: the correct E4M3
// (broken_common.hpp) as code written for ABI 1.1 sees every call. Its
// get_info fills the info struct up to 1.1's end (no capabilities) and its
// quantize, encode and decode read the args structs up to 1.1's end (the
// block scales of 1.2 and the random bits of 1.4 lie beyond what it knows),
// so given block scales it would use `scale` for every element. What the
// plugin's entry reports (1.1, or the version of the headers it was rebuilt
// against) is each plugin's own.
#pragma once

#include <cstddef>

#include "broken_common.hpp"

namespace abi11 {

// The 1.1 view of a call: the struct cut where 1.1 ended (the SDK adapter
// then reads `scale` only and all 32 random bits, as a 1.1 plugin did).
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
altgrad_status convert(const altgrad_format* f, Args* a, altgrad_error* e) {
    if (a == nullptr) return Call(f, a, e);
    Args old = as_abi11(a);
    const altgrad_status s = Call(f, &old, e);
    a->overflow_count = old.overflow_count;
    a->underflow_count = old.underflow_count;
    return s;
}

inline altgrad_status decode(const altgrad_format* f, altgrad_decode_args* a, altgrad_error* e) {
    if (a == nullptr) return broken::e4m3_adapter::decode(f, a, e);
    altgrad_decode_args old = as_abi11(a);
    return broken::e4m3_adapter::decode(f, &old, e);
}

// The info as far as 1.1's struct went (it ended at memory_kinds); the host's
// struct beyond stays as the host left it.
inline altgrad_status get_info(const altgrad_format* f, altgrad_format_info* info, altgrad_error* e) {
    if (info == nullptr || info->struct_size < offsetof(altgrad_format_info, capabilities))
        return broken::e4m3_adapter::get_info(f, info, e);
    const size_t host_size = info->struct_size;
    info->struct_size = offsetof(altgrad_format_info, capabilities);
    const altgrad_status s = broken::e4m3_adapter::get_info(f, info, e);
    info->struct_size = host_size;
    return s;
}

inline const altgrad_format_vtable* table() {
    static const altgrad_format_vtable t = {sizeof(altgrad_format_vtable),
                                            &broken::e4m3_adapter::create,
                                            &broken::e4m3_adapter::destroy,
                                            &get_info,
                                            &convert<altgrad_quantize_args, &broken::e4m3_adapter::quantize>,
                                            &convert<altgrad_encode_args, &broken::e4m3_adapter::encode>,
                                            &decode};
    return &t;
}

}  // namespace abi11
