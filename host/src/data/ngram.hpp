// Reference losses of the corpus without a neural model: how well character
// n-gram statistics alone predict the validation split. A trained model's
// validation loss is meant to end clearly below the trigram's (docs/data.md,
// "Reference losses"). Plain C++ (no LibTorch).
#pragma once

#include <cstddef>
#include <cstdint>

#include "data/dataset.hpp"

namespace altgrad::host::data {

// Held-out cross-entropy in nats per token of an interpolated Witten-Bell
// n-gram model (Witten & Bell 1991; the interpolated form of Chen & Goodman
// 1998, section 2.5) counted on train[0..n_train) and scored on every token
// test[i], i = order-1 .. n_test-1 (each scored with its order-1 predecessors
// in `test`):
//   P_0(c)   = 1 / vocab
//   P_k(c|h) = (C(hc) + T(h) P_{k-1}(c|h')) / (C(h) + T(h))   when C(h) > 0, else P_{k-1}(c|h')
// where h is the k-1 tokens before c, h' its last k-2, C(hc) the count of the
// k-gram hc in train, C(h) = sum_c C(hc) and T(h) the number of distinct c
// with C(hc) > 0. NaN when n_test < order. Throws host::error when order is
// not 1..4, vocab is not 1..65536 or a token is not below vocab.
double witten_bell_cross_entropy(const uint16_t* train, size_t n_train, const uint16_t* test, size_t n_test,
                                 int64_t vocab, int order);

// The references `run` records in summary.json and `report` prints.
struct corpus_reference {
    double unigram_entropy = 0;  // dataset::unigram_entropy_nats(): the train split's own entropy
    double bigram = 0,
           trigram = 0;  // witten_bell_cross_entropy, train split -> validation split; NaN: not computed
};

// Above this many training tokens (a large nanoGPT corpus) the n-gram tables
// would cost more memory and time than a short run: bigram and trigram are NaN.
constexpr size_t kMaxReferenceTokens = 50'000'000;

corpus_reference reference_losses(const dataset& d, size_t max_train_tokens = kMaxReferenceTokens);

}  // namespace altgrad::host::data
