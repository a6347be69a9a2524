// AltGrad SDK: turn a C++ intervention class into an intervention plugin.
//
// Contract of an intervention class I:
//   void observe(const altgrad_observation& o, altgrad::sdk::action_sink& out);
// called once per training step, by one thread at a time. I may keep state
// between calls (counters, "already activated" flags), but must be
// deterministic: the same sequence of observations gives the same actions (no
// clocks, no randomness, no addresses). A plugin is then a factory plus one
// macro:
//
//   my_intervention make(const altgrad::sdk::param_view& p) {
//       return my_intervention(p.get_float("threshold"));
//   }
//   ALTGRAD_INTERVENTION_PLUGIN("my_intervention", 1, 0, 0, "What it does", make)
//
// or ALTGRAD_INTERVENTION_PLUGIN_WITH_PARAMS(..., make, kParams, count) with
// a static altgrad_param_spec array matching the manifest's [parameters].
//
// Saved state (ABI 1.1): a class whose state changes with what it observes
// also defines, as a pair,
//   void save_state(altgrad::sdk::state_writer& w) const;
//   void load_state(altgrad::sdk::state_reader& r);
// (see altgrad/sdk/state.hpp) so a resumed run continues where it stopped.
// The adapter exports them when both exist; a class with one of them does not
// compile. After load_state it checks that every byte was read.
//
// What the adapter guarantees to I before observe() runs:
//   - the observation and the action buffer are non-NULL and at least as large
//     as their ABI 1.0 structs (struct_size checked), tensors is non-NULL when
//     tensor_count > 0, and every tensor observation is at least its v1 size
//     and has a non-NULL name and format;
//   - nothing else: loss, grad_norm, learning_rate, format_max and the rates
//     may be NaN or Inf (a rate of NaN means "not measured this step"), and
//     tensor_count may be 0. I must handle all of these.
// What it does with I's answer:
//   - action_sink writes entries in place and refuses (plugin_error
//     INVALID_ARGUMENT) an action beyond the host's capacity, an entry the host
//     sized smaller than the v1 altgrad_action, a text (tensor, format, reason)
//     that does not fit ALTGRAD_ACTION_TEXT_CAPACITY with its NUL, an empty
//     or multi-line text, and a clip value that is not finite and > 0;
//   - on any failure the buffer's count is reset to 0: the host sees no
//     partial answer. I should update its own state only after its actions
//     have been written (so a refused call leaves it as it was);
//   - exceptions never cross the boundary: plugin_error becomes its status,
//     std::bad_alloc OUT_OF_MEMORY, anything else INTERNAL (detail::guarded).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/export.hpp>
#include <altgrad/sdk/format_plugin.hpp>  // param_view, detail::guarded, detail::invalid
#include <altgrad/sdk/state.hpp>

namespace altgrad::sdk {

// Tensor i of an observation, stepping by the array's struct_size (status.h),
// so a host with grown structs is read correctly. Plugins use this rather
// than o.tensors[i].
inline const altgrad_tensor_observation& observed_tensor(const altgrad_observation& o, size_t i) {
    return *ALTGRAD_ARRAY_AT(const altgrad_tensor_observation, o.tensors, i);
}

// The run's max_steps (ABI 1.4); 0 when the host does not say (no run, or a
// host older than the field: its struct_size ends before it).
inline uint64_t observed_max_steps(const altgrad_observation& o) {
    return o.struct_size >= offsetof(altgrad_observation, max_steps) + sizeof(o.max_steps) ? o.max_steps : 0;
}

// Where an intervention writes its actions: the host's buffer, with checks.
class action_sink {
public:
    explicit action_sink(altgrad_action_buffer& buffer) : buffer_(buffer) { buffer_.count = 0; }

    size_t count() const { return buffer_.count; }
    size_t capacity() const { return buffer_.capacity; }
    size_t remaining() const { return buffer_.capacity - buffer_.count; }

