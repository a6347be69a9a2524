// mantissa_shift: emergency format fallback (research notes, STAB-06).
//
// Two triggers, checked every step:
//   1. Persistent non-finite training: when the host's
//      consecutive_nonfinite_steps (this step included) reaches nan_patience
//      (default 3), every observed tensor whose active format has a successor
//      in the chain is switched to it. With patience 3 this fires exactly at
//      the 3rd non-finite step in a row, never before.
//   2. Bit stall: a WEIGHT tensor whose bit_stall_rate is strictly above
//      stall_threshold (default 0.5) is switched, if its format has a
//      successor. NaN (not measured) never triggers.
//
// Decisions:
//   - One SWITCH_FORMAT action per tensor, naming the tensor exactly (no
//     '*' pattern): the observation gives per-tensor names and formats, and
//     a pattern could also hit tensors the host did not report or that are in
//     another format. A tensor hit by both triggers gets one action (the
//     reason names the non-finite trigger first, then the stall).
//   - Each (tensor, from-format) switch is asked for once per instance: if the
//     host keeps reporting the old format (it has not applied the switch yet,
//     or declined it), the request is not repeated every step. Once the tensor
//     shows up in the new format, a further trigger follows the chain on from
//     there (a>b,b>c walks a->b->c).
//   - Direction: the plugin imposes none; the chain defines it. The default
//     chain e7m0>e5m2, e1m6>e3m4, e0m7>e3m4 moves each exotic 8-bit format
//     towards the balanced middle: E7M0 trades exponent bits for mantissa bits
//     (precision; it stalls because its grid has powers of two only), while
//     E1M6 and E0M7 trade mantissa bits for exponent bits (range; they
//     overflow and go non-finite). Format names are compared case-insensitively.
//   - Saved state (checkpoints): the (tensor, from-format) switches already
//     asked for, so a resumed run does not ask for them again.
//   - chain is parsed at create: comma-separated "from>to" pairs of format
//     plugin names (the SDK's rule, names.hpp; case folded, spaces around
//     names allowed), from != to, each format at most once as a source, no
//     cycles; an empty chain is refused too. Anything else is INVALID_ARGUMENT naming 'chain'.
#include <altgrad/sdk/intervention_plugin.hpp>
#include <altgrad/sdk/names.hpp>

#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

using altgrad::sdk::action_sink;
using altgrad::sdk::is_plugin_name;
using altgrad::sdk::kMaxPluginNameLength;
using altgrad::sdk::kPluginNamePattern;
using altgrad::sdk::param_view;
using altgrad::sdk::plugin_error;

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(" \t");
    return s.substr(b, e - b + 1);
}

[[noreturn]] void bad_chain(const std::string& chain, const std::string& why) {
    throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "parameter 'chain' (\"" +
                                                            action_sink::fit(chain, 120) + "\"): " + why +
                                                            "; expected e.g. \"e7m0>e5m2,e1m6>e3m4\"");
}

