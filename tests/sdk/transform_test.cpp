// Transforms (ABI 1.4): the SDK's fast Walsh-Hadamard transform against a
// dense Hadamard matrix built independently (Sylvester's doubling, in
// double), its known small values, orthogonality and self-inverse; then the
// bundled hadamard and random_hadamard plugins loaded through the C ABI as a
// host loads them: products preserved, inverses, bit reproducibility, the
// sign rule, and refusals naming the parameter or argument; and the CUDA
// path's per-thread block (transform_block) against the host path, on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <altgrad/sdk/hadamard.hpp>

#include "plugin_host.hpp"  // Param, param_items, plugin_library_path

namespace {

using agtest::Param;

constexpr double kU = 0x1p-24;  // float32's unit roundoff

int log2_of(uint32_t d) {
    int k = 0;
    while ((1u << k) < d) ++k;
    return k;
}

// Sylvester: H_1 = [1], H_2k = [[H_k, H_k], [H_k, -H_k]], built by doubling.
std::vector<std::vector<double>> sylvester(uint32_t d) {
    std::vector<std::vector<double>> h{{1.0}};
    for (uint32_t k = 1; k < d; k *= 2) {
        std::vector<std::vector<double>> next(2 * k, std::vector<double>(2 * k));
        for (uint32_t i = 0; i < k; ++i)
            for (uint32_t j = 0; j < k; ++j) {
                next[i][j] = next[i][j + k] = next[i + k][j] = h[i][j];
                next[i + k][j + k] = -h[i][j];
            }
        h = next;
    }
    return h;
}

std::vector<float> random_floats(std::mt19937_64& rng, size_t n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

double dot(const float* a, const float* b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---------------------------------------------------------------- the SDK's FWHT

TEST(Fwht, MatchesDenseSylvesterMatrix) {
    std::mt19937_64 rng(7);
    for (uint32_t d = 2; d <= 128; d *= 2) {
        const std::vector<std::vector<double>> h = sylvester(d);
        const std::vector<float> x = random_floats(rng, d);
        std::vector<float> y = x;
        altgrad::sdk::fwht(y.data(), 1, d);
        double err = 0, norm = 0;
        for (uint32_t i = 0; i < d; ++i) {
            double want = 0;
            for (uint32_t j = 0; j < d; ++j) want += h[i][j] * x[j];
            want /= std::sqrt(static_cast<double>(d));
            err += (y[i] - want) * (y[i] - want);
            norm += static_cast<double>(x[i]) * x[i];
        }
        // (log2 d + 1) u ||x|| for the stages and the scaling, one u of slack.
        EXPECT_LE(std::sqrt(err), (log2_of(d) + 2) * kU * std::sqrt(norm)) << "d = " << d;
    }
}

TEST(Fwht, KnownSmallValues) {
    // H_2 [3, 1] / sqrt 2 = [4, 2] * fl(1/sqrt 2); fl(1/sqrt 2) = 0x1.6a09e6p-1 (1/sqrt 2 =
    // 0.70710678118..., the nearest float), and 4 and 2 times it are exact.
    std::vector<float> two = {3.0f, 1.0f};
    altgrad::sdk::fwht(two.data(), 1, 2);
    EXPECT_EQ(two[0], 4 * 0x1.6a09e6p-1f);
    EXPECT_EQ(two[1], 2 * 0x1.6a09e6p-1f);
    // H_4 = [[1,1,1,1],[1,-1,1,-1],[1,1,-1,-1],[1,-1,-1,1]]: H_4 [1,2,3,4] = [10,-2,-4,0], / 2.
    std::vector<float> four = {1.0f, 2.0f, 3.0f, 4.0f};
    altgrad::sdk::fwht(four.data(), 1, 4);
    EXPECT_EQ(four, (std::vector<float>{5.0f, -1.0f, -2.0f, 0.0f}));
    // Two blocks at once: each its own transform.
    std::vector<float> blocks = {1.0f, 2.0f, 3.0f, 4.0f, 1.0f, 0.0f, 0.0f, 0.0f};
    altgrad::sdk::fwht(blocks.data(), 2, 4);
    EXPECT_EQ(blocks, (std::vector<float>{5.0f, -1.0f, -2.0f, 0.0f, 0.5f, 0.5f, 0.5f, 0.5f}));
}

// What one CUDA thread does to a block (hadamard_cuda.cuh's transform_block)
// gives the host path's bits: the signs before the butterflies going
// forward, after the scale going back (random_hadamard's apply), none for the
// plain transform (fwht), on every block size the plugins take, with NaN and
// Inf spreading as on the host. The two orders differ (the test can fail).
TEST(Fwht, ADeviceThreadsBlockIsTheHostPath) {
    std::mt19937_64 rng(11);
    for (uint32_t d = 16; d <= 128; d *= 2) {
        const size_t blocks = 5;
        std::vector<float> x = random_floats(rng, blocks * d);
        x[3] = INFINITY;
        x[d + 1] = NAN;
        float signs[128];
        altgrad::sdk::hadamard_signs(1234 + d, d, signs);
        for (const bool inverse : {false, true}) {
            std::vector<float> host = x;
            if (!inverse) altgrad::sdk::apply_signs(host.data(), blocks, d, signs);
            altgrad::sdk::fwht(host.data(), blocks, d);
            if (inverse) altgrad::sdk::apply_signs(host.data(), blocks, d, signs);
            std::vector<float> device = x;
            for (size_t b = 0; b < blocks; ++b)
                altgrad::sdk::transform_block(device.data() + b * d, d, signs, inverse,
                                              altgrad::sdk::hadamard_scale(d));
            EXPECT_TRUE(same_bits(host, device)) << "d = " << d << (inverse ? ", inverse" : ", forward");
            if (!inverse) {
                std::vector<float> swapped = x;
                for (size_t b = 0; b < blocks; ++b)
                    altgrad::sdk::transform_block(swapped.data() + b * d, d, signs, true,
                                                  altgrad::sdk::hadamard_scale(d));
                EXPECT_FALSE(same_bits(host, swapped)) << "d = " << d << ": the orders cannot be told apart";
            }
        }
        std::vector<float> plain = x, device = x;
        altgrad::sdk::fwht(plain.data(), blocks, d);
        for (size_t b = 0; b < blocks; ++b)
            altgrad::sdk::transform_block(device.data() + b * d, d, nullptr, false,
                                          altgrad::sdk::hadamard_scale(d));
        EXPECT_TRUE(same_bits(plain, device)) << "d = " << d << ", no signs";
    }
}

TEST(Fwht, ColumnsAreOrthonormal) {
    // d = 16 and 64: the entries are +-1/4 and +-1/8, so every dot product is exact.
    for (uint32_t d : {16u, 64u}) {
        std::vector<std::vector<float>> cols(d, std::vector<float>(d, 0.0f));
        for (uint32_t j = 0; j < d; ++j) {
            cols[j][j] = 1.0f;
            altgrad::sdk::fwht(cols[j].data(), 1, d);
        }
        for (uint32_t i = 0; i < d; ++i)
            for (uint32_t j = 0; j < d; ++j)
                EXPECT_EQ(dot(cols[i].data(), cols[j].data(), d), i == j ? 1.0 : 0.0)
                    << d << ": " << i << ", " << j;
    }
}

TEST(Fwht, IsItsOwnInverse) {
    // Integers through d = 16 or 64 stay exact (sums of integers, then quarters or eighths).
    for (uint32_t d : {16u, 64u}) {
        std::vector<float> x(d);
        for (uint32_t i = 0; i < d; ++i) x[i] = static_cast<float>(static_cast<int>(i * 7 % 13) - 6);
        std::vector<float> y = x;
        altgrad::sdk::fwht(y.data(), 1, d);
        EXPECT_FALSE(same_bits(x, y));
        altgrad::sdk::fwht(y.data(), 1, d);
        EXPECT_TRUE(same_bits(x, y)) << "d = " << d;
    }
    // Odd log2 d: the identity up to rounding, 2 (log2 d + 2) u ||x||.
    std::mt19937_64 rng(3);
    for (uint32_t d : {2u, 32u, 128u}) {
        const std::vector<float> x = random_floats(rng, d);
        std::vector<float> y = x;
        altgrad::sdk::fwht(y.data(), 1, d);
        altgrad::sdk::fwht(y.data(), 1, d);
        double err = 0;
        for (uint32_t i = 0; i < d; ++i) err += (static_cast<double>(y[i]) - x[i]) * (y[i] - x[i]);
        EXPECT_LE(std::sqrt(err), 2 * (log2_of(d) + 2) * kU * std::sqrt(dot(x.data(), x.data(), d))) << d;
    }
}

TEST(Fwht, NonFiniteSpreadsOverItsBlockOnly) {
    std::vector<float> x(32, 1.0f);
    x[3] = NAN;
    altgrad::sdk::fwht(x.data(), 2, 16);
    for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(x[i])) << i;
    for (int i = 16; i < 32; ++i) EXPECT_FALSE(std::isnan(x[i])) << i;
}

// The vector path (AVX2, d >= 8) against the scalar butterflies it stands in for, bit for bit: values
// across many binades with signed zeros, subnormals and Inf (where a + b and a - b of the same pair
// must still land in the same lanes), every d the plugins allow and the ones below, several blocks.
TEST(Fwht, VectorPathGivesTheScalarBits) {
    std::mt19937_64 rng(11);
    for (uint32_t d = 2; d <= 128; d *= 2) {
        std::vector<float> x(5 * d);
        for (size_t i = 0; i < x.size(); ++i) {
            const float magnitude = std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng),
                                               std::uniform_int_distribution<int>(-140, 60)(rng));
            x[i] = (rng() & 1) ? -magnitude : magnitude;
        }
        x[1] = -0.0f, x[d / 2] = 0.0f, x[d + 1] = INFINITY, x[2 * d] = 1e-45f;
        std::vector<float> want = x, got = x;
        altgrad::sdk::detail::fwht_baseline(want.data(), 5, d);
        altgrad::sdk::fwht(got.data(), 5, d);
        for (size_t i = 0; i < x.size(); ++i) {
            uint32_t w = 0, g = 0;
            std::memcpy(&w, &want[i], 4);
            std::memcpy(&g, &got[i], 4);
            if (!(std::isnan(want[i]) && std::isnan(got[i])))
                EXPECT_EQ(g, w) << "d " << d << ", element " << i;
        }
    }
}

