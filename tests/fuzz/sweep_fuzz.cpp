// Sweep files: the input is a sweep file's TOML text, through parse_sweep and
// then expand_points and run_name, as `sweep` does before it loads the
// configs. Every point must be named with only the characters run names may
// hold, however odd the keys and values.
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "sweep/sweep_file.hpp"

using namespace altgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string input = fuzz::bytes_of(data, size);
    fuzz::refusing_only_with_host_errors([&] {
        const host::sweep::sweep_spec spec = host::sweep::parse_sweep(input, "fuzz/sweep.toml");
        const std::vector<host::sweep::point> points = host::sweep::expand_points(spec);
        std::vector<std::string> keys;
        for (const host::sweep::point& p : points)
            for (const std::string& o : p) keys.push_back(o.substr(0, o.find('=')));
        for (const host::sweep::point& p : points) {
            const std::string name = host::sweep::run_name("c", p, keys, 42);
            if (name.find_first_not_of(
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.=+-") !=
                std::string::npos)
                fuzz::finding("a run name with a character outside [A-Za-z0-9_.=+-]: " + name);
        }
    });
    return 0;
}
