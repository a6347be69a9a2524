// The checks of intervention and diagnostic plugins alike: params.* (the
// manifest's defaults create; values outside the declared ranges are refused),
// instances.separate and answers.deterministic.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conformance/checks.hpp"
#include "plugins/params.hpp"

namespace altgrad::host::conformance {

namespace {

std::string params_text(const host::given_params& p) {
    std::string s;
    for (const auto& [k, v] : p) s += (s.empty() ? "" : ", ") + k + " = \"" + v.text + "\"";
    return s.empty() ? "(defaults)" : s;
}

std::string number_text(double x, bool integer) {
    if (integer) return std::to_string(static_cast<long long>(x));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return buf;
}

result check_separate_body(env& e) {
    constexpr size_t kSteps = 40;
    std::unique_ptr<history_runner> run = make_runner(e, kSteps);
    std::vector<std::string> alone[2];
    for (int w = 0; w < 2; ++w) {
        const size_t i = run->fresh();
        for (size_t k = 0; k < kSteps; ++k) alone[w].push_back(run->answer(i, w, k));
        run->drop(i);
    }
    const size_t a = run->fresh(), b = run->fresh();
    for (size_t k = 0; k < kSteps; ++k)
        for (int w = 0; w < 2; ++w) {
            const std::string got = run->answer(w == 0 ? a : b, w, k);
            if (got != alone[w][k])
                return fail(
                    "instance " + std::string(w == 0 ? "A" : "B") +
                        " answered differently beside another "
                        "instance than alone at step " +
                        std::to_string(k) + ": " + got + " vs alone " + alone[w][k],
                    "two instances with the default parameters, each fed its own " + std::to_string(kSteps) +
                        "-step random history, calls interleaved A, B, A, B, ...",
                    "keep all state in the instance: no static or global variables that instances share");
        }
    return pass("two instances fed interleaved histories of " + std::to_string(kSteps) +
                " steps answer exactly as each does alone");
}

result check_deterministic_body(env& e) {
    constexpr size_t kSteps = 40;
    std::unique_ptr<history_runner> run = make_runner(e, kSteps);
    std::vector<std::string> first;
    const size_t x = run->fresh();
    for (size_t k = 0; k < kSteps; ++k) first.push_back(run->answer(x, 0, k));
    run->drop(x);
    const size_t y = run->fresh();
    for (size_t k = 0; k < kSteps; ++k) {
        const std::string got = run->answer(y, 0, k);
        if (got != first[k])
            return fail("a second fresh instance answered differently at step " + std::to_string(k) + ": " +
                            got + " vs " + first[k],
                        run->input(k) + " (after the same " + std::to_string(k) + " earlier inputs)",
                        "answers must depend only on the parameters and the inputs so far: no clocks, no "
                        "unseeded randomness, no uninitialised state");
    }
    return pass("two fresh instances fed the same " + std::to_string(kSteps) +
                " inputs give identical answers");
}

}  // namespace

result check_params_defaults(env& e) {
    result r;
    if (!load_for_check(e, r)) return r;
    try {
        create_instance(e, {});
    } catch (const std::exception& x) {
        return fail(std::string("create with the manifest's defaults failed: ") + x.what(), "(defaults)",
                    "the manifest's defaults must be values the plugin's create accepts");
    }
    return pass("create with the manifest's defaults (" + std::to_string(e.target.info->params.size()) +
                " parameters) succeeds");
}

result check_params_refused(env& e) {
    result r;
    if (!load_for_check(e, r)) return r;
    const manifest& m = *e.target.info;
    size_t outside = 0, edges = 0, plugin_refusals = 0;
    // A value the host must refuse before create ever sees it.
    auto must_refuse = [&](const std::string& key, const std::string& value) -> std::optional<result> {
        ++outside;
        try {
            resolve_params(m, {{key, value}}, "conformance");
        } catch (const std::exception& x) {
            if (std::string(x.what()).empty())
                return fail("the refusal has no message", key + " = \"" + value + "\"", "");
            return std::nullopt;
        }
        return fail("the host accepted a value outside the declared range", key + " = \"" + value + "\"",
                    "the host's parameter validation must enforce the manifest's min, max and choices");
    };
    // A value inside the declared range (its edge): create may refuse it, but
    // only as an error with a message, never a crash.
    auto edge = [&](const std::string& key, const std::string& value) -> std::optional<result> {
        ++edges;
        try {
            create_instance(e, {{key, value}});
        } catch (const std::exception& x) {
            const std::string what = x.what();
            ++plugin_refusals;
            if (what.empty() || what.find("): no message") != std::string::npos)
                return fail("create refused a value in the manifest's range without a message: " + what,
                            key + " = \"" + value + "\"",
                            "fill altgrad_error.message (throw plugin_error with a message saying what is "
                            "accepted), or narrow the manifest's min/max to what create accepts");
        }
        return std::nullopt;
    };
    for (const param_decl& d : m.params) {
        const bool integer = d.type == ALTGRAD_PARAM_INT;
        if (d.type == ALTGRAD_PARAM_INT || d.type == ALTGRAD_PARAM_FLOAT) {
            if (d.min) {
                const double below =
                    integer ? *d.min - 1 : (*d.min == 0 ? -1e-6 : *d.min - std::fabs(*d.min) * 1e-6);
                if (auto f = must_refuse(d.key, number_text(below, integer))) return *f;
                if (auto f = edge(d.key, number_text(*d.min, integer))) return *f;
            }
            if (d.max) {
                const double above =
                    integer ? *d.max + 1 : (*d.max == 0 ? 1e-6 : *d.max + std::fabs(*d.max) * 1e-6);
                if (auto f = must_refuse(d.key, number_text(above, integer))) return *f;
                if (auto f = edge(d.key, number_text(*d.max, integer))) return *f;
            }
        } else if (d.type == ALTGRAD_PARAM_STRING && !d.choices.empty()) {
            std::string other = "not_a_choice";
            while (std::find(d.choices.begin(), d.choices.end(), other) != d.choices.end()) other += "_";
            if (auto f = must_refuse(d.key, other)) return *f;
            for (const std::string& c : d.choices)
                if (auto f = edge(d.key, c)) return *f;
        }
    }
    if (outside == 0) return skip("no parameter declares a min, max or choices");
    return pass(std::to_string(outside) + " values outside the declared ranges are refused by the host; " +
                std::to_string(edges) + " values at the edges create or are refused with a message (" +
                std::to_string(plugin_refusals) + " refused)");
}

result check_separate(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    try {
        return check_separate_body(e);
    } catch (const std::exception& x) {
        return fail(std::string("a call failed: ") + x.what(),
                    "a random history of 40 inputs with the default parameters",
                    "every input the host can send must be answered without error (see the other checks for "
                    "which)");
    }
}

result check_deterministic(env& e) {
    result why;
    if (!prepare(e, why)) return why;
    try {
        return check_deterministic_body(e);
    } catch (const std::exception& x) {
        return fail(std::string("a call failed: ") + x.what(),
                    "a random history of 40 inputs with the default parameters",
                    "every input the host can send must be answered without error (see the other checks for "
                    "which)");
    }
}

}  // namespace altgrad::host::conformance
