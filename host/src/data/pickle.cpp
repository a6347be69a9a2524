#include "data/pickle.hpp"

#include <cstdio>
#include <memory>
#include <unordered_map>
#include <utility>

#include "util/error.hpp"
#include "util/name_table.hpp"

namespace altgrad::host::data {
namespace {

struct value;
using dict = std::vector<std::pair<value, value>>;

// A pickled object of the kinds meta.pkl holds. Strings and dicts are shared,
// as pickle's memo shares them, so BINGET costs nothing however large the object.
struct value {
    enum kind_t { mark, none, boolean, integer, string, dictionary } kind = none;
    value() = default;
    explicit value(kind_t k) : kind(k) {}
    int64_t i = 0;
    std::shared_ptr<const std::string> s;
    std::shared_ptr<dict> d;
};

// How errors name a value's kind.
const char* kind_name(value::kind_t k) {
    static const name_table<value::kind_t> names{{value::mark, "a MARK"},    {value::none, "None"},
                                                 {value::boolean, "a bool"}, {value::integer, "an int"},
                                                 {value::string, "a str"},   {value::dictionary, "a dict"}};
    return names.name(k);
}

std::string hex_byte(unsigned b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", b & 0xffu);
    return buf;
}

class parser {
public:
    parser(const std::string& bytes, const std::string& name) : b_(bytes), name_(name) {}

    // Dicts may end up holding themselves (a BINGET of the dict being filled):
    // empty every dict made so that such cycles are freed.
    ~parser() {
        for (const auto& d : dicts_) d->clear();
    }

    value run() {
        while (pos_ < b_.size()) {
            op_at_ = pos_;
            const unsigned op = static_cast<unsigned char>(b_[pos_++]);
            if (op == '.') return stop();
            execute(op);
        }
        fail("ends at byte " + std::to_string(b_.size()) + " without STOP (truncated?)");
    }

private:
    // One opcode other than STOP, its arguments read from the bytes after it.
    void execute(unsigned op) {
        switch (op) {
            case 0x80: check_protocol(u8()); break;     // PROTO
            case 0x95: check_frame(uint_le(8)); break;  // FRAME
            case '(': push(value{value::mark}); break;
            case '}': push_empty_dict(); break;  // EMPTY_DICT
            case 'N': push(value{value::none}); break;
            case 0x88: push_bool(true); break;                                                   // NEWTRUE
            case 0x89: push_bool(false); break;                                                  // NEWFALSE
            case 'J': push_int(static_cast<int32_t>(static_cast<uint32_t>(uint_le(4)))); break;  // BININT
            case 'K': push_int(static_cast<int64_t>(uint_le(1))); break;                         // BININT1
            case 'M': push_int(static_cast<int64_t>(uint_le(2))); break;                         // BININT2
            case 0x8a: push_long1(u8()); break;                                                  // LONG1
            case 0x8c: push_string(uint_le(1)); break;  // SHORT_BINUNICODE
            case 'X': push_string(uint_le(4)); break;   // BINUNICODE
            case 0x8d: push_string(uint_le(8)); break;  // BINUNICODE8
            case 0x94: memo_put(memo_.size()); break;   // MEMOIZE
            case 'q': memo_put(uint_le(1)); break;      // BINPUT
            case 'r': memo_put(uint_le(4)); break;      // LONG_BINPUT
            case 'h': memo_get(uint_le(1)); break;      // BINGET
            case 'j': memo_get(uint_le(4)); break;      // LONG_BINGET
            case 's': set_item(); break;                // SETITEM
            case 'u': set_items_to_mark(); break;       // SETITEMS
            default:
                fail("unsupported pickle opcode " + hex_byte(op) + " at byte " + std::to_string(op_at_) +
                     " (only what nanoGPT's meta.pkl uses is read)");
        }
    }

    // STOP: the one value left on the stack is the pickle's.
    value stop() const {
        if (stack_.size() != 1 || stack_.back().kind == value::mark)
            fail("STOP at byte " + std::to_string(op_at_) + " with " + std::to_string(stack_.size()) +
                 " items on the stack (expected one)");
        return stack_.back();
    }

    void check_protocol(unsigned v) const {
        if (v < 2 || v > 5)
            fail("pickle protocol " + std::to_string(v) + " at byte " + std::to_string(op_at_) +
                 " (protocols 2 to 5 are read)");
    }

