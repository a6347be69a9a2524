// The checks of intervention plugins only: observe.* (non-finite inputs, a
// step with no tensors) and state.resume (a saved state loaded into a fresh
// instance answers as the original).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "conformance/checks.hpp"
#include "util/error.hpp"

namespace altgrad::host::conformance {

namespace {

// A step after which nothing is wrong: finite loss and gradient, no overflow,
// underflow or stall. State is what makes an instance answer these
// differently (clipping left on), so the kit replays them after a resume too.
observation calm(observation o) {
    o.loss = 2.0;
    o.grad_norm = 1.0;
    o.consecutive_nonfinite_steps = 0;
    for (tensor_observation& t : o.tensors) t.overflow_rate = t.underflow_rate = t.bit_stall_rate = 0.0;
    return o;
}

// load_state with the bytes in a guarded, read-only buffer: reading past the
// state or writing into it faults, and the check names the call.
void load_state(intervention_handle& h, const std::string& bytes) {
    const call_note note("load_state of " + std::to_string(bytes.size()) + " bytes");
    guarded_buffer state(bytes.size(), 1, "state");
    if (!bytes.empty()) std::memcpy(state.data(), bytes.data(), bytes.size());
    state.seal();
    h.load_state(state.data(), bytes.size());
}

result check_state_resume_body(env& e) {
    constexpr size_t kSteps = 40;
    const std::vector<observation> h = random_history(e, kSteps);
    for (const size_t split : {size_t{0}, size_t{13}, size_t{27}})
        for (const bool calm_after : {false, true}) {
            const std::shared_ptr<intervention_handle> original =
                intervention_handle::create(e.plugin, {}, "conformance");
            for (size_t k = 0; k < split; ++k) observe(*original, h[k]);
            const std::string bytes = original->save_state();
            const std::string where = "saved after " + std::to_string(split) +
                                      " steps of a random history (" + std::to_string(bytes.size()) +
                                      " bytes)";
            if (original->save_state() != bytes)
                return fail(
                    "saving twice in a row gave different bytes", where,
                    "save_state must not change the instance, and must write the same bytes for the same "
                    "state");
            if (!bytes.empty()) {
                try {
                    load_state(*intervention_handle::create(e.plugin, {}, "conformance"),
                               bytes.substr(0, bytes.size() - 1));
                    return fail(
                        "a state cut short by one byte was accepted", where,
                        "load_state must refuse bytes it cannot read with INVALID_ARGUMENT (the SDK's "
                        "state_reader does): a truncated checkpoint must not resume silently");
                } catch (const error&) {}
            }
            const std::shared_ptr<intervention_handle> restored =
                intervention_handle::create(e.plugin, {}, "conformance");
            load_state(*restored, bytes);
            for (size_t k = split; k < kSteps; ++k) {
                const observation o = calm_after ? calm(h[k]) : h[k];
                const std::string want = answer_text(observe(*original, o));
                const std::string got = answer_text(observe(*restored, o));
                if (got != want)
                    return fail(
                        "the restored instance answered " + got + " where the original answered " + want,
                        where + ", then " + (calm_after ? "calm steps (finite, no overflow): " : "") +
                            observation_text(o),
                        "save_state must write everything later answers depend on, and load_state "
                        "restore it");
            }
        }
    return pass(
        "states saved after 0, 13 and 27 of 40 random steps, loaded into fresh instances, give the "
        "original's "
        "answers to the rest of the history and to calm steps; a state cut short is refused");
}

}  // namespace

result check_observe_nonfinite(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<intervention_handle> h = intervention_handle::create(e.plugin, {}, "conformance");
    uint32_t run = 0;
    observation base = random_observation(e, 0, run);
    const double specials[] = {NAN, INFINITY, -INFINITY};
    uint64_t step = 0;
    for (double s : specials)
        for (int field = 0; field < 7; ++field) {
            observation o = base;
            o.step = step++;
            o.consecutive_nonfinite_steps = static_cast<uint32_t>(step);
            const char* what = "";
            switch (field) {
                case 0:
                    o.loss = s;
                    what = "loss";
                    break;
                case 1:
                    o.grad_norm = s;
                    what = "grad_norm";
                    break;
                case 2:
                    o.learning_rate = s;
                    what = "learning_rate";
                    break;
                case 3:
                    for (auto& t : o.tensors) t.overflow_rate = s;
                    what = "every overflow_rate";
                    break;
                case 4:
                    for (auto& t : o.tensors) t.underflow_rate = s;
                    what = "every underflow_rate";
                    break;
                case 5:
                    for (auto& t : o.tensors) t.bit_stall_rate = s;
                    what = "every bit_stall_rate";
                    break;
                default:
                    for (auto& t : o.tensors) t.format_max = s;
                    o.loss = o.grad_norm = s;
                    what = "every format_max, loss and grad_norm";
            }
            try {
                observe(*h, o);
            } catch (const std::exception& x) {
                return fail(
                    std::string("observe failed: ") + x.what(),
                    std::string(what) + " = " + hex_float(s) + " (" + observation_text(o) + ")",
                    "NaN and Inf are ordinary inputs (a diverging run is what interventions are for): "
                    "answer no action or a valid one, never an error or an invalid action");
            }
        }
    return pass(
        "21 steps with NaN, +Inf and -Inf in the loss, gradient norm, learning rate, rates and format_max "
        "were observed without error");
}

result check_observe_empty(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    const std::shared_ptr<intervention_handle> h = intervention_handle::create(e.plugin, {}, "conformance");
    for (uint64_t step = 0; step < 5; ++step) {
        observation o;
        o.step = step;
        o.loss = step == 2 ? NAN : 1.0;
        o.grad_norm = step == 2 ? INFINITY : 1.0;
        o.consecutive_nonfinite_steps = step == 2 ? 1 : 0;
        o.learning_rate = 1e-3;
        try {
            observe(*h, o);
        } catch (const std::exception& x) {
            return fail(std::string("observe failed: ") + x.what(), observation_text(o) + " (tensors = NULL)",
                        "a step may observe no tensors: tensors is NULL and tensor_count 0");
        }
    }
    return pass("5 steps with no tensors (tensors NULL, count 0) were observed without error");
}

result check_state_resume(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    if (!intervention_handle::create(e.plugin, {}, "conformance")->saves_state())
        return skip("the plugin saves no state (no save_state/load_state): a resumed run starts it afresh");
    try {
        return check_state_resume_body(e);
    } catch (const std::exception& x) {
        return fail(
            std::string("a call failed: ") + x.what(),
            "a random history of 40 steps, saved after 0, 13 and 27 of them and loaded into a fresh instance",
            "save_state must succeed in every state observe can reach, and load_state must accept what "
            "save_state wrote");
    }
}

}  // namespace altgrad::host::conformance
