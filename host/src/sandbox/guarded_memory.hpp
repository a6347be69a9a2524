// Buffers the kit hands a plugin, laid out so that a plugin touching memory
// outside them faults at once (in the check's child process), and the notes
// that let the parent name the call and the buffer when the child dies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace altgrad::host::sandbox {

// What a check's child leaves for its parent in memory they share; the parent
// reads it when the child dies. Written before each plugin call and by the
// child's fault handler.
struct crash_note {
    char call[512];    // the plugin call in progress ("" between calls)
    char buffer[48];   // the buffer a fault hit ("" when none of ours)
    int32_t where;     // see fault_place
    uint64_t element;  // the element index the faulting address falls on
    uint64_t count;    // the buffer's element count
};

enum fault_place : int32_t {
    fault_none = 0,
    fault_after_end = 1,
    fault_before_start = 2,
    fault_read_only = 3
};

// In a check's child process: record faults in `note` (shared with the parent).
// Installs a SIGSEGV/SIGBUS handler that notes which guarded buffer (if any)
// the faulting address hits and then lets the signal kill the process.
void report_faults_to(crash_note* note);

// The plugin call about to run, for the crash report; clears itself when it
// goes out of scope. Only the thread running the check sets it.
class call_note {
public:
    explicit call_note(const std::string& call);
    ~call_note();
    call_note(const call_note&) = delete;
    call_note& operator=(const call_note&) = delete;
};

// `bytes` of memory whose last byte is followed by an inaccessible page, and
// whose first page is preceded by one: reading or writing past the end
// faults. Element 0 sits inside its page (the end is what lines up), so the
// bytes between the page start and element 0 hold a pattern that intact()
// checks: a write a little before element 0 does not fault but is seen.
class guarded_buffer {
public:
    guarded_buffer(size_t bytes, size_t element_size, const char* name);
    ~guarded_buffer();
    guarded_buffer(guarded_buffer&& other) noexcept;
    guarded_buffer& operator=(guarded_buffer&&) = delete;
    guarded_buffer(const guarded_buffer&) = delete;
    guarded_buffer& operator=(const guarded_buffer&) = delete;

    void* data() const { return data_; }
    size_t bytes() const { return bytes_; }
    // Read-only from now on: the buffer is a plugin's input.
    void seal();
    // Whether the pattern before element 0 is untouched.
    bool front_intact() const;

private:
    char* region_ = nullptr;  // the mapping, guard pages included
    size_t region_bytes_ = 0;
    char* data_ = nullptr;
    size_t bytes_ = 0;
    int slot_ = -1;  // in the fault handler's table
};

// A guarded_buffer of T, filled from a vector (or zeros).
template <class T>
class guarded_array {
public:
    guarded_array(size_t n, const char* name) : buf_(n * sizeof(T), sizeof(T), name), n_(n) {
        std::memset(buf_.data(), 0, n * sizeof(T));
    }
    guarded_array(const std::vector<T>& v, const char* name) : guarded_array(v.size(), name) {
        if (!v.empty()) std::memcpy(buf_.data(), v.data(), v.size() * sizeof(T));
    }
    T* data() const { return static_cast<T*>(buf_.data()); }
    size_t size() const { return n_; }
    void seal() { buf_.seal(); }
    const guarded_buffer& buffer() const { return buf_; }
    std::vector<T> to_vector() const { return std::vector<T>(data(), data() + n_); }

private:
    guarded_buffer buf_;
    size_t n_;
};

}  // namespace altgrad::host::sandbox
