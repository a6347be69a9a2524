// Philox4x32-10: Random123's known-answer vectors, an independent
// implementation, and the element numbering of random_bits / fill_random_bits.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include <altgrad/sdk/philox.hpp>

#include "reference.hpp"

namespace {

using agtest::ref_philox4x32_10;
using agtest::ref_random_bits;

struct Kat {
    std::array<uint32_t, 4> ctr;
    std::array<uint32_t, 2> key;
    std::array<uint32_t, 4> expected;
};

// Random123 1.x, tests/kat_vectors, the three "philox4x32 10" lines
// (columns: counter[4], key[2], result[4]).
const Kat kKats[] = {
    {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u},
     {0x00000000u, 0x00000000u},
     {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
    {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
     {0xffffffffu, 0xffffffffu},
     {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
    {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
     {0xa4093822u, 0x299f31d0u},
     {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
};

TEST(Philox, SdkMatchesRandom123KnownAnswerVectors) {
    for (const Kat& k : kKats) {
        const altgrad::sdk::philox_block b =
            altgrad::sdk::philox4x32_10(k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3], k.key[0], k.key[1]);
        for (int i = 0; i < 4; ++i)
            EXPECT_EQ(b.word[i], k.expected[i])
                << "vector with counter word0 " << std::hex << k.ctr[0] << ", word " << i;
    }
}

TEST(Philox, IndependentReferenceMatchesRandom123KnownAnswerVectors) {
    for (const Kat& k : kKats) EXPECT_EQ(ref_philox4x32_10(k.ctr, k.key), k.expected);
}

TEST(Philox, SdkMatchesIndependentReferenceOnRandomCountersAndKeys) {
    std::mt19937_64 rng(12345);
    for (int i = 0; i < 20000; ++i) {
        const uint64_t a = rng(), b = rng(), c = rng();
        const std::array<uint32_t, 4> ctr = {static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32),
                                             static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32)};
        const std::array<uint32_t, 2> key = {static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32)};
        const altgrad::sdk::philox_block got =
            altgrad::sdk::philox4x32_10(ctr[0], ctr[1], ctr[2], ctr[3], key[0], key[1]);
        const std::array<uint32_t, 4> want = ref_philox4x32_10(ctr, key);
        ASSERT_EQ((std::array<uint32_t, 4>{got.word[0], got.word[1], got.word[2], got.word[3]}), want)
            << "iteration " << i;
    }
}

// Element n uses word n % 4 of the block at counter n / 4 (as a 128-bit
// little-endian counter) keyed by the 64-bit seed.
TEST(Philox, RandomBitsUsesWordNMod4OfCounterNDiv4) {
    const uint64_t seeds[] = {0, 1, 0xFFFFFFFFull, 0x100000000ull, 0xDEADBEEFCAFEF00Dull, ~0ull};
    const uint64_t firsts[] = {
        0, 1, 2, 3, 4, 5, 1000, (1ull << 32) - 3, (1ull << 34) - 6, (1ull << 40) + 1, 0xFFFFFFFFFFFFFF00ull};
    for (uint64_t seed : seeds)
        for (uint64_t first : firsts)
            for (uint64_t n = first; n < first + 16; ++n)
                ASSERT_EQ(altgrad::sdk::random_bits(seed, n), ref_random_bits(seed, n))
                    << "seed " << seed << " element " << n;
}

TEST(Philox, RandomBitsOfElementZeroIsFirstKatWord) {
    // Counter 0, key 0: element 0..3 are the words of the first vector.
    for (uint64_t n = 0; n < 4; ++n) EXPECT_EQ(altgrad::sdk::random_bits(0, n), kKats[0].expected[n]);
}

TEST(Philox, FillRandomBitsAgreesWithRandomBitsForAnyFirstAndLength) {
    std::mt19937_64 rng(777);
    std::vector<uint64_t> firsts = {0, 1, 2, 3, 4, 7, (1ull << 34) - 3, 0xFFFFFFFFFFFFFFF0ull};
    for (int i = 0; i < 40; ++i) firsts.push_back(rng() >> (rng() % 64));
    // The vector generators take blocks of 4 elements in steps of 6 x 8 blocks (AVX-512), then as many
    // groups of 8 as are left (1-5: 32 .. 160 elements), then AVX2 and scalar tails: every such tail.
    const size_t lengths[] = {0,  1,  2,   3,   4,   5,   7,   8,   9,   13,  31,  32,
                              64, 96, 128, 160, 191, 192, 366, 511, 512, 513, 1000};
    for (uint64_t first : firsts)
        for (size_t len : lengths) {
            const uint64_t seed = rng();
            std::vector<uint32_t> out(len + 8, 0xA5A5A5A5u);
            altgrad::sdk::fill_random_bits(seed, first, len, out.data());
            for (size_t i = 0; i < len; ++i)
                ASSERT_EQ(out[i], altgrad::sdk::random_bits(seed, first + i))
                    << "first " << first << " length " << len << " index " << i;
            for (size_t i = len; i < out.size(); ++i)
                ASSERT_EQ(out[i], 0xA5A5A5A5u) << "wrote past the end: first " << first << " length " << len;
        }
}

TEST(Philox, DifferentSeedsGiveDifferentStreams) {
    int same = 0;
    for (uint64_t n = 0; n < 4096; ++n)
        same += altgrad::sdk::random_bits(1, n) == altgrad::sdk::random_bits(2, n);
    EXPECT_LT(same, 4);
    // The high half of the seed matters too.
    same = 0;
    for (uint64_t n = 0; n < 4096; ++n)
        same += altgrad::sdk::random_bits(5, n) == altgrad::sdk::random_bits(5 | (1ull << 40), n);
    EXPECT_LT(same, 4);
}

}  // namespace
