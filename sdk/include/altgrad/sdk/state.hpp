// AltGrad SDK: write and read a plugin's saved state (ABI 1.1, abi/state.h).
//
// A class that keeps state between observations adds two members, and the
// intervention adapter saves it into checkpoints and loads it on resume:
//
//   void save_state(altgrad::sdk::state_writer& w) const {
//       w.put_u32(1);                      // this class's layout version
//       w.put_bool(active_);
//       w.put_u64(activated_step_);
//   }
//   void load_state(altgrad::sdk::state_reader& r) {
//       r.expect_layout(1);
//       active_ = r.get_bool();
//       activated_step_ = r.get_u64();
//   }
//
// Values are stored little-endian with fixed widths (doubles as their IEEE
// bits), so a checkpoint reads the same on any machine. A reader that runs
// past the end, finds a bool that is not 0 or 1, or (checked by the adapter
// after load_state) leaves bytes unread throws plugin_error
// INVALID_ARGUMENT naming what it was reading.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include <altgrad/sdk/error.hpp>

namespace altgrad::sdk {

class state_writer {
public:
    void put_u32(uint32_t v) { put_bits(v, 4); }
    void put_u64(uint64_t v) { put_bits(v, 8); }
    void put_i64(int64_t v) { put_bits(static_cast<uint64_t>(v), 8); }
    void put_bool(bool v) { bytes_.push_back(v ? '\1' : '\0'); }
    void put_f64(double v) {
        uint64_t bits = 0;
        std::memcpy(&bits, &v, sizeof bits);
        put_bits(bits, 8);
    }
    // Length (u64) then the bytes.
    void put_string(const std::string& s) {
        put_u64(s.size());
        bytes_ += s;
    }

    const std::string& bytes() const { return bytes_; }

private:
    void put_bits(uint64_t v, int n) {
        for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
    }
    std::string bytes_;
};

class state_reader {
public:
    state_reader(const void* data, size_t size)
        : data_(static_cast<const unsigned char*>(data)), size_(size) {}

    uint32_t get_u32(const char* what = "u32") { return static_cast<uint32_t>(get_bits(4, what)); }
    uint64_t get_u64(const char* what = "u64") { return get_bits(8, what); }
    int64_t get_i64(const char* what = "i64") { return static_cast<int64_t>(get_bits(8, what)); }
    bool get_bool(const char* what = "bool") {
        const uint64_t v = get_bits(1, what);
        if (v > 1) fail(std::string(what) + " is " + std::to_string(v) + ", not 0 or 1");
        return v == 1;
    }
    double get_f64(const char* what = "f64") {
        const uint64_t bits = get_bits(8, what);
        double v = 0;
        std::memcpy(&v, &bits, sizeof v);
        return v;
    }
    std::string get_string(const char* what = "string") {
        const uint64_t n = get_u64(what);
        if (n > size_ - pos_)
            fail(std::string(what) + " of " + std::to_string(n) + " bytes runs past the end");
        std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
        pos_ += static_cast<size_t>(n);
        return s;
    }

    // The layout version a save_state wrote first; anything else is refused.
    void expect_layout(uint32_t version) {
        const uint32_t v = get_u32("layout version");
        if (v != version)
            fail("layout version " + std::to_string(v) + ", this plugin reads " + std::to_string(version));
    }

    size_t remaining() const { return size_ - pos_; }

    // Called by the adapter after load_state: every byte must have been read.
    void finish() const {
        if (pos_ != size_) fail(std::to_string(size_ - pos_) + " byte(s) left unread");
    }

private:
    uint64_t get_bits(size_t n, const char* what) {
        if (n > size_ - pos_)
            fail(std::string(what) + " runs past the end (" + std::to_string(size_) + " bytes)");
        uint64_t v = 0;
        for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
        pos_ += n;
        return v;
    }
    [[noreturn]] static void fail(const std::string& what) {
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "saved state: " + what);
    }

    const unsigned char* data_;
    size_t size_;
    size_t pos_ = 0;
};

}  // namespace altgrad::sdk