    // Clip the global gradient norm to `value` (finite, > 0) before this step's update.
    void clip(double value, const std::string& reason) {
        if (!(std::isfinite(value) && value > 0.0))
            detail::invalid("clip: value must be finite and > 0, got " + std::to_string(value));
        altgrad_action& a = next(reason);
        a.kind = ALTGRAD_ACTION_CLIP_GRAD_NORM;
        a.value = value;
        commit();
    }

    // From the next step on, quantize `tensor` (a name or '*' pattern) in `format`.
    void switch_format(const std::string& tensor, const std::string& format, const std::string& reason) {
        check_text("tensor", tensor);
        check_text("format", format);
        altgrad_action& a = next(reason);
        a.kind = ALTGRAD_ACTION_SWITCH_FORMAT;
        std::memcpy(a.tensor, tensor.c_str(), tensor.size() + 1);
        std::memcpy(a.format, format.c_str(), format.size() + 1);
        commit();
    }

    // Do not apply this step's update.
    void skip_step(const std::string& reason) {
        altgrad_action& a = next(reason);
        a.kind = ALTGRAD_ACTION_SKIP_STEP;
        commit();
    }

    // One number as printf's `fmt` (one conversion, e.g. "%.4g") writes it,
    // for building reasons.
    static std::string number_text(const char* fmt, double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, fmt, v);
        return buf;
    }

    // Cut `text` so that it fits an action text field (for building reasons
    // from tensor names of unknown length).
    static std::string fit(const std::string& text, size_t max_chars = ALTGRAD_ACTION_TEXT_CAPACITY - 1) {
        return text.size() <= max_chars ? text : text.substr(0, max_chars >= 3 ? max_chars - 3 : 0) + "...";
    }

private:
    static void check_text(const char* what, const std::string& s) {
        if (s.empty()) detail::invalid(std::string("action ") + what + " is empty");
        if (s.size() >= ALTGRAD_ACTION_TEXT_CAPACITY)
            detail::invalid(std::string("action ") + what + " has " + std::to_string(s.size()) +
                            " bytes, more than fit ALTGRAD_ACTION_TEXT_CAPACITY (" +
                            std::to_string(ALTGRAD_ACTION_TEXT_CAPACITY) + ") with its NUL");
        if (s.find_first_of("\n\r", 0) != std::string::npos || s.find('\0') != std::string::npos)
            detail::invalid(std::string("action ") + what + " must be one line without NUL");
    }

    // Check the reason and the room, and return the cleared next entry.
    altgrad_action& next(const std::string& reason) {
        check_text("reason", reason);
        if (buffer_.count >= buffer_.capacity)
            detail::invalid("action buffer is full (capacity " + std::to_string(buffer_.capacity) + ")");
        altgrad_action& a = *ALTGRAD_ARRAY_AT(altgrad_action, buffer_.items, buffer_.count);
        if (a.struct_size < sizeof(altgrad_action))
            detail::invalid("action entry " + std::to_string(buffer_.count) + " has struct_size " +
                            std::to_string(a.struct_size) + ", smaller than ABI 1.0's");
        const size_t size = a.struct_size;
        std::memset(reinterpret_cast<char*>(&a) + sizeof(size_t), 0, sizeof(altgrad_action) - sizeof(size_t));
        a.struct_size = size;
        std::memcpy(a.reason, reason.c_str(), reason.size() + 1);
        return a;
    }

    void commit() { ++buffer_.count; }

    altgrad_action_buffer& buffer_;
};

namespace detail {
template <class I, class = void>
struct saves_state : std::false_type {};
template <class I>
struct saves_state<I,
                   std::void_t<decltype(std::declval<const I&>().save_state(std::declval<state_writer&>()))>>
    : std::true_type {};
template <class I, class = void>
struct loads_state : std::false_type {};
template <class I>
struct loads_state<I, std::void_t<decltype(std::declval<I&>().load_state(std::declval<state_reader&>()))>>
    : std::true_type {};
}  // namespace detail