TEST(HadamardSigns, FollowPhiloxBit31) {
    // The documented rule (docs/transforms.md): s_j = -1 when bit 31 of
    // random_bits(seed, j) is set; random_bits is Philox4x32-10, checked
    // against the Random123 known answers in philox_test.cpp.
    float s[128];
    altgrad::sdk::hadamard_signs(42, 128, s);
    int negative = 0;
    for (uint32_t j = 0; j < 128; ++j) {
        EXPECT_EQ(s[j], (altgrad::sdk::random_bits(42, j) & 0x80000000u) ? -1.0f : 1.0f) << j;
        negative += s[j] < 0;
    }
    EXPECT_GT(negative, 40);  // about half: 64 +- 5.7 (binomial)
    EXPECT_LT(negative, 88);
}

// ---------------------------------------------------------------- the plugins through the C ABI

// A transform plugin loaded as a host loads it (dlopen RTLD_NOW | RTLD_LOCAL, the entry symbol).
class TransformPlugin {
public:
    explicit TransformPlugin(const std::string& name) : entry_(&agtest::plugin_entry(name)) {}
    const altgrad_entry& entry() const { return *entry_; }
    const altgrad_transform_vtable& vt() const { return *entry_->transform; }

    // create with params; the status, and the message when it fails.
    altgrad_status create(const std::vector<Param>& params, altgrad_transform** out,
                          std::string& message) const {
        const std::vector<altgrad_param> items = agtest::param_items(params);
        const altgrad_param_list list{sizeof(altgrad_param_list), items.data(), items.size()};
        altgrad_error e = altgrad::sdk::blank_error();
        const altgrad_status s = vt().create(&list, out, &e);
        message = e.message;
        return s;
    }

private:
    const altgrad_entry* entry_ = nullptr;
};

