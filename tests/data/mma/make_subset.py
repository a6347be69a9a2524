#!/usr/bin/env python3
"""Write the H200 capture of matrix products (NumPy .npz, one per case) as the binary files
tests/quant/instruction_product_test.cpp reads: the first ROWS rows of each operand and the
ROWS x ROWS outputs they give. tests/data/mma/README.md describes the layout.

Usage: make_subset.py CAPTURE_DIR OUT_DIR [--rows ROWS]   (ROWS 32 for the committed subset,
256 for the whole capture)
"""
import argparse
import json
import pathlib
import struct

import numpy as np

MAGIC = b"AGMMA001"
OPERANDS = {"e4m3": (1, np.uint8), "bf16": (2, np.uint16)}
VARIANTS = ("default", "fast")


def write_case(npz, case, rows, out):
    kind, dtype = OPERANDS[case["operands"]]
    a, b = npz["a"][:rows].astype(dtype), npz["b"][:rows].astype(dtype)
    variants = [v for v in VARIANTS if v in npz.files]
    k = a.shape[1]
    with open(out, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<5I", kind, rows, rows, k, len(variants)))
        f.write(a.astype(a.dtype.newbyteorder("<")).tobytes())
        f.write(b.astype(b.dtype.newbyteorder("<")).tobytes())
        for v in variants:
            f.write(npz[v][:rows, :rows].astype("<u4").tobytes())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("capture_dir")
    p.add_argument("out_dir")
    p.add_argument("--rows", type=int, default=32)
    args = p.parse_args()
    src, dst = pathlib.Path(args.capture_dir), pathlib.Path(args.out_dir)
    dst.mkdir(parents=True, exist_ok=True)
    device = json.loads((src / "mma_device.json").read_text())
    for case in device["cases"]:
        with np.load(src / f"mma_{case['name']}.npz") as npz:
            write_case(npz, case, args.rows, dst / f"{case['name']}.bin")
        print(case["name"])


if __name__ == "__main__":
    main()