    // A frame's length is advisory: checked against the file, otherwise ignored.
    void check_frame(uint64_t n) const {
        if (n > b_.size() - pos_)
            fail("FRAME at byte " + std::to_string(op_at_) + " is longer than the file");
    }

    [[noreturn]] void fail(const std::string& what) const { throw error(name_ + ": " + what); }

    void need(uint64_t n) const {
        if (n > b_.size() - pos_)
            fail("truncated: opcode " + hex_byte(static_cast<unsigned char>(b_[op_at_])) + " at byte " +
                 std::to_string(op_at_) + " needs " + std::to_string(n) + " more bytes, only " +
                 std::to_string(b_.size() - pos_) + " remain");
    }
    unsigned u8() { return static_cast<unsigned>(uint_le(1)); }
    uint64_t uint_le(unsigned n) {
        need(n);
        uint64_t u = 0;
        for (unsigned i = 0; i < n; ++i) u |= uint64_t{static_cast<unsigned char>(b_[pos_ + i])} << (8 * i);
        pos_ += n;
        return u;
    }

    void push(value v) { stack_.push_back(std::move(v)); }
    void push_int(int64_t i) {
        value v{value::integer};
        v.i = i;
        push(std::move(v));
    }
    void push_empty_dict() {
        value v{value::dictionary};
        v.d = std::make_shared<dict>();
        dicts_.push_back(v.d);
        push(std::move(v));
    }
    void push_bool(bool b) {
        value v{value::boolean};
        v.i = b ? 1 : 0;
        push(std::move(v));
    }
    // LONG1: a little-endian two's-complement integer of n bytes.
    void push_long1(unsigned n) {
        if (n > 8)
            fail("LONG1 at byte " + std::to_string(op_at_) + " has " + std::to_string(n) +
                 " bytes (at most 8 are read)");
        uint64_t u = uint_le(n);
        if (n > 0 && n < 8 && (u >> (8 * n - 1)) != 0) u |= ~uint64_t{0} << (8 * n);  // sign-extend
        push_int(static_cast<int64_t>(u));
    }
    void push_string(uint64_t n) {
        need(n);
        value v{value::string};
        v.s = std::make_shared<const std::string>(b_.substr(pos_, static_cast<size_t>(n)));
        pos_ += static_cast<size_t>(n);
        push(std::move(v));
    }
    value pop() {
        if (stack_.empty() || stack_.back().kind == value::mark)
            fail("opcode " + hex_byte(static_cast<unsigned char>(b_[op_at_])) + " at byte " +
                 std::to_string(op_at_) + " pops an empty stack");
        value v = std::move(stack_.back());
        stack_.pop_back();
        return v;
    }
    dict& top_dict() {
        if (stack_.empty() || stack_.back().kind != value::dictionary)
            fail("opcode " + hex_byte(static_cast<unsigned char>(b_[op_at_])) + " at byte " +
                 std::to_string(op_at_) + " sets items on " +
                 (stack_.empty() ? std::string("an empty stack") : kind_name(stack_.back().kind)) +
                 ", not a dict");
        return *stack_.back().d;
    }
    void set_item() {
        value v = pop(), k = pop();
        set_items(top_dict(), {std::make_pair(std::move(k), std::move(v))});
    }
    // SETITEMS: the key/value pairs above the topmost MARK go into the dict below it.
    void set_items_to_mark() {
        size_t m = stack_.size();
        while (m > 0 && stack_[m - 1].kind != value::mark) --m;
        if (m == 0) fail("SETITEMS at byte " + std::to_string(op_at_) + " without a MARK");
        const size_t first = m;  // stack_[m - 1] is the mark
        if ((stack_.size() - first) % 2 != 0)
            fail("SETITEMS at byte " + std::to_string(op_at_) + " with an odd number of items");
        std::vector<std::pair<value, value>> items;
        for (size_t i = first; i < stack_.size(); i += 2) items.emplace_back(stack_[i], stack_[i + 1]);
        stack_.resize(first - 1);
        set_items(top_dict(), std::move(items));
    }
    void set_items(dict& d, std::vector<std::pair<value, value>> items) {
        for (auto& kv : items) {
            if (kv.first.kind == value::dictionary || kv.first.kind == value::mark)
                fail("opcode " + hex_byte(static_cast<unsigned char>(b_[op_at_])) + " at byte " +
                     std::to_string(op_at_) + ": a dict key is " + kind_name(kv.first.kind));
            d.push_back(std::move(kv));
        }
    }
    void memo_put(uint64_t index) {
        if (stack_.empty() || stack_.back().kind == value::mark)
            fail("opcode " + hex_byte(static_cast<unsigned char>(b_[op_at_])) + " at byte " +
                 std::to_string(op_at_) + " memoizes " +
                 (stack_.empty() ? std::string("an empty stack") : "a MARK"));
        memo_[index] = stack_.back();
    }
    void memo_get(uint64_t index) {
        const auto it = memo_.find(index);
        if (it == memo_.end())
            fail("opcode " + hex_byte(static_cast<unsigned char>(b_[op_at_])) + " at byte " +
                 std::to_string(op_at_) + " reads memo entry " + std::to_string(index) +
                 ", which was never stored");
        push(it->second);
    }

