// QLoRA's NormalFloat4 (Dettmers et al. 2023, appendix E): 16 quantiles of N(0, 1) scaled to
// [-1, 1], one zero. codebook_format does the rest: rounding, saturation (no Inf or NaN), counts.
// QLoRA absmax-scales blocks into [-1, 1] first; here the host's scaling does that.
#include <altgrad/sdk/codebook.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {
altgrad::sdk::codebook_format make_nf4(const altgrad::sdk::param_view&) {
    // 4 bits; values_by_code[c] is code c's value.
    return altgrad::sdk::codebook_format(
        4, {-1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
            -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
            0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
            0.7229568362236023f, 1.0f});
}
}  // namespace

ALTGRAD_FORMAT_PLUGIN(make_nf4)  // name, version and description: manifest.toml
