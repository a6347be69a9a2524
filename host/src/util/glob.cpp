#include "util/glob.hpp"

namespace altgrad::host {

bool glob_match(std::string_view pattern, std::string_view name) {
    size_t p = 0, n = 0, star = std::string_view::npos, mark = 0;
    while (n < name.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
            ++p;
            ++n;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++;  // remember the star; first let it match nothing
            mark = n;
        } else if (star != std::string_view::npos) {
            p = star + 1;  // let the last star swallow one more character
            n = ++mark;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

}  // namespace altgrad::host