    const std::string& b_;
    const std::string& name_;
    size_t pos_ = 0, op_at_ = 0;
    std::vector<value> stack_;
    std::unordered_map<uint64_t, value> memo_;
    std::vector<std::shared_ptr<dict>> dicts_;
};

// The last value stored under the str key `key` (a later key wins, as in Python).
const value* lookup(const dict& d, const std::string& key) {
    const value* found = nullptr;
    for (const auto& kv : d)
        if (kv.first.kind == value::string && *kv.first.s == key) found = &kv.second;
    return found;
}

[[noreturn]] void meta_fail(const std::string& name, const std::string& what) {
    throw error(name + ": " + what);
}

}  // namespace

nanogpt_meta parse_nanogpt_meta(const std::string& bytes, const std::string& name) {
    parser p(bytes, name);
    const value top = p.run();
    nanogpt_meta meta;
    if (top.kind != value::dictionary)
        meta_fail(name, std::string("holds ") + kind_name(top.kind) + ", expected a dict");

    const value* vs = lookup(*top.d, "vocab_size");
    if (vs == nullptr) meta_fail(name, "no 'vocab_size' key");
    if (vs->kind != value::integer)
        meta_fail(name, std::string("'vocab_size' is ") + kind_name(vs->kind) + ", expected an int");
    if (vs->i < 1 || vs->i > 65536)
        meta_fail(name,
                  "'vocab_size' is " + std::to_string(vs->i) + ", expected 1 to 65536 (uint16 token ids)");
    meta.vocab_size = vs->i;

    const value* it = lookup(*top.d, "itos");
    if (it == nullptr) meta_fail(name, "no 'itos' key");
    if (it->kind != value::dictionary)
        meta_fail(name, std::string("'itos' is ") + kind_name(it->kind) + ", expected a dict");
    meta.itos.assign(static_cast<size_t>(meta.vocab_size), std::string());
    std::vector<bool> seen(static_cast<size_t>(meta.vocab_size), false);
    for (const auto& kv : *it->d) {
        if (kv.first.kind != value::integer)
            meta_fail(name, std::string("'itos' has a key that is ") + kind_name(kv.first.kind) +
                                ", expected an int");
        if (kv.first.i < 0 || kv.first.i >= meta.vocab_size)
            meta_fail(name, "'itos' has the key " + std::to_string(kv.first.i) + ", outside 0.." +
                                std::to_string(meta.vocab_size - 1) + " (vocab_size " +
                                std::to_string(meta.vocab_size) + ")");
        if (kv.second.kind != value::string)
            meta_fail(name, "'itos'[" + std::to_string(kv.first.i) + "] is " + kind_name(kv.second.kind) +
                                ", expected a str");
        meta.itos[static_cast<size_t>(kv.first.i)] = *kv.second.s;
        seen[static_cast<size_t>(kv.first.i)] = true;
    }
    for (size_t i = 0; i < seen.size(); ++i)
        if (!seen[i])
            meta_fail(name, "'itos' has no entry for token " + std::to_string(i) + " (vocab_size " +
                                std::to_string(meta.vocab_size) + ")");
    return meta;
}

}  // namespace altgrad::host::data
