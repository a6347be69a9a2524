// Test plugin: a diagnostic (it writes `ok` for every weight tensor) whose
// headline declaration breaks the one rule of abi/diagnostic.h that the
// environment variable ALTGRAD_TEST_BROKEN_HEADLINE names; unset, "series".
// The host must refuse it at load with one line naming the plugin and the
// field, and the conformance kit's measure.headlines must fail it:
//   series       series "Stiffness Mean" (not [a-z0-9_.]+)
//   host_series  series "loss" (one of the host's own)
//   duplicate    two headlines with one series
//   value        value NULL
//   title        title ""
//   label        label without a NUL in its first 128 bytes
//   unit         unit "a\nb" (a control character)
//   utf8         title "bad \xff" (not UTF-8)
//   summary      summary 7
//   flags        flags 6
//   count        headline_count 65 (ALTGRAD_HEADLINE_MAX_COUNT is 64)
//   null         headlines NULL, headline_count 1
//   struct_size  struct_size 8
//   valid        a well-formed declaration (the control case)
// The SDK's adapter would refuse to compile any of these, so the table is
// written here, around the adapter's functions.
#include <cstdlib>
#include <cstring>
#include <string>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class writes_ok {
public:
    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 1; }
    void measure(uint64_t, const altgrad_tensor_view*, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i) out.add(static_cast<uint32_t>(i), "ok", 1.0);
    }
};

writes_ok make(const sdk::param_view&) { return writes_ok(); }
using adapter = sdk::diagnostic_adapter<writes_ok, &make>;

// 200 bytes without a NUL: a label that never ends within the rule's 128.
struct unterminated {
    char text[200];
    unterminated() { std::memset(text, 'l', sizeof text); }
};
const unterminated kNoNul;

altgrad_headline good(const char* series) {
    return {sizeof(altgrad_headline), "ok", series, "OK (mean over tensors of 1)", "ok", "",
            ALTGRAD_HEADLINE_MEAN,    0};
}

bool broken(const char* rule) {
    const char* chosen = std::getenv("ALTGRAD_TEST_BROKEN_HEADLINE");
    return std::strcmp(chosen != nullptr ? chosen : "series", rule) == 0;
}

// The declaration of the rule chosen now, into `h` (room for 65) and `count`.
void declare(altgrad_headline* h, size_t& count, bool& null_array) {
    count = 1;
    null_array = false;
    h[0] = good("broken_headlines.ok");
    if (broken("series")) h[0].series = "Stiffness Mean";
    if (broken("host_series")) h[0].series = "loss";
    if (broken("duplicate")) {
        h[1] = good("broken_headlines.ok");
        count = 2;
    }
    if (broken("value")) h[0].value = nullptr;
    if (broken("title")) h[0].title = "";
    if (broken("label")) h[0].label = kNoNul.text;
    if (broken("unit")) h[0].unit = "a\nb";
    if (broken("utf8")) h[0].title = "bad \xff";
    if (broken("summary")) {
        const int32_t seven = 7;  // stored as the integer: no out-of-range enum is loaded here
        std::memcpy(&h[0].summary, &seven, sizeof seven);
    }
    if (broken("flags")) h[0].flags = 6;
    if (broken("count")) {
        for (size_t i = 0; i < 65; ++i) h[i] = good("broken_headlines.ok");
        count = 65;
    }
    if (broken("null")) null_array = true;
    if (broken("struct_size")) h[0].struct_size = 8;
}

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static altgrad_headline headlines[65];
    static altgrad_diagnostic_vtable table = *adapter::vtable();
    // Chosen again at every call: a test process loads the library once per case.
    size_t count = 0;
    bool null_array = false;
    declare(headlines, count, null_array);
    table.headlines = null_array ? nullptr : headlines;
    table.headline_count = count;
    static const altgrad_descriptor descriptor = {
        sizeof(altgrad_descriptor),
        ALTGRAD_KIND_DIAGNOSTIC,
        "broken_headlines",
        {1, 0, 0},
        "Test plugin: a headline declaration that breaks one rule of "
        "abi/diagnostic.h",
        nullptr,
        0};
    static const altgrad_entry entry = {
        sizeof(altgrad_entry), ALTGRAD_ABI_VERSION_INIT, &descriptor, nullptr, nullptr, &table};
    return &entry;
}