std::map<std::string, std::string> parse_chain(const std::string& chain) {
    std::map<std::string, std::string> next;
    if (trim(chain).empty()) bad_chain(chain, "is empty");
    size_t start = 0;
    while (true) {
        const size_t comma = chain.find(',', start);
        const std::string item =
            chain.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const size_t gt = item.find('>');
        if (gt == std::string::npos || item.find('>', gt + 1) != std::string::npos)
            bad_chain(chain, "entry \"" + trim(item) + "\" is not one from>to pair");
        const std::string from = lower(trim(item.substr(0, gt))), to = lower(trim(item.substr(gt + 1)));
        for (const std::string* name : {&from, &to}) {
            if (name->empty()) bad_chain(chain, "entry \"" + trim(item) + "\" has an empty format name");
            if (!is_plugin_name(*name))
                bad_chain(chain, "\"" + *name + "\" is not a plugin name (" + kPluginNamePattern +
                                     ", at most " + std::to_string(kMaxPluginNameLength) + " characters)");
        }
        if (from == to) bad_chain(chain, "entry \"" + trim(item) + "\" switches a format to itself");
        if (!next.emplace(from, to).second) bad_chain(chain, "format \"" + from + "\" has two successors");
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    for (const auto& [from, to] : next) {  // follow each chain: it must end
        std::string at = from;
        for (size_t hops = 0; next.count(at) != 0; ++hops) {
            if (hops > next.size()) bad_chain(chain, "has a cycle through \"" + from + "\"");
            at = next.at(at);
        }
    }
    return next;
}

class mantissa_shift {
public:
    mantissa_shift(int64_t nan_patience, double stall_threshold, std::map<std::string, std::string> next)
        : patience_(nan_patience), stall_threshold_(stall_threshold), next_(std::move(next)) {}

    void observe(const altgrad_observation& o, action_sink& out) {
        const bool nonfinite = static_cast<int64_t>(o.consecutive_nonfinite_steps) >= patience_;
        std::vector<std::pair<std::string, std::string>> asked;  // committed after writing
        for (size_t i = 0; i < o.tensor_count; ++i) {
            const altgrad_tensor_observation& t = altgrad::sdk::observed_tensor(o, i);
            const std::string from = lower(t.format);
            const auto successor = next_.find(from);
            if (successor == next_.end()) continue;
            const bool stalled = t.role == ALTGRAD_TENSOR_WEIGHT && !std::isnan(t.bit_stall_rate) &&
                                 t.bit_stall_rate > stall_threshold_;
            if (!nonfinite && !stalled) continue;
            const std::string name = t.name;
            if (asked_.count({name, from}) != 0) continue;
            std::string why;
            if (nonfinite)
                why = std::to_string(o.consecutive_nonfinite_steps) +
                      " consecutive non-finite steps >= nan_patience " + std::to_string(patience_);
            if (stalled)
                why += std::string(why.empty() ? "" : " and ") + "weight bit-stall rate " +
                       action_sink::number_text("%.4g", t.bit_stall_rate) + " > stall_threshold " +
                       action_sink::number_text("%.4g", stall_threshold_);
            why += ": " + from + " -> " + successor->second + " for '" + action_sink::fit(name, 80) + "'";
            out.switch_format(name, successor->second, action_sink::fit(why));
            asked.emplace_back(name, from);
        }
        asked_.insert(asked.begin(), asked.end());
    }

    // Saved state: the switches already asked for (the chain is a parameter).
    void save_state(altgrad::sdk::state_writer& w) const {
        w.put_u32(1);  // layout version
        w.put_u64(asked_.size());
        for (const auto& [tensor, from] : asked_) {
            w.put_string(tensor);
            w.put_string(from);
        }
    }
    void load_state(altgrad::sdk::state_reader& r) {
        r.expect_layout(1);
        std::set<std::pair<std::string, std::string>> asked;
        for (uint64_t n = r.get_u64("switch count"); n > 0; --n) {
            std::string tensor = r.get_string("tensor name");
            asked.emplace(std::move(tensor), r.get_string("format name"));
        }
        asked_ = std::move(asked);
    }

private:
    int64_t patience_;
    double stall_threshold_;
    std::map<std::string, std::string> next_;
    std::set<std::pair<std::string, std::string>> asked_;  // (tensor, from format) already switched
};

mantissa_shift make(const param_view& p) {
    const int64_t patience = p.get_int("nan_patience");
    const double stall = p.get_float("stall_threshold");
    if (patience < 1)
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "parameter 'nan_patience' must be >= 1");
    if (!(stall >= 0.0 && stall <= 1.0))
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "parameter 'stall_threshold' must be in [0, 1]");
    return mantissa_shift(patience, stall, parse_chain(p.get_string("chain")));
}

const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "chain", ALTGRAD_PARAM_STRING,
     "fallback chain: from>to pairs, comma-separated"},
    {sizeof(altgrad_param_spec), "nan_patience", ALTGRAD_PARAM_INT,
     "consecutive non-finite steps that trigger"},
    {sizeof(altgrad_param_spec), "stall_threshold", ALTGRAD_PARAM_FLOAT,
     "weight bit-stall rate that triggers"},
};

}  // namespace

ALTGRAD_INTERVENTION_PLUGIN_WITH_PARAMS(make, kParams, sizeof kParams / sizeof kParams[0])