// The vtable for intervention class I made by Factory(const param_view&).
template <class I, I (*Factory)(const param_view&)>
struct intervention_adapter {
    static constexpr bool kHasState = detail::saves_state<I>::value;
    static_assert(
        kHasState == detail::loads_state<I>::value,
        "an intervention class defines save_state(state_writer&) const and load_state(state_reader&) "
        "together, or neither");

    static I& self(altgrad_intervention* p, const char* call) {
        if (p == nullptr) detail::invalid(std::string(call) + ": intervention instance is NULL");
        return *reinterpret_cast<I*>(p);
    }

    static altgrad_status create(const altgrad_param_list* params, altgrad_intervention** out,
                                 altgrad_error* error) {
        return detail::guarded(error, [&] {
            if (out == nullptr) detail::invalid("create: out is NULL");
            *out = nullptr;
            *out = reinterpret_cast<altgrad_intervention*>(new I(Factory(param_view(params))));
        });
    }

    static void destroy(altgrad_intervention* p) { delete reinterpret_cast<I*>(p); }

    static void check_observation(const altgrad_observation* o) {
        if (o == nullptr || !ALTGRAD_STRUCT_HAS(o, altgrad_observation, tensor_count))
            detail::invalid("observe: observation is NULL or smaller than the v1 struct");
        if (o->tensor_count > 0 && o->tensors == nullptr)
            detail::invalid("observe: tensors is NULL with tensor_count > 0");
        for (size_t i = 0; i < o->tensor_count; ++i) {
            const altgrad_tensor_observation& t = observed_tensor(*o, i);
            if (!ALTGRAD_STRUCT_HAS(&t, altgrad_tensor_observation, bit_stall_rate))
                detail::invalid("observe: tensor observation " + std::to_string(i) +
                                " is smaller than the v1 struct");
            if (t.name == nullptr || t.format == nullptr)
                detail::invalid("observe: tensor observation " + std::to_string(i) +
                                " has a NULL name or format");
        }
    }

    static altgrad_status observe(altgrad_intervention* p, const altgrad_observation* o,
                                  altgrad_action_buffer* actions, altgrad_error* error) {
        const altgrad_status s = detail::guarded(error, [&] {
            if (actions == nullptr || !ALTGRAD_STRUCT_HAS(actions, altgrad_action_buffer, count))
                detail::invalid("observe: action buffer is NULL or smaller than the v1 struct");
            actions->count = 0;
            if (actions->capacity > 0 && actions->items == nullptr)
                detail::invalid("observe: action items is NULL with capacity > 0");
            I& instance = self(p, "observe");
            check_observation(o);
            action_sink sink(*actions);
            instance.observe(*o, sink);
        });
        if (s != ALTGRAD_STATUS_OK && actions != nullptr &&
            ALTGRAD_STRUCT_HAS(actions, altgrad_action_buffer, count))
            actions->count = 0;
        return s;
    }

    static altgrad_status save_state(const altgrad_intervention* p, const altgrad_state_writer* writer,
                                     altgrad_error* error) {
        return detail::guarded(error, [&] {
            if (p == nullptr) detail::invalid("save_state: intervention instance is NULL");
            if (writer == nullptr || !ALTGRAD_STRUCT_HAS(writer, altgrad_state_writer, write) ||
                writer->write == nullptr)
                detail::invalid("save_state: writer is NULL, smaller than the v1.1 struct, or has no write");
            state_writer w;
            if constexpr (kHasState) reinterpret_cast<const I*>(p)->save_state(w);
            const std::string& bytes = w.bytes();
            const altgrad_status s = writer->write(writer, bytes.data(), bytes.size());
            if (s != ALTGRAD_STATUS_OK)
                throw plugin_error(s, "save_state: the host's writer refused the bytes");
        });
    }

