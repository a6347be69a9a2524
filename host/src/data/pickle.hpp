// A minimal, bounded reader for nanoGPT's meta.pkl: the pickle of
// {'vocab_size': int, 'itos': {int: str}, 'stoi': {str: int}} that
// data/shakespeare_char/prepare.py writes with pickle.dump (protocols 2 to 5).
//
// Only these opcodes are understood: PROTO, FRAME, STOP, MARK, EMPTY_DICT,
// SETITEM, SETITEMS, BININT, BININT1, BININT2, LONG1 (up to 8 bytes),
// SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, MEMOIZE, BINPUT, LONG_BINPUT,
// BINGET, LONG_BINGET, NONE, NEWTRUE, NEWFALSE. Anything else, and every
// malformed or truncated file, is a host::error naming the file and the byte
// offset of the opcode; every read is bounds-checked, nothing is executed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace altgrad::host::data {

struct nanogpt_meta {
    int64_t vocab_size = 0;         // 1..65536
    std::vector<std::string> itos;  // vocab_size entries, from the 'itos' dict (keys 0..vocab_size-1)
};

// `bytes`: the file's contents; `name`: the file as errors name it.
nanogpt_meta parse_nanogpt_meta(const std::string& bytes, const std::string& name);

}  // namespace altgrad::host::data
