// The trainer's data: a character-level corpus as token ids with a train /
// validation split, and the batches a step trains on. Plain C++ (no LibTorch).
//
// Two formats (docs/data.md):
//   text     a file, or a folder of files, of UTF-8 text (an invalid byte is
//            read as the Latin-1 character of the same value, so any file
//            loads). The vocabulary is the sorted distinct code points; the
//            first (1 - val_fraction) of the token stream is train, the rest val.
//   nanogpt  a folder with nanoGPT's train.bin and val.bin (little-endian
//            uint16 ids, memory-mapped read-only) and optionally its meta.pkl
//            (vocab_size, itos); without meta.pkl data_options::vocab_size is
//            required and itos() is empty.
// Every failure the user can cause throws host::error with one line naming
// `where`, the file and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config/run_config.hpp"

namespace altgrad::host::data {

struct data_options {
    std::filesystem::path path;
    config::data_format format =
        config::data_format::auto_detect;  // auto: a folder holding train.bin is nanogpt
    double val_fraction = 0.1;             // text only: the last val_fraction of the tokens; in (0, 1)
    int64_t vocab_size = 0;  // nanogpt only: required without meta.pkl (1..65536); must agree with it
};

enum class split { train, val };

const char* split_name(split s);  // "training", "validation"

class dataset {
public:
    dataset(dataset&&) noexcept;
    dataset& operator=(dataset&&) noexcept;
    dataset(const dataset&) = delete;
    dataset& operator=(const dataset&) = delete;
    ~dataset();

    // The split's token ids (valid while the dataset lives; moving it keeps them valid).
    const uint16_t* tokens(split s) const;
    size_t size(split s) const;

    int64_t vocab_size() const;
    // Token id -> its text (UTF-8); empty when unknown (nanoGPT without meta.pkl).
    const std::vector<std::string>& itos() const;
    // The text of ids[0..n): itos concatenated; an id >= vocab_size gives U+FFFD;
    // without itos each id is written as <id>.
    std::string decode(const uint16_t* ids, size_t n) const;
    // The ids of `text` (e.g. a sampling prompt), character by character as the
    // text format reads it; throws host::error for a character not in itos().
    std::vector<uint16_t> encode(const std::string& text) const;
    // One line, e.g. "text: 43 files, 2,576,627 characters, vocabulary 113, val 10%".
    const std::string& description() const;
    // -sum p ln p of the train split's token distribution (nats): the loss of
    // the best model that ignores context.
    double unigram_entropy_nats() const;

    struct impl;  // defined in dataset.cpp
    explicit dataset(std::unique_ptr<impl> p);

private:
    std::unique_ptr<impl> p_;
};

// `where` prefixes every error, e.g. "configs/x.toml: data.path".
dataset load_dataset(const data_options& o, const std::string& where);

// Rows first_row .. first_row + batch_size - 1 of the batch of step `step`:
// x[i*block_size + t] = tokens[offset_r + t] and y[...] = tokens[offset_r + t + 1],
// r = first_row + i (x, y: batch_size*block_size each, row-major). A step's
// micro-batch m of b rows is rows m*b .. m*b + b - 1 (training.grad_accum).
// A pure function of (seed, step, split, block_size, row, the split's size):
//   u_r      = splitmix64(splitmix64(splitmix64(seed) ^ step) ^ (2*r + (s == val)))
//   offset_r = (u_r * (size - block_size)) >> 64     (128-bit product)
// where splitmix64(z) is one SplitMix64 step from state z (add 0x9E3779B97F4A7C15,
// then the xor-shift-multiply finaliser). So offsets are uniform on
// [0, size - block_size - 1] (bias < 2^-32), row r does not depend on
// batch_size, and a resumed run sees exactly the batches of an uninterrupted one.
// Throws host::error if batch_size or block_size < 1 or the split has fewer
// than block_size + 1 tokens.
void fill_batch(const dataset& d, split s, uint64_t seed, uint64_t step, uint64_t first_row,
                int64_t batch_size, int64_t block_size, int64_t* x, int64_t* y);

// The row offset fill_batch uses (exposed for tests and docs).
uint64_t batch_offset(uint64_t seed, uint64_t step, split s, uint64_t row, uint64_t range);

// Errors (prefixed by `where`): block_size < 1; a split shorter than
// block_size + 1 tokens ("the validation split has 40 tokens; need at least
// block_size + 1 = 65"); a data vocabulary larger than model_vocab_size (when > 0).
void check_block_size(const dataset& d, int64_t block_size, int64_t model_vocab_size,
                      const std::string& where);

}  // namespace altgrad::host::data
