// Run configs and --set: the input is a config's TOML text, then optionally
// NUL-separated --set overrides ("KEY=VALUE"), through parse_config, as `run
// CONFIG --set ...` does. A config that parses must satisfy the documented
// round trip parse_config(to_toml(c)) == c.
#include <vector>

#include "config/run_config.hpp"
#include "config/writer.hpp"
#include "fuzz_support.hpp"

using namespace altgrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string input = fuzz::bytes_of(data, size);
    const size_t nul = input.find('\0');
    const std::string toml_text = input.substr(0, nul);
    std::vector<std::string> overrides;
    for (size_t pos = nul; pos != std::string::npos && pos < input.size();) {
        const size_t next = input.find('\0', pos + 1);
        overrides.push_back(
            input.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1));
        pos = next;
    }
    fuzz::refusing_only_with_host_errors([&] {
        const host::config::run_config c = host::config::parse_config(toml_text, "fuzz.toml", overrides);
        const std::string written = host::config::to_toml(c);
        host::config::run_config again;
        try {
            again = host::config::parse_config(written, "fuzz.toml");
        } catch (const host::error& e) {
            fuzz::finding(std::string("to_toml wrote a config that parse_config refuses: ") + e.what() +
                          "\n" + written);
        }
        if (again != c) fuzz::finding("parse_config(to_toml(c)) != c:\n" + written);
    });
    return 0;
}