// An instance of a plugin with its parameters, and its apply.
class Transform {
public:
    Transform(const std::string& name, const std::vector<Param>& params) : plugin_(name) {
        std::string message;
        if (plugin_.create(params, &instance_, message) != ALTGRAD_STATUS_OK)
            throw std::runtime_error(name + ": create failed: " + message);
        info_.struct_size = sizeof info_;
        altgrad_error e = altgrad::sdk::blank_error();
        if (plugin_.vt().get_info(instance_, &info_, &e) != ALTGRAD_STATUS_OK)
            throw std::runtime_error(name + ": get_info failed");
    }
    ~Transform() { plugin_.vt().destroy(instance_); }
    const altgrad_transform_info& info() const { return info_; }

    altgrad_status apply_raw(altgrad_transform_args& a, std::string& message) const {
        altgrad_error e = altgrad::sdk::blank_error();
        const altgrad_status s = plugin_.vt().apply(instance_, &a, &e);
        message = e.message;
        return s;
    }
    std::vector<float> apply(const std::vector<float>& in, size_t rows, uint64_t seed,
                             bool inverse = false) const {
        std::vector<float> out(in.size());
        altgrad_transform_args a{};
        a.struct_size = sizeof a;
        a.input = in.data();
        a.output = out.data();
        a.rows = rows;
        a.cols = in.size() / rows;
        a.seed = seed;
        a.inverse = inverse ? 1 : 0;
        a.memory = ALTGRAD_MEMORY_HOST;
        std::string message;
        if (apply_raw(a, message) != ALTGRAD_STATUS_OK) throw std::runtime_error("apply failed: " + message);
        return out;
    }

private:
    TransformPlugin plugin_;
    altgrad_transform* instance_ = nullptr;
    altgrad_transform_info info_{};
};

