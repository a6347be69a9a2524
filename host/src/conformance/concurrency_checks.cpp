// The concurrency.* checks: many threads calling quantize at once get the
// serial results.
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "conformance/checks.hpp"

namespace altgrad::host::conformance {

result check_threads(env& e) {
    e.drew_random = true;
    const altgrad_format_info& i = e.format->info();
    constexpr int kThreads = 8, kRepeats = 10;
    std::vector<std::vector<float>> inputs, serial;
    std::vector<quantize_options> modes;
    for (int t = 0; t < kThreads; ++t) {
        inputs.push_back(random_probes(e, 20000));
        altgrad_rounding r = (t % 2 == 1 && (i.rounding_modes & (1u << ALTGRAD_ROUND_STOCHASTIC)))
                                 ? ALTGRAD_ROUND_STOCHASTIC
                                 : ALTGRAD_ROUND_NEAREST_EVEN;
        quantize_options o = mode(r);
        o.seed = e.opts.seed + static_cast<uint64_t>(t);
        modes.push_back(o);
        serial.push_back(quantize(e, inputs.back(), o));
    }
    std::vector<std::string> problems(kThreads);
    const call_note note("quantize from " + std::to_string(kThreads) + " threads at once (" +
                         std::to_string(inputs[0].size()) + " elements each)");
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t)
        pool.emplace_back([&, t] {
            try {
                for (int rep = 0; rep < kRepeats && problems[t].empty(); ++rep) {
                    const std::vector<float> out = quantize_unnoted(e, inputs[t], modes[t]);
                    for (size_t k = 0; k < out.size(); ++k)
                        if (!same(out[k], serial[t][k])) {
                            problems[t] = "thread " + std::to_string(t) + " element " + std::to_string(k) +
                                          ": " + hex_float(out[k]) + " concurrently, " +
                                          hex_float(serial[t][k]) + " alone|x = " + hex_float(inputs[t][k]) +
                                          " (" + mode_text(modes[t]) + ")";
                            break;
                        }
                }
            } catch (const std::exception& x) {
                problems[t] = std::string(x.what()) + "|";
            }
        });
    for (std::thread& th : pool) th.join();
    for (const std::string& p : problems)
        if (!p.empty()) {
            const size_t bar = p.find('|');
            return fail(p.substr(0, bar), p.substr(bar + 1),
                        "quantize must not write shared state: no global or instance buffers");
        }
    return pass(std::to_string(kThreads) + " threads calling quantize at once match the serial results");
}

}  // namespace altgrad::host::conformance
