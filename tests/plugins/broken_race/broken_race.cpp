// Test plugin: E4M3 whose quantize goes through one global scratch buffer
// shared by every call: each chunk is quantized into the buffer, the thread
// yields, then copies the buffer out. Alone it is correct; two threads at once
// get each other's results. The kit's concurrency.threads must fail while the
// single-threaded checks pass.
#include <algorithm>
#include <cstring>
#include <thread>

#include "../broken_common.hpp"

namespace {

using correct = altgrad::sdk::format_adapter<broken::e4m3, &broken::make<broken::e4m3>>;

constexpr size_t kScratch = 4096;
float scratch[kScratch];  // the bug: state shared by all calls

altgrad_status racy_quantize(const altgrad_format* f, altgrad_quantize_args* a, altgrad_error* e) {
    if (a == nullptr || a->struct_size < sizeof *a || a->count == 0 || a->input == nullptr ||
        a->output == nullptr || a->memory != ALTGRAD_MEMORY_HOST)
        return correct::quantize(f, a, e);  // let the adapter validate
    const float* const in = a->input;
    float* const out = a->output;
    altgrad_quantize_args chunk = *a;
    uint64_t overflow = 0, underflow = 0;
    for (size_t start = 0; start < a->count; start += kScratch) {
        const size_t n = std::min(kScratch, a->count - start);
        chunk.input = in + start;
        chunk.output = scratch;
        chunk.count = n;
        chunk.offset = a->offset + start;
        const altgrad_status s = correct::quantize(f, &chunk, e);
        if (s != ALTGRAD_STATUS_OK) return s;
        std::this_thread::yield();  // widen the window for another thread
        std::memcpy(out + start, scratch, n * sizeof(float));
        overflow += chunk.overflow_count;
        underflow += chunk.underflow_count;
    }
    a->overflow_count = overflow;
    a->underflow_count = underflow;
    return ALTGRAD_STATUS_OK;
}

const altgrad_format_vtable* racy_vtable() {
    static const altgrad_format_vtable table = [] {
        altgrad_format_vtable t = *correct::vtable();
        t.quantize = &racy_quantize;
        return t;
    }();
    return &table;
}

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {
        sizeof(altgrad_descriptor),
        ALTGRAD_KIND_FORMAT,
        "broken_race",
        {1, 0, 0},
        "Test plugin: E4M3 whose quantize goes through one global scratch buffer",
        nullptr,
        0};
    static const altgrad_entry entry = {
        sizeof(altgrad_entry), ALTGRAD_ABI_VERSION_INIT, &descriptor, racy_vtable(), nullptr, nullptr};
    return &entry;
}