TEST(TransformPlugins, EntryIsATransformOfAbi14) {
    for (const char* name : {"hadamard", "random_hadamard"}) {
        const TransformPlugin p(name);
        EXPECT_EQ(p.entry().descriptor->kind, ALTGRAD_KIND_TRANSFORM) << name;
        EXPECT_EQ(p.entry().abi_version.major, 1u);
        EXPECT_GE(p.entry().abi_version.minor, 4u);
        EXPECT_TRUE(p.entry().format == nullptr && p.entry().intervention == nullptr &&
                    p.entry().diagnostic == nullptr && p.entry().transform != nullptr)
            << name;
    }
}

TEST(TransformPlugins, InfoSaysWhatEachIs) {
    const Transform h("hadamard", {Param::integer("d", 32)});
    EXPECT_EQ(h.info().block_size, 32u);
    EXPECT_EQ(h.info().self_inverse, 1u);
    EXPECT_EQ(h.info().uses_seed, 0u);
    EXPECT_EQ(h.info().memory_kinds, 1u << ALTGRAD_MEMORY_HOST);
    const Transform per_call("random_hadamard", {Param::integer("d", 16), Param::text("signs", "per_call"),
                                                 Param::integer("sign_seed", 0)});
    EXPECT_EQ(per_call.info().self_inverse, 0u);
    EXPECT_EQ(per_call.info().uses_seed, 1u);
    const Transform fixed("random_hadamard", {Param::integer("d", 16), Param::text("signs", "fixed"),
                                              Param::integer("sign_seed", 9)});
    EXPECT_EQ(fixed.info().uses_seed, 0u);
}

std::vector<Param> random_params(int64_t d, const std::string& signs = "per_call", int64_t sign_seed = 0) {
    return {Param::integer("d", d), Param::text("signs", signs), Param::integer("sign_seed", sign_seed)};
}

TEST(TransformPlugins, HadamardIsTheSdkFwhtOnEveryBlock) {
    std::mt19937_64 rng(11);
    const Transform h("hadamard", {Param::integer("d", 16)});
    const std::vector<float> x = random_floats(rng, 3 * 64);
    std::vector<float> want = x;
    altgrad::sdk::fwht(want.data(), 12, 16);
    EXPECT_TRUE(same_bits(h.apply(x, 3, 0), want));
    EXPECT_TRUE(same_bits(h.apply(x, 3, 99, true), want));  // self-inverse: inverse is the same
}

