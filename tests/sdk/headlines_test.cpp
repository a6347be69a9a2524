// The SDK's side of ABI 1.3 headlines (altgrad/sdk/diagnostic_plugin.hpp):
// the builder fills the ABI struct, the adapter points the vtable at a
// class's `headlines` (or at nothing), and the compile-time rules the
// adapter's static_asserts apply catch each malformed declaration. The rules
// are constexpr, so most of this test is checked when it compiles.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

constexpr altgrad_headline kBuilt = sdk::headline("stiffness_mean", "stiffness")
                                        .title("Stiffness (mean S)")
                                        .label("mean stiffness")
                                        .unit("w units")
                                        .summary(ALTGRAD_HEADLINE_MAX)
                                        .log_scale();
constexpr altgrad_headline kDefaults = sdk::headline("v", "p.v").title("T (t)").label("l");

constexpr bool same(const char* a, const char* b) { return sdk::same_text(a, b); }

// The builder: every setter lands in its field; the defaults.
static_assert(kBuilt.struct_size == sizeof(altgrad_headline));
static_assert(same(kBuilt.value, "stiffness_mean") && same(kBuilt.series, "stiffness"));
static_assert(same(kBuilt.title, "Stiffness (mean S)") && same(kBuilt.label, "mean stiffness"));
static_assert(same(kBuilt.unit, "w units"));
static_assert(kBuilt.summary == ALTGRAD_HEADLINE_MAX && kBuilt.flags == ALTGRAD_HEADLINE_LOG_SCALE);
static_assert(same(kDefaults.unit, "") && kDefaults.summary == ALTGRAD_HEADLINE_MEAN && kDefaults.flags == 0);

// The rules, one broken at a time.
constexpr altgrad_headline kNoTitle[] = {sdk::headline("v", "p.v").label("l")};
constexpr altgrad_headline kBadSeries[] = {sdk::headline("v", "P V").title("T").label("l")};
constexpr altgrad_headline kBadValue[] = {sdk::headline("", "p.v").title("T").label("l")};
constexpr altgrad_headline kHostSeries[] = {sdk::headline("v", "grad_norm").title("T").label("l")};
constexpr altgrad_headline kTwice[] = {sdk::headline("v", "p.v").title("T").label("l"),
                                       sdk::headline("w", "p.v").title("T").label("l")};
constexpr altgrad_headline kTwoLines[] = {sdk::headline("v", "p.v").title("T\nU").label("l")};
constexpr altgrad_headline kEmptyLabel[] = {sdk::headline("v", "p.v").title("T").label("")};
constexpr altgrad_headline kSameValueTwice[] = {sdk::headline("v", "p.mean").title("T").label("l"),
                                                sdk::headline("v", "p.max").title("T").label("l")};
static_assert(!sdk::detail::headline_texts_ok(kNoTitle, 1));
static_assert(!sdk::detail::headline_names_ok(kBadSeries, 1));
static_assert(!sdk::detail::headline_names_ok(kBadValue, 1));
static_assert(sdk::detail::headline_names_ok(kHostSeries, 1) &&
              !sdk::detail::headline_series_free(kHostSeries, 1));
static_assert(!sdk::detail::headline_series_unique(kTwice, 2));
static_assert(!sdk::detail::headline_texts_ok(kTwoLines, 1));
static_assert(!sdk::detail::headline_texts_ok(kEmptyLabel, 1));
static_assert(sdk::detail::headline_series_unique(kSameValueTwice, 2));  // one value, two summaries: fine
static_assert(sdk::detail::headline_kinds_ok(&kBuilt, 1));

// Names: 63 bytes is a name, 64 is not (ALTGRAD_VALUE_NAME_CAPACITY with its NUL).
static_assert(sdk::is_value_name("abcdefghijklmnopqrstuvwxyz0123456789_.abcdefghijklmnopqrstuvwxy"));    // 63
static_assert(!sdk::is_value_name("abcdefghijklmnopqrstuvwxyz0123456789_.abcdefghijklmnopqrstuvwxyz"));  // 64
static_assert(sdk::is_series_name("range.dynamic_range") && !sdk::is_series_name("overflow"));
static_assert(sdk::is_headline_text("", true) && !sdk::is_headline_text("", false));
static_assert(!sdk::is_headline_text(nullptr, true) && !sdk::is_headline_text("a\x7f", true));

struct with_headlines {
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("a", "p.a").title("A (a)").label("a"),
        sdk::headline("b", "p.b").title("B (b)").label("b").summary(ALTGRAD_HEADLINE_MIN),
    };
    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 1; }
    void measure(uint64_t, const altgrad_tensor_view*, size_t, sdk::value_sink&) {}
};
struct without_headlines {
    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 1; }
    void measure(uint64_t, const altgrad_tensor_view*, size_t, sdk::value_sink&) {}
};
with_headlines make_with(const sdk::param_view&) { return {}; }
without_headlines make_without(const sdk::param_view&) { return {}; }

TEST(Headlines, TheAdapterPointsTheVtableAtTheClasssHeadlines) {
    const altgrad_diagnostic_vtable* t = sdk::diagnostic_adapter<with_headlines, &make_with>::vtable();
    ASSERT_TRUE(ALTGRAD_STRUCT_HAS(t, altgrad_diagnostic_vtable, headline_count));
    ASSERT_EQ(t->headline_count, 2u);
    EXPECT_EQ(t->headlines, with_headlines::headlines);  // the class's static array itself, not a copy
    EXPECT_STREQ(t->headlines[1].series, "p.b");
    EXPECT_EQ(t->headlines[1].summary, ALTGRAD_HEADLINE_MIN);
}

TEST(Headlines, AClassWithoutHeadlinesDeclaresNone) {
    const altgrad_diagnostic_vtable* t = sdk::diagnostic_adapter<without_headlines, &make_without>::vtable();
    ASSERT_TRUE(ALTGRAD_STRUCT_HAS(t, altgrad_diagnostic_vtable, headline_count));
    EXPECT_EQ(t->headline_count, 0u);
    EXPECT_EQ(t->headlines, nullptr);
}

}  // namespace
