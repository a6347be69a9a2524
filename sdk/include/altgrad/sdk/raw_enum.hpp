// Reading an enum field that the other side of the ABI filled in. The ABI's
// enums are C enums without a fixed type: a C++ load of a value outside an
// enum's range is undefined behaviour, and a host (args structs, tensor views)
// or a plugin (descriptors, format info, actions) may store any int there. So
// the reader takes the field's bytes as an integer, range-checks it, and only
// then converts it to the enum. Used by the SDK's adapters and by the host.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace altgrad::sdk::detail {

template <class E>
int32_t raw_enum(const E& field) {
    static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int32_t), "C enums are int-sized on this ABI");
    int32_t value;
    std::memcpy(&value, &field, sizeof value);
    return value;
}

}  // namespace altgrad::sdk::detail
