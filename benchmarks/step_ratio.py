#!/usr/bin/env python3
"""Reads altgrad_train_step_bench's --benchmark_format=json output on stdin and
prints the quantized / float32 step-time ratio (medians when repetitions were
run, else the single results)."""
import json
import sys

runs = json.load(sys.stdin)["benchmarks"]
def pick(q):
    name = f"BM_train_step/quantized:{q}/real_time"
    rows = [r for r in runs if r["run_name"] == name]
    if not rows:
        return None, None
    med = [r for r in rows if r.get("aggregate_name") == "median"]
    row = (med or rows)[0]
    return row["real_time"], row.get("time_unit", "ms")

fp32, unit = pick(0)
print(f"float32 step {fp32:.2f} {unit}")
met = True
e5m2, _ = pick(1)
if e5m2 is not None:  # each step that was run (--benchmark_filter may leave some out)
    print(f"e5m2 step {e5m2:.2f} {unit}, ratio {e5m2 / fp32:.3f} (target <= 1.10, issue #16)")
    met = e5m2 / fp32 <= 1.10
accumulated, _ = pick(2)
if accumulated is not None:
    print(f"e5m2 + e8m13 accumulator step {accumulated:.2f} {unit}, ratio {accumulated / fp32:.3f} "
          "(target <= 4, issue #31)")
    met = met and accumulated / fp32 <= 4
for q, name, target in ((3, "te_mxfp8 recipe", 1.3), (4, "nvfp4 recipe", 2.0)):
    t, _ = pick(q)
    if t is not None:
        print(f"{name} step {t:.2f} {unit}, ratio {t / fp32:.3f} (target <= {target}, issue #30)")
        met = met and t / fp32 <= target
instruction, _ = pick(5)
if instruction is not None:
    print(f"e4m3 + sm90_wgmma_fp8 step {instruction:.2f} {unit}, ratio {instruction / fp32:.3f} "
          "(target <= 3, issue #46)")
    met = met and instruction / fp32 <= 3
sys.exit(0 if met else 1)
