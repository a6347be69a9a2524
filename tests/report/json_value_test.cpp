// The strict JSON reader the report reads metrics.jsonl and summary.json with.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "util/json_value.hpp"

namespace altgrad::host::json {
namespace {

TEST(JsonValue, ReadsWhatTheHostWrites) {
    const value v = parse(
        R"({"step": 7, "diagnostic": "stiffness", "tensor": "*", "values": {"stiffness_mean": 0.0078125, "x": null},)"
        R"( "list": [1, -2.5e-3, true, false, "a\"b\\c\n\u00e9\ud83d\ude00"]})");
    ASSERT_TRUE(v.is_object());
    EXPECT_EQ(v.members()[1].first, "diagnostic");
    EXPECT_EQ(v.number_at("step"), 7.0);
    EXPECT_EQ(v.string_at("tensor"), "*");
    const value* values = v.find("values");
    ASSERT_NE(values, nullptr);
    EXPECT_EQ(values->number_at("stiffness_mean"), 0.0078125);
    ASSERT_NE(values->find("x"), nullptr);
    EXPECT_TRUE(values->find("x")->is_null());
    EXPECT_FALSE(values->number_at("x").has_value());
    const std::vector<value>& list = v.find("list")->items();
    ASSERT_EQ(list.size(), 5u);
    EXPECT_EQ(list[1].as_number(), -2.5e-3);
    EXPECT_TRUE(list[2].as_bool());
    EXPECT_EQ(list[4].as_string(), "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80");
    EXPECT_EQ(parse(" 12 ").as_number(), 12.0);
    EXPECT_EQ(parse("{}").members().size(), 0u);
    EXPECT_EQ(parse("[]").items().size(), 0u);
}

TEST(JsonValue, RepeatedKeyFindsTheLast) {
    const value v = parse(R"({"a": 1, "a": 2})");
    EXPECT_EQ(v.members().size(), 2u);
    EXPECT_EQ(v.number_at("a"), 2.0);
}

TEST(JsonValue, RejectsWhatJsonDoesNotAllow) {
    for (const char* bad : {"{\"a\": 1,}", "[1,]", "{\"a\": NaN}", "{\"a\": Infinity}", "01", "1.", ".5", "+1",
                            "0x10", "{'a': 1}", "{\"a\" 1}", "[1] 2", "\"tab\there\"", "\"\\x\"", "\"\\ud800\"", "nul",
                            "tru e", "{\"a\": 1} x", "", "// c\n1"}) {
        try {
            parse(bad);
            ADD_FAILURE() << "accepted: " << bad;
        } catch (const parse_error& e) {
            EXPECT_NE(std::string(e.what()).find("at offset"), std::string::npos) << e.what();
        }
    }
}

TEST(JsonValue, TellsATruncatedLineFromGarbage) {
    // Every proper prefix of a line is "truncated": a kill mid-write.
    const std::string line =
        R"({"step": 35, "loss": 2.25, "lr": null, "tensor": "a\"b", "values": {"x": [1e-3, true]}})";
    for (size_t n = 0; n < line.size(); ++n) {
        try {
            parse(line.substr(0, n));
            ADD_FAILURE() << "accepted a prefix: " << line.substr(0, n);
        } catch (const parse_error& e) {
            EXPECT_TRUE(e.truncated) << line.substr(0, n) << ": " << e.what();
        }
    }
    EXPECT_NO_THROW(parse(line));
    for (const char* garbage : {"{\"step\": 3x", "{\"step\": 3, \"loss\": }", "]", "{\"step\" 3"}) {
        try {
            parse(garbage);
            ADD_FAILURE() << "accepted: " << garbage;
        } catch (const parse_error& e) {
            EXPECT_FALSE(e.truncated) << garbage << ": " << e.what();
        }
    }
}

TEST(JsonValue, DeepNestingIsAnErrorNotACrash) {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    EXPECT_THROW(parse(deep), parse_error);
}

}  // namespace
}  // namespace altgrad::host::json
