#include "plugins/call_record.hpp"

#include <sys/mman.h>

#include <new>

namespace altgrad::host {

namespace {

std::atomic<call_record*> g_record{nullptr};

template <size_t N>
void store_text(std::atomic<char> (&to)[N], const char* from, size_t length) {
    const size_t n = length < N - 1 ? length : N - 1;
    for (size_t k = 0; k < n; ++k) to[k].store(from[k], std::memory_order_relaxed);
    to[n].store('\0', std::memory_order_relaxed);
}

template <size_t N>
std::string load_text(const std::atomic<char> (&from)[N]) {
    std::string s;
    for (size_t k = 0; k < N; ++k) {
        const char c = from[k].load(std::memory_order_relaxed);
        if (c == '\0') break;
        s += c;
    }
    return s;
}

}  // namespace

call_record* make_shared_call_record() {
    void* p = ::mmap(nullptr, sizeof(call_record), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : new (p) call_record();
}

void note_calls_in(call_record* record) { g_record.store(record, std::memory_order_relaxed); }

void note_steps_done(int64_t steps) {
    if (call_record* r = g_record.load(std::memory_order_relaxed))
        r->steps_done.store(steps, std::memory_order_relaxed);
}

void note_run_dir(const std::filesystem::path& dir) {
    if (call_record* r = g_record.load(std::memory_order_relaxed)) {
        const std::string text = std::filesystem::absolute(dir).string();
        store_text(r->run_dir, text.c_str(), text.size());
    }
}

noted_call::noted_call(const std::string& plugin, const char* call)
    : record_(g_record.load(std::memory_order_relaxed)) {
    if (record_ == nullptr) return;
    store_text(record_->plugin, plugin.c_str(), plugin.size());
    store_text(record_->call, call, std::char_traits<char>::length(call));
    record_->calls_running.fetch_add(1, std::memory_order_relaxed);
}

noted_call::~noted_call() {
    if (record_ != nullptr) record_->calls_running.fetch_sub(1, std::memory_order_relaxed);
}

call_snapshot read_call_record(const call_record& record) {
    call_snapshot s;
    s.in_call = record.calls_running.load(std::memory_order_relaxed) > 0;
    s.plugin = load_text(record.plugin);
    s.call = load_text(record.call);
    s.steps_done = record.steps_done.load(std::memory_order_relaxed);
    s.run_dir = load_text(record.run_dir);
    return s;
}

}  // namespace altgrad::host
