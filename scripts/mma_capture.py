#!/usr/bin/env python3
"""Capture what a GPU's own low-precision matrix products compute, for docs/accumulation.md.

Run ON A GPU MACHINE (Hopper or later, PyTorch with CUDA): `python3 scripts/mma_capture.py OUT_DIR`.
For each case it draws float8 E4M3 operands A [M, K] and B [N, K], multiplies them with
torch._scaled_mm (cuBLASLt's FP8 GEMM: unit scales, float32 output), with and without
use_fast_accum, and, where this PyTorch has it, BF16 operands with float32 output
(torch.mm(..., out_dtype=torch.float32)). It writes OUT_DIR/mma_<case>.npz holding the operands'
codes (uint8 for E4M3, uint16 for BF16), the float32 outputs' bits and the case's description, and
OUT_DIR/mma_device.json naming the card and the software. Nothing is compared here: the CPU side
(tests/data/mma/make_subset.py, tests/quant/instruction_product_test.cpp) runs the accumulator
plugins on the same operands.

The operand distributions:
  normal   N(0, 1) rounded to E4M3 (what a scaled tensor looks like)
  spread   N(0, 1) times 2^u, u uniform on [-12, 8]: wide exponent spreads, subnormals, cancellation
  codes    every finite E4M3 code equally likely (zeros of both signs and subnormals included)
"""
import json
import os
import sys

import numpy as np
import torch

# The products are computed at M = N = 2048 (enough output tiles that cuBLAS has no reason to split
# K across blocks) and the top-left SAVE x SAVE outputs are kept, with the operands' rows they need.
M = N = 2048
SAVE = 256
CASES = [  # (K, distribution)
    (32, "normal"), (32, "spread"), (32, "codes"),
    (64, "normal"), (128, "normal"), (128, "spread"), (512, "normal"), (4096, "normal"),
]


def e4m3_operand(gen, rows, k, distribution):
    if distribution == "codes":
        codes = torch.randint(0, 256, (rows, k), generator=gen, dtype=torch.int64).to(torch.uint8)
        nan = (codes & 0x7F) == 0x7F  # S.1111.111 is NaN in E4M3FN: redraw those as zeros of that sign
        codes = torch.where(nan, codes & 0x80, codes)
        return codes.view(torch.float8_e4m3fn)
    x = torch.randn((rows, k), generator=gen, dtype=torch.float32)
    if distribution == "spread":
        x = x * torch.exp2(torch.randint(-12, 9, (rows, k), generator=gen).to(torch.float32))
    return x.clamp(-448, 448).to(torch.float8_e4m3fn)


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    info = {"device": props.name, "capability": list(torch.cuda.get_device_capability(dev)),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cublas": torch._C._cuda_getCompiledVersion() if hasattr(torch._C, "_cuda_getCompiledVersion") else None,
            "M": M, "N": N, "saved": SAVE, "cases": []}
    one = torch.ones((), device=dev, dtype=torch.float32)
    for k, distribution in CASES:
        gen = torch.Generator().manual_seed(1000 * k + len(distribution))
        a = e4m3_operand(gen, M, k, distribution)
        b = e4m3_operand(gen, N, k, distribution)
        ad, bd = a.to(dev), b.to(dev)
        outputs = {}
        for fast in (False, True):
            y = torch._scaled_mm(ad, bd.t(), scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast)
            outputs["fast" if fast else "default"] = y[:SAVE, :SAVE].cpu().numpy().view(np.uint32)
        name = f"e4m3_k{k}_{distribution}"
        np.savez_compressed(os.path.join(out_dir, f"mma_{name}.npz"), a=a[:SAVE].view(torch.uint8).numpy(),
                            b=b[:SAVE].view(torch.uint8).numpy(), **outputs)
        info["cases"].append({"name": name, "operands": "e4m3", "K": k, "distribution": distribution,
                              "outputs": {"default": "torch._scaled_mm(use_fast_accum=False)",
                                          "fast": "torch._scaled_mm(use_fast_accum=True)"}})
        print(name, "done", flush=True)
    # BF16 x BF16 -> float32 (the wgmma F16/BF16 path), where torch.mm takes out_dtype.
    for k in (16, 256):
        gen = torch.Generator().manual_seed(77 + k)
        a = (torch.randn((M, k), generator=gen) * torch.exp2(torch.randint(-8, 9, (M, k), generator=gen).float())).bfloat16()
        b = torch.randn((N, k), generator=gen).bfloat16()
        try:
            y = torch.mm(a.to(dev), b.to(dev).t(), out_dtype=torch.float32)
        except (TypeError, RuntimeError) as e:
            info["bf16"] = f"not captured: {e}"
            break
        name = f"bf16_k{k}_spread"
        np.savez_compressed(os.path.join(out_dir, f"mma_{name}.npz"), a=a[:SAVE].view(torch.uint16).numpy(),
                            b=b[:SAVE].view(torch.uint16).numpy(),
                            default=y[:SAVE, :SAVE].cpu().numpy().view(np.uint32))
        info["cases"].append({"name": name, "operands": "bf16", "K": k, "distribution": "spread",
                              "outputs": {"default": "torch.mm(out_dtype=torch.float32)"}})
        print(name, "done", flush=True)
    with open(os.path.join(out_dir, "mma_device.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps({k: v for k, v in info.items() if k != "cases"}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "mma-out")