TEST(TransformPlugins, ProductsArePreserved) {
    std::mt19937_64 rng(5);
    for (int64_t d : {16, 32, 64, 128}) {
        const Transform h("hadamard", {Param::integer("d", d)});
        const Transform r("random_hadamard", random_params(d));
        const size_t n = 4 * static_cast<size_t>(d);
        const std::vector<float> a = random_floats(rng, 2 * n), b = random_floats(rng, n);
        for (const Transform* t : {&h, &r}) {
            const std::vector<float> ta = t->apply(a, 2, 77), tb = t->apply(b, 1, 77);  // separate calls
            for (size_t row = 0; row < 2; ++row) {
                const double exact = dot(&a[row * n], b.data(), n);
                const double got = dot(&ta[row * n], tb.data(), n);
                const double bound = 2 * (log2_of(static_cast<uint32_t>(d)) + 2) * kU *
                                     std::sqrt(dot(&a[row * n], &a[row * n], n) * dot(b.data(), b.data(), n));
                EXPECT_LE(std::fabs(got - exact), bound) << "d = " << d << " row " << row;
                EXPECT_GT(std::fabs(ta[row * n] - a[row * n]), 0.0f);  // it did transform
            }
        }
    }
}

TEST(TransformPlugins, RandomHadamardInverseUndoesIt) {
    std::mt19937_64 rng(9);
    const Transform r("random_hadamard", random_params(32));
    const std::vector<float> x = random_floats(rng, 4 * 32);
    const std::vector<float> back = r.apply(r.apply(x, 4, 123), 4, 123, true);
    const std::vector<float> other_way = r.apply(r.apply(x, 4, 123, true), 4, 123);
    const std::vector<float> twice = r.apply(r.apply(x, 4, 123), 4, 123);
    double err = 0, err_other = 0, err_twice = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        err = std::max(err, std::fabs(static_cast<double>(back[i]) - x[i]));
        err_other = std::max(err_other, std::fabs(static_cast<double>(other_way[i]) - x[i]));
        err_twice = std::max(err_twice, std::fabs(static_cast<double>(twice[i]) - x[i]));
    }
    EXPECT_LT(err, 1e-5);
    EXPECT_LT(err_other, 1e-5);
    EXPECT_GT(err_twice, 1e-2);  // not self-inverse: T T != I
}

TEST(TransformPlugins, BitReproducibleAndChunkingFree) {
    std::mt19937_64 rng(13);
    const Transform r("random_hadamard", random_params(16));
    const std::vector<float> x = random_floats(rng, 6 * 48);
    const std::vector<float> whole = r.apply(x, 6, 5);
    EXPECT_TRUE(same_bits(whole, r.apply(x, 6, 5)));
    const Transform again("random_hadamard", random_params(16));
    EXPECT_TRUE(same_bits(whole, again.apply(x, 6, 5)));
    // Rows 2..4 alone give rows 2..4 of the whole call.
    const std::vector<float> middle(x.begin() + 2 * 48, x.begin() + 5 * 48);
    EXPECT_TRUE(
        same_bits(r.apply(middle, 3, 5), std::vector<float>(whole.begin() + 2 * 48, whole.begin() + 5 * 48)));
}

// s_j from T e_j: T e_j = s_j H e_j / sqrt(d), and row 0 of H is all ones,
// so element 0 of T e_j is s_j / sqrt(d). Each e_j in its own row of one call.
std::vector<float> observed_signs(const Transform& t, uint32_t d, uint64_t seed, size_t row_of_first = 0) {
    const size_t rows = row_of_first + d;
    std::vector<float> unit(rows * d, 0.0f);
    for (uint32_t j = 0; j < d; ++j) unit[(row_of_first + j) * d + j] = 1.0f;
    const std::vector<float> out = t.apply(unit, rows, seed);
    std::vector<float> s(d);
    for (uint32_t j = 0; j < d; ++j) s[j] = out[(row_of_first + j) * d] > 0 ? 1.0f : -1.0f;
    return s;
}

