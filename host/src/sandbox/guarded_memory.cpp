#include "sandbox/guarded_memory.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <utility>

#include "util/error.hpp"

namespace altgrad::host::sandbox {

namespace {

constexpr unsigned char kPattern = 0xA5;

// The live guarded buffers, for the fault handler, which may only read plain
// memory: a fixed table whose slots are claimed and released atomically
// (threads of the concurrency check allocate buffers at once).
struct slot {
    std::atomic<int> state{0};  // 0 free, 1 being written, 2 live
    uintptr_t region_begin = 0, data_begin = 0, data_end = 0, region_end = 0;
    size_t element_size = 1;
    bool read_only = false;
    char name[48] = {};
};
constexpr int kSlots = 256;
slot g_slots[kSlots];

crash_note* g_note = nullptr;  // set in a check's child process only

void copy_text(char* to, size_t size, const char* from) {
    size_t k = 0;
    for (; from[k] != '\0' && k + 1 < size; ++k) to[k] = from[k];
    to[k] = '\0';
}

// Async-signal-safe: reads the table and writes the shared note, nothing else.
void on_fault(int sig, siginfo_t* info, void*) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
    if (g_note != nullptr)
        for (slot& s : g_slots) {
            if (s.state.load(std::memory_order_acquire) != 2 || a < s.region_begin || a >= s.region_end)
                continue;
            const uint64_t size = s.element_size;
            g_note->count = (s.data_end - s.data_begin) / size;
            if (a >= s.data_end) {
                g_note->where = fault_after_end;
                g_note->element = g_note->count + (a - s.data_end) / size;
            } else if (a < s.data_begin) {
                g_note->where = fault_before_start;
                g_note->element = (s.data_begin - a + size - 1) / size;  // how far before element 0
            } else if (s.read_only) {
                g_note->where = fault_read_only;
                g_note->element = (a - s.data_begin) / size;
            } else {
                continue;  // inside a writable buffer: not a bounds fault
            }
            copy_text(g_note->buffer, sizeof g_note->buffer, s.name);
            break;
        }
    // Let the signal do what it would have done: kill the process (the parent
    // reads the note and the signal).
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

size_t page_size() {
    static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return page;
}

}  // namespace

void report_faults_to(crash_note* note) {
    g_note = note;
    // Its own stack, so a plugin that overflows the stack is still reported.
    static char alternate_stack[1 << 16];
    stack_t st{};
    st.ss_sp = alternate_stack;
    st.ss_size = sizeof alternate_stack;
    ::sigaltstack(&st, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, nullptr);
    ::sigaction(SIGBUS, &sa, nullptr);
}

call_note::call_note(const std::string& call) {
    if (g_note != nullptr) copy_text(g_note->call, sizeof g_note->call, call.c_str());
}

call_note::~call_note() {
    if (g_note != nullptr) g_note->call[0] = '\0';
}

guarded_buffer::guarded_buffer(size_t bytes, size_t element_size, const char* name) : bytes_(bytes) {
    const size_t page = page_size();
    const size_t data_pages = bytes == 0 ? 1 : (bytes + page - 1) / page;
    region_bytes_ = (data_pages + 2) * page;
    void* p = ::mmap(nullptr, region_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw error("conformance: could not map " + std::to_string(region_bytes_) + " bytes");
    region_ = static_cast<char*>(p);
    ::mprotect(region_, page, PROT_NONE);
    ::mprotect(region_ + (data_pages + 1) * page, page, PROT_NONE);
    data_ = region_ + (data_pages + 1) * page - bytes;
    std::memset(region_ + page, kPattern, static_cast<size_t>(data_ - (region_ + page)));
    for (int k = 0; k < kSlots; ++k) {
        int free_state = 0;
        if (!g_slots[k].state.compare_exchange_strong(free_state, 1, std::memory_order_acquire)) continue;
        slot& s = g_slots[k];
        s.region_begin = reinterpret_cast<uintptr_t>(region_);
        s.region_end = s.region_begin + region_bytes_;
        s.data_begin = reinterpret_cast<uintptr_t>(data_);
        s.data_end = s.data_begin + bytes;
        s.element_size = element_size;
        s.read_only = false;
        copy_text(s.name, sizeof s.name, name);
        s.state.store(2, std::memory_order_release);
        slot_ = k;
        break;
    }
    // With every slot taken the buffer still faults; only the report is vaguer.
}

guarded_buffer::guarded_buffer(guarded_buffer&& other) noexcept
    : region_(std::exchange(other.region_, nullptr)),
      region_bytes_(other.region_bytes_),
      data_(other.data_),
      bytes_(other.bytes_),
      slot_(std::exchange(other.slot_, -1)) {}

guarded_buffer::~guarded_buffer() {
    if (region_ == nullptr) return;
    if (slot_ >= 0) g_slots[slot_].state.store(0, std::memory_order_release);
    ::munmap(region_, region_bytes_);
}

void guarded_buffer::seal() {
    const size_t page = page_size();
    ::mprotect(region_ + page, region_bytes_ - 2 * page, PROT_READ);
    if (slot_ >= 0) g_slots[slot_].read_only = true;
}

bool guarded_buffer::front_intact() const {
    for (const char* p = region_ + page_size(); p < data_; ++p)
        if (static_cast<unsigned char>(*p) != kPattern) return false;
    return true;
}

}  // namespace altgrad::host::sandbox