    static altgrad_status load_state(altgrad_intervention* p, const void* data, size_t size,
                                     altgrad_error* error) {
        return detail::guarded(error, [&] {
            self(p, "load_state");
            if (data == nullptr && size > 0) detail::invalid("load_state: data is NULL with size > 0");
            state_reader r(data, size);
            if constexpr (kHasState) self(p, "load_state").load_state(r);
            r.finish();
        });
    }

    static const altgrad_intervention_vtable* vtable() {
        static const altgrad_intervention_vtable table = {sizeof(altgrad_intervention_vtable),
                                                          &create,
                                                          &destroy,
                                                          &observe,
                                                          kHasState ? &save_state : nullptr,
                                                          kHasState ? &load_state : nullptr};
        return &table;
    }
};

}  // namespace altgrad::sdk

// Export the one entry symbol of an intervention plugin library (export.hpp: the
// identity comes from the manifest, or is given first):
//   ALTGRAD_INTERVENTION_PLUGIN(FACTORY)
//   ALTGRAD_INTERVENTION_PLUGIN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY)
// and with parameters (PARAM_SPECS: an array of altgrad_param_spec with static
// storage, matching the manifest's [parameters]):
//   ALTGRAD_INTERVENTION_PLUGIN_WITH_PARAMS(FACTORY, PARAM_SPECS, PARAM_COUNT)
//   ALTGRAD_INTERVENTION_PLUGIN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY,
//       PARAM_SPECS, PARAM_COUNT)
// The four tables of an intervention plugin's entry.
#define ALTGRAD_SDK_INTERVENTION_TABLES(FACTORY)                                                        \
    nullptr, (::altgrad::sdk::intervention_adapter<ALTGRAD_SDK_CLASS_OF(FACTORY), &FACTORY>::vtable()), \
        nullptr, nullptr

#define ALTGRAD_SDK_INTERVENTION_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, SPECS, \
                                                   COUNT)                                                  \
    ALTGRAD_SDK_ENTRY_EXPANDED(ALTGRAD_KIND_INTERVENTION, NAME, MAJOR, MINOR, PATCH, DESCRIPTION, SPECS,   \
                               COUNT, ALTGRAD_SDK_INTERVENTION_TABLES(FACTORY))
#define ALTGRAD_SDK_INTERVENTION_MANIFEST_WITH_PARAMS(FACTORY, SPECS, COUNT) \
    ALTGRAD_SDK_ENTRY_FROM_MANIFEST(ALTGRAD_KIND_INTERVENTION, SPECS, COUNT, \
                                    ALTGRAD_SDK_INTERVENTION_TABLES(FACTORY))
#define ALTGRAD_SDK_INTERVENTION_GIVEN(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY) \
    ALTGRAD_SDK_INTERVENTION_GIVEN_WITH_PARAMS(NAME, MAJOR, MINOR, PATCH, DESCRIPTION, FACTORY, nullptr, 0)
#define ALTGRAD_SDK_INTERVENTION_MANIFEST(FACTORY) \
    ALTGRAD_SDK_INTERVENTION_MANIFEST_WITH_PARAMS(FACTORY, nullptr, 0)

#define ALTGRAD_INTERVENTION_PLUGIN_WITH_PARAMS(...)                     \
    ALTGRAD_SDK_DISPATCH_3_8(ALTGRAD_SDK_INTERVENTION_GIVEN_WITH_PARAMS, \
                             ALTGRAD_SDK_INTERVENTION_MANIFEST_WITH_PARAMS, __VA_ARGS__)
#define ALTGRAD_INTERVENTION_PLUGIN(...) \
    ALTGRAD_SDK_DISPATCH_1_6(ALTGRAD_SDK_INTERVENTION_GIVEN, ALTGRAD_SDK_INTERVENTION_MANIFEST, __VA_ARGS__)