TEST(TransformPlugins, SignsDependOnTheSeedNotTheRow) {
    const Transform r("random_hadamard", random_params(16));
    const std::vector<float> s1 = observed_signs(r, 16, 1), s2 = observed_signs(r, 16, 2);
    std::vector<float> want(16);
    altgrad::sdk::hadamard_signs(1, 16, want.data());
    EXPECT_EQ(s1, want);
    EXPECT_NE(s1, s2);
    EXPECT_EQ(observed_signs(r, 16, 1, 7), s1);  // the same vector seven rows further down
}

TEST(TransformPlugins, FixedSignsIgnoreTheCallSeed) {
    const Transform fixed("random_hadamard", random_params(16, "fixed", 31));
    const Transform per_call("random_hadamard", random_params(16));
    const std::vector<float> s = observed_signs(fixed, 16, 1);
    EXPECT_EQ(observed_signs(fixed, 16, 1000), s);
    EXPECT_EQ(observed_signs(per_call, 16, 31), s);  // the vector of seed sign_seed
}

TEST(TransformPlugins, BadParamsAreRefusedNamingTheParam) {
    struct bad {
        const char* plugin;
        std::vector<Param> params;
        const char* key;
    };
    const std::vector<bad> cases = {
        {"hadamard", {Param::integer("d", 24)}, "'d'"},
        {"hadamard", {Param::integer("d", 256)}, "'d'"},
        {"random_hadamard", random_params(8), "'d'"},
        {"random_hadamard", random_params(16, "sometimes"), "'signs'"},
        {"random_hadamard", random_params(16, "fixed", -1), "'sign_seed'"},
    };
    for (const bad& c : cases) {
        const TransformPlugin p(c.plugin);
        altgrad_transform* t = nullptr;
        std::string message;
        EXPECT_EQ(p.create(c.params, &t, message), ALTGRAD_STATUS_INVALID_ARGUMENT)
            << c.plugin << " " << agtest::params_text(c.params);
        EXPECT_NE(message.find(c.key), std::string::npos) << message;
        EXPECT_EQ(t, nullptr);
    }
}

TEST(TransformPlugins, BadArgumentsAreRefused) {
    const Transform h("hadamard", {Param::integer("d", 16)});
    std::vector<float> buf(64, 1.0f);
    auto call = [&](auto edit) {
        altgrad_transform_args a{};
        a.struct_size = sizeof a;
        a.input = buf.data();
        a.output = buf.data() + 32;
        a.rows = 1;
        a.cols = 32;
        a.memory = ALTGRAD_MEMORY_HOST;
        edit(a);
        std::string message;
        const altgrad_status s = h.apply_raw(a, message);
        return std::make_pair(s, message);
    };
    auto refused = [&](auto edit, const char* words) {
        const auto [s, message] = call(edit);
        EXPECT_EQ(s, ALTGRAD_STATUS_INVALID_ARGUMENT) << words;
        EXPECT_NE(message.find(words), std::string::npos) << message;
    };
    refused([](auto& a) { a.cols = 24; }, "not a multiple of the block size 16");
    refused([](auto& a) { a.input = nullptr; }, "NULL");
    refused([](auto& a) { a.struct_size = sizeof a - 1; }, "smaller");
    refused([](auto& a) { a.inverse = 2; }, "inverse");
    refused([&](auto& a) { a.output = buf.data() + 16; }, "overlaps");
    EXPECT_EQ(call([](auto& a) { a.memory = ALTGRAD_MEMORY_CUDA; }).first, ALTGRAD_STATUS_UNSUPPORTED);
    EXPECT_EQ(call([](auto& a) { a.input = a.output = nullptr, a.rows = 0; }).first, ALTGRAD_STATUS_OK);
    EXPECT_EQ(call([&](auto& a) { a.output = buf.data(); }).first, ALTGRAD_STATUS_OK);  // in place
}

}  // namespace
