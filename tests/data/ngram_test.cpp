// Held-out n-gram cross-entropy (host/src/data/ngram.hpp): interpolated
// Witten-Bell, checked against probabilities worked out by hand.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/ngram.hpp"
#include "util/error.hpp"

namespace altgrad::test {
namespace {

using host::data::witten_bell_cross_entropy;

double wb(const std::vector<uint16_t>& train, const std::vector<uint16_t>& test, int64_t vocab, int order) {
    return witten_bell_cross_entropy(train.data(), train.size(), test.data(), test.size(), vocab, order);
}

std::vector<uint16_t> alternating(size_t pairs) {  // "abab...ab": 0 1 0 1 ...
    std::vector<uint16_t> t;
    for (size_t i = 0; i < pairs; ++i) t.insert(t.end(), {0, 1});
    return t;
}

TEST(NgramWittenBell, AlternatingCorpus) {
    // Train "ab" x 50 (vocabulary {a, b}). Unigram: C(a) = C(b) = 50, N = 100, T = 2:
    // P1(a) = (50 + 2 * 1/2) / (100 + 2) = 1/2 exactly, so any test text scores ln 2.
    const std::vector<uint16_t> train = alternating(50);
    const std::vector<uint16_t> test = alternating(3);  // "ababab"
    EXPECT_NEAR(wb(train, test, 2, 1), std::log(2.0), 1e-12);
    // Bigram: after a always b (C(a.) = 50, T = 1); after b always a (C(b.) = 49, T = 1):
    //   P2(b|a) = (50 + 1/2) / 51,   P2(a|b) = (49 + 1/2) / 50.
    // "ababab" scores its 5 tokens after the first: 3 times b|a, 2 times a|b.
    const double h2 = -(3 * std::log(50.5 / 51) + 2 * std::log(49.5 / 50)) / 5;
    EXPECT_NEAR(wb(train, test, 2, 2), h2, 1e-12);
    EXPECT_NEAR(h2, 0.00993, 1e-5);
    // Trigram: C(ab.) = 49 (all a), C(ba.) = 49 (all b), T = 1 each:
    //   P3(a|ab) = (49 + P2(a|b)) / 50,   P3(b|ba) = (49 + P2(b|a)) / 50.
    // "ababab" scores its last 4 tokens: a|ab, b|ba, a|ab, b|ba.
    const double pa = (49 + 49.5 / 50) / 50, pb = (49 + 50.5 / 51) / 50;
    EXPECT_NEAR(wb(train, test, 2, 3), -(2 * std::log(pa) + 2 * std::log(pb)) / 4, 1e-12);
    // The more "ab" it has seen, the nearer the model comes to certainty (cross-entropy 0).
    EXPECT_LT(wb(alternating(5000), test, 2, 2), 1e-3);
    EXPECT_LT(wb(alternating(5000), test, 2, 2), h2);
}

TEST(NgramWittenBell, ThreeSymbolsByHand) {
    // Train "aab" (a = 0, b = 1; vocabulary {a, b, c}, c never seen), test "aabc".
    // Unigram: C(a) = 2, C(b) = 1, N = 3, T = 2, P0 = 1/3:
    //   P1(a) = (2 + 2/3) / 5 = 8/15,  P1(b) = (1 + 2/3) / 5 = 1/3,  P1(c) = (2/3) / 5 = 2/15   (sum 1)
    // Bigram: context a: C(aa) = C(ab) = 1, C(a.) = 2, T(a) = 2; context b never precedes anything:
    //   P2(a|a) = (1 + 2 * 8/15) / 4 = 31/60,  P2(b|a) = (1 + 2/3) / 4 = 5/12,  P2(c|a) = (4/15) / 4 = 1/15
    //   P2(x|b) = P1(x)
    // Trigram: context aa: C(aab) = 1, T = 1: P3(b|aa) = (1 + 5/12) / 2 = 17/24; context ab unseen: P2.
    const std::vector<uint16_t> train = {0, 0, 1}, test = {0, 0, 1, 2};
    EXPECT_NEAR(wb(train, test, 3, 1), -(2 * std::log(8.0 / 15) + std::log(1.0 / 3) + std::log(2.0 / 15)) / 4,
                1e-12);
    // Bigram scores a|a, b|a, c|b.
    EXPECT_NEAR(wb(train, test, 3, 2), -(std::log(31.0 / 60) + std::log(5.0 / 12) + std::log(2.0 / 15)) / 3,
                1e-12);
    // Trigram scores b|aa and c|ab = P2(c|b) = P1(c).
    EXPECT_NEAR(wb(train, test, 3, 3), -(std::log(17.0 / 24) + std::log(2.0 / 15)) / 2, 1e-12);
    // Order 0 statistics alone on an unseen text: the uniform model's ln V whatever the order.
    EXPECT_NEAR(wb({}, test, 3, 3), std::log(3.0), 1e-12);
}

TEST(NgramWittenBell, ShortTestAndErrors) {
    const std::vector<uint16_t> train = {0, 1, 0};
    EXPECT_TRUE(std::isnan(wb(train, {0, 1}, 2, 3)));  // nothing to score: fewer tokens than the order
    auto message = [&](const std::vector<uint16_t>& t, int64_t vocab, int order) -> std::string {
        try {
            wb(train, t, vocab, order);
            return "";
        } catch (const host::error& e) {
            return e.what();
        }
    };
    EXPECT_EQ(message({0, 1}, 2, 0), "n-gram order 0: expected 1..4");
    EXPECT_EQ(message({0, 1}, 2, 5), "n-gram order 5: expected 1..4");
    EXPECT_EQ(message({0, 1}, 0, 2), "n-gram vocabulary 0: expected 1..65536");
    EXPECT_EQ(message({0, 2}, 2, 2), "n-gram: test token 1 is 2, not below the vocabulary size 2");
    EXPECT_EQ(message({0, 1}, 1, 2), "n-gram: training token 1 is 1, not below the vocabulary size 1");
}

}  // namespace
}  // namespace altgrad::test
