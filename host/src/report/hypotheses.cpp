// The hypotheses file (docs/report.md, "The hypotheses file"): read, checked
// key by key, into the hypotheses a report judges.
#include "report/hypotheses.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <toml++/toml.h>

#include "stability/failure.hpp"
#include "util/abi_names.hpp"
#include "util/error.hpp"
#include "util/file_text.hpp"
#include "util/name_table.hpp"
#include "util/toml_text.hpp"

namespace altgrad::host::report {

namespace {

const name_table<hypothesis::test_kind>& test_names() {
    static const name_table<hypothesis::test_kind> t{{hypothesis::test_kind::failure_rate, "failure_rate"},
                                                     {hypothesis::test_kind::overflow, "overflow"},
                                                     {hypothesis::test_kind::failure_mode, "failure_mode"}};
    return t;
}

class hypotheses_reader {
public:
    explicit hypotheses_reader(std::string file) : file_(std::move(file)) {}

    hypotheses read(const toml::table& doc) const {
        hypotheses out;
        out.file = file_;
        known(doc, "", {"source", "hypothesis"});
        out.source = text(doc, "", "source", true);
        const toml::node* list = doc.get("hypothesis");
        if (list == nullptr) fail("hypothesis", "missing (one [[hypothesis]] table per hypothesis)");
        if (!list->is_array_of_tables()) fail("hypothesis", "expected [[hypothesis]] tables");
        const toml::array& items = *list->as_array();
        for (size_t i = 0; i < items.size(); ++i) out.items.push_back(item(*items.get(i)->as_table(), i));
        return out;
    }

private:
    std::string file_;

    [[noreturn]] void fail(const std::string& key, const std::string& what) const {
        throw error(file_ + ": key '" + key + "': " + what);
    }

    void known(const toml::table& t, const std::string& prefix, const std::vector<std::string>& keys) const {
        for (auto&& [k, v] : t)
            if (std::find(keys.begin(), keys.end(), std::string(k.str())) == keys.end()) {
                std::string list;
                for (const std::string& key : keys) list += (list.empty() ? "" : ", ") + key;
                fail(prefix + std::string(k.str()), "unknown key here (expected " + list + ")");
            }
    }

    std::string text(const toml::table& t, const std::string& prefix, const char* key, bool required) const {
        const toml::node* n = t.get(key);
        if (n == nullptr) {
            if (required) fail(prefix + key, "missing");
            return "";
        }
        if (!n->is_string() || n->as_string()->get().empty())
            fail(prefix + key, "expected a non-empty string");
        return n->as_string()->get();
    }

    // A fraction in [0, 1]; nullopt when absent.
    std::optional<double> fraction(const toml::table& t, const std::string& prefix, const char* key) const {
        const toml::node* n = t.get(key);
        if (n == nullptr) return std::nullopt;
        const std::optional<double> x = n->value<double>();
        if (!x || !(*x >= 0.0 && *x <= 1.0)) fail(prefix + key, "expected a number in [0, 1]");
        return x;
    }

    hypothesis item(const toml::table& t, size_t i) const {
        const std::string prefix = "hypothesis[" + std::to_string(i) + "].";
        hypothesis h;
        h.format = text(t, prefix, "format", true);
        h.claim = text(t, prefix, "claim", true);
        const std::string test = text(t, prefix, "test", true);
        const auto kind = test_names().value(test);
        if (!kind) fail(prefix + "test", "expected one of " + test_names().list() + ", got \"" + test + "\"");
        h.test = *kind;
        switch (h.test) {
            case hypothesis::test_kind::failure_rate: {
                known(t, prefix, {"format", "claim", "test", "more_than", "at_least", "at_most"});
                const auto more = fraction(t, prefix, "more_than"), least = fraction(t, prefix, "at_least");
                if (more && least) fail(prefix + "more_than", "give more_than or at_least, not both");
                h.lower = more ? *more : least.value_or(0.0);
                h.lower_inclusive = !more;
                h.at_most = fraction(t, prefix, "at_most").value_or(1.0);
                if (h.lower > h.at_most) fail(prefix + "at_most", "is below the lower bound");
                break;
            }
            case hypothesis::test_kind::overflow: {
                known(t, prefix, {"format", "claim", "test", "roles", "rate"});
                const toml::node* roles = t.get("roles");
                const std::string quantized = "weight, activation, output_gradient";
                if (roles == nullptr || !roles->is_array() || roles->as_array()->empty())
                    fail(prefix + "roles", "expected a non-empty array of tensor roles (" + quantized + ")");
                for (const toml::node& n : *roles->as_array()) {
                    const auto role =
                        n.is_string() ? tensor_role_names().value(n.as_string()->get()) : std::nullopt;
                    if (!role || (*role != ALTGRAD_TENSOR_WEIGHT && *role != ALTGRAD_TENSOR_ACTIVATION &&
                                  *role != ALTGRAD_TENSOR_OUTPUT_GRADIENT))
                        fail(prefix + "roles",
                             "expected roles of quantized tensors (" + quantized + "), got " +
                                 (n.is_string() ? "\"" + n.as_string()->get() + "\"" : "a non-string"));
                    h.roles.push_back(*role);
                }
                const auto rate = fraction(t, prefix, "rate");
                if (!rate) fail(prefix + "rate", "missing (the overflow rate a tensor must pass, e.g. 0.1)");
                h.rate = *rate;
                break;
            }
            case hypothesis::test_kind::failure_mode: {
                known(t, prefix, {"format", "claim", "test", "mode", "at_most"});
                h.mode = text(t, prefix, "mode", true);
                if (!stability::failure_mode_names().value(h.mode))
                    fail(prefix + "mode", "expected one of " + stability::failure_mode_names().list() +
                                              ", got \"" + h.mode + "\"");
                h.at_most = fraction(t, prefix, "at_most").value_or(1.0);
                break;
            }
        }
        return h;
    }
};

}  // namespace

hypotheses parse_hypotheses(const std::string& toml_text, const std::string& source_name) {
    return hypotheses_reader(source_name).read(parse_toml_text(toml_text, source_name));
}

hypotheses load_hypotheses(const fs::path& file) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) throw error(file.string() + ": no such hypotheses file");
    return parse_hypotheses(read_file_text(file, kConfigLimit, "a hypotheses file"), file.string());
}

fs::path default_hypotheses_file() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return "configs/hypotheses/seeds.toml";
    const fs::path dir = exe.parent_path();
    const fs::path installed = dir / ".." / "share" / "altgrad" / "hypotheses" / "seeds.toml";
    for (const fs::path& candidate : {dir / "hypotheses" / "seeds.toml", installed})
        if (fs::is_regular_file(candidate, ec)) return candidate.lexically_normal();
    return installed.lexically_normal();  // named in the error when missing
}

}  // namespace altgrad::host::report
