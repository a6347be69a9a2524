// The names of an enum's values as users write and read them (configs, the
// command line, manifests, metrics, reports), in both directions, with the
// list of valid names for error messages. One table per enum, so a name means
// the same value everywhere it appears.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace altgrad::host {

template <class E>
class name_table {
public:
    // `unknown`: the name of a value outside the table (an ABI value from a newer plugin).
    name_table(std::initializer_list<std::pair<E, const char*>> entries, const char* unknown = "unknown")
        : entries_(entries), unknown_(unknown) {}
    // From a table made at run time (e.g. from a table of richer entries).
    explicit name_table(std::vector<std::pair<E, const char*>> entries, const char* unknown = "unknown")
        : entries_(std::move(entries)), unknown_(unknown) {}

    const char* name(E value) const {
        for (const auto& [v, n] : entries_)
            if (v == value) return n;
        return unknown_;
    }

    std::optional<E> value(std::string_view name) const {
        for (const auto& [v, n] : entries_)
            if (name == n) return v;
        return std::nullopt;
    }

    // "a, b, c", in table order.
    std::string list() const {
        std::string s;
        for (const auto& [v, n] : entries_) s += (s.empty() ? "" : ", ") + std::string(n);
        return s;
    }

    const std::vector<std::pair<E, const char*>>& entries() const { return entries_; }

private:
    std::vector<std::pair<E, const char*>> entries_;
    const char* unknown_;
};

}  // namespace altgrad::host
