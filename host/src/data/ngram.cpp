#include "data/ngram.hpp"

#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/error.hpp"

namespace altgrad::host::data {

namespace {

// A k-gram (k <= 4 tokens of 16 bits) as one key; the length is implied by the table it is in.
uint64_t key_of(const uint16_t* first, int k) {
    uint64_t key = 0;
    for (int i = 0; i < k; ++i) key = (key << 16) | first[i];
    return key;
}

// Order k's counts: C(hc) per k-gram, and C(h), T(h) per context h.
struct order_counts {
    std::unordered_map<uint64_t, uint64_t> gram;
    struct context {
        uint64_t total = 0, types = 0;
    };
    std::unordered_map<uint64_t, context> ctx;
};

order_counts count(const uint16_t* t, size_t n, int k) {
    order_counts c;
    if (n < static_cast<size_t>(k)) return c;
    for (size_t i = 0; i + k <= n; ++i) ++c.gram[key_of(t + i, k)];
    for (const auto& [gram, number] : c.gram) {
        order_counts::context& h = c.ctx[gram >> 16];  // drop the predicted token
        h.total += number;
        ++h.types;
    }
    return c;
}

}  // namespace

double witten_bell_cross_entropy(const uint16_t* train, size_t n_train, const uint16_t* test, size_t n_test,
                                 int64_t vocab, int order) {
    if (order < 1 || order > 4) throw error("n-gram order " + std::to_string(order) + ": expected 1..4");
    if (vocab < 1 || vocab > 65536)
        throw error("n-gram vocabulary " + std::to_string(vocab) + ": expected 1..65536");
    const struct {
        const char* name;
        const uint16_t* t;
        size_t n;
    } texts[] = {{"training", train, n_train}, {"test", test, n_test}};
    for (const auto& x : texts)
        for (size_t i = 0; i < x.n; ++i)
            if (x.t[i] >= vocab)
                throw error(std::string("n-gram: ") + x.name + " token " + std::to_string(i) + " is " +
                            std::to_string(x.t[i]) + ", not below the vocabulary size " +
                            std::to_string(vocab));
    if (n_test < static_cast<size_t>(order)) return NAN;

    std::vector<order_counts> counts;
    for (int k = 1; k <= order; ++k) counts.push_back(count(train, n_train, k));

    double sum = 0;
    for (size_t i = static_cast<size_t>(order) - 1; i < n_test; ++i) {
        double p = 1.0 / static_cast<double>(vocab);
        for (int k = 1; k <= order; ++k) {
            const order_counts& c = counts[static_cast<size_t>(k) - 1];
            const uint16_t* gram = test + i + 1 - k;
            const auto h = c.ctx.find(key_of(gram, k - 1));
            if (h == c.ctx.end()) continue;  // an unseen context: the lower order's estimate stands
            const auto g = c.gram.find(key_of(gram, k));
            const double hc = g == c.gram.end() ? 0.0 : static_cast<double>(g->second);
            const double types = static_cast<double>(h->second.types);
            p = (hc + types * p) / (static_cast<double>(h->second.total) + types);
        }
        sum -= std::log(p);
    }
    return sum / static_cast<double>(n_test - (static_cast<size_t>(order) - 1));
}

corpus_reference reference_losses(const dataset& d, size_t max_train_tokens) {
    const uint16_t* train = d.tokens(split::train);
    const uint16_t* val = d.tokens(split::val);
    const size_t nt = d.size(split::train), nv = d.size(split::val);
    if (nt > max_train_tokens) return {d.unigram_entropy_nats(), NAN, NAN};
    return {d.unigram_entropy_nats(), witten_bell_cross_entropy(train, nt, val, nv, d.vocab_size(), 2),
            witten_bell_cross_entropy(train, nt, val, nv, d.vocab_size(), 3)};
}

}  // namespace altgrad::host::data
