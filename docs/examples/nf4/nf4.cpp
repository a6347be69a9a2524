// nf4: QLoRA's 4-bit NormalFloat (Dettmers et al., "QLoRA: Efficient
// Finetuning of Quantized LLMs", 2023, appendix E; the table bitsandbytes
// dequantizes with) as an AltGrad codebook format.
//
// NF4 is not an ExMy format: its 16 values are quantiles of N(0, 1), scaled
// so that the extremes are -1 and 1, with an exact zero. A codebook format
// lists the value of every code; the SDK's codebook_format does the rest
// (nearest-even, toward-zero and stochastic rounding, saturation, counting).
//
// Behaviour, as codebook_format defines it:
//  - nearest: the nearer table value; inputs beyond [-1, 1] overflow and
//    saturate to -1 or 1 under both overflow modes (NF4 has no Inf and no NaN);
//  - one zero (code 7): negative inputs that round to zero give +0;
//  - NaN stays NaN in quantize; encoding NaN fails (no NaN code).
// In QLoRA the blocks are absmax-scaled into [-1, 1] first; here that is the
// host's per-tensor scale.
#include <altgrad/sdk/codebook.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {

altgrad::sdk::codebook_format make_nf4(const altgrad::sdk::param_view&) {
    // values_by_code[c] is the value of code c.
    return altgrad::sdk::codebook_format(4, {
        -1.0f,                  // 0x0
        -0.6961928009986877f,   // 0x1
        -0.5250730514526367f,   // 0x2
        -0.39491748809814453f,  // 0x3
        -0.28444138169288635f,  // 0x4
        -0.18477343022823334f,  // 0x5
        -0.09105003625154495f,  // 0x6
        0.0f,                   // 0x7
        0.07958029955625534f,   // 0x8
        0.16093020141124725f,   // 0x9
        0.24611230194568634f,   // 0xA
        0.33791524171829224f,   // 0xB
        0.44070982933044434f,   // 0xC
        0.5626170039176941f,    // 0xD
        0.7229568362236023f,    // 0xE
        1.0f,                   // 0xF
    });
}

}  // namespace

// Name, version (must equal the manifest's), description, factory.
ALTGRAD_FORMAT_PLUGIN("nf4", 1, 0, 0,
                      "QLoRA NormalFloat4: 16 values in [-1, 1], codes 0..15 ascending, one zero, no Inf or NaN",
                      make_nf4)
