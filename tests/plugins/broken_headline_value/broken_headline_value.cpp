// Test plugin: a diagnostic whose headline declaration is well formed but
// names a value it never writes: it writes `written` for every tensor and
// declares headlines for `written` and `never_written`. The host loads it
// (the declaration breaks no rule the loader can see); the conformance kit's
// measure.headlines must fail it, naming `never_written`. Its identity comes
// from its manifest (the short form of the macro).
#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class writes_one_value {
public:
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("written", "broken_headline_value.written")
            .title("Written (one per weight tensor, the tensor's element count)")
            .label("elements"),
        sdk::headline("never_written", "broken_headline_value.never_written")
            .title("Never written (declared, not measured)")
            .label("nothing")
            .summary(ALTGRAD_HEADLINE_MAX),
    };

    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 1; }
    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i)
            out.add(static_cast<uint32_t>(i), "written", static_cast<double>(tensors[i].count));
    }
};

writes_one_value make(const sdk::param_view&) { return writes_one_value(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN(make)
