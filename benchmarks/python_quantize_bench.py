#!/usr/bin/python3
"""Quantize throughput from Python against the C++ benchmark, measured in one run.

    PYTHONPATH=build/python /usr/bin/python3 benchmarks/python_quantize_bench.py \
        [--bench build/altgrad_quantize_bench] [--format e4m3] [--mode nearest] [--mib 64] [--repeats 3]

Both sides quantize the same 64 MiB float32 array (the C++ benchmark's own input:
N(0,1) by Box-Muller over SplitMix64 from its seed, scaled so that the largest
magnitude is max_finite / 2) into a separate buffer, single-threaded, scale 1,
saturate, the same rounding seed. The C++ side is `altgrad_quantize_bench
--benchmark_filter=^quantize/FORMAT/MODE/64MiB/` (the plugin called through the C
ABI); the Python side is `Format.quantize(x, out=y)` from NumPy. Throughput counts 8
bytes per element, as the C++ benchmark does. The two are timed alternately,
`--repeats` times each; the ratio is of the medians. Prints one line per side and
the ratio (Python / C++); docs/performance.md quotes it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import altgrad

DATA_SEED = 0x5EEDF00DCAFEF00D      # benchmarks/quantize_bench.cpp: kDataSeed
ROUNDING_SEED = 0x0123456789ABCDEF  # kRoundingSeed
MODES = {"nearest": "nearest_even", "stochastic": "stochastic", "toward-zero": "toward_zero"}
MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(count, seed):
    """The first `count` outputs of SplitMix64 from `seed` (vectorised; uint64 wraps like C)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def bench_input(count):
    """The C++ benchmark's N(0,1) array (fill_normal): pairs by Box-Muller in double, rounded to float."""
    draws = splitmix64(2 * ((count + 1) // 2), DATA_SEED)
    u1 = ((draws[0::2] >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0 ** -53
    u2 = (draws[1::2] >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    r = np.sqrt(-2.0 * np.log(u1))
    out = np.empty(2 * len(u1), dtype=np.float32)
    out[0::2] = r * np.cos(2 * np.pi * u2)
    out[1::2] = r * np.sin(2 * np.pi * u2)
    return out[:count]


def cpp_throughput(bench, fmt, mode, mib):
    name = f"quantize/{fmt}/{MODES[mode]}/{mib}MiB"
    p = subprocess.run([bench, f"--benchmark_filter=^{name}/", "--benchmark_format=json"], capture_output=True,
                       text=True, check=True)
    results = [b for b in json.loads(p.stdout)["benchmarks"] if b["name"].startswith(name + "/")]
    if not results:
        sys.exit(f"python_quantize_bench: {bench} ran no benchmark named {name} (sizes: 4KiB .. 64MiB)")
    if results[0].get("error_occurred"):
        sys.exit(f"python_quantize_bench: {name}: {results[0].get('error_message')}")
    return results[0]["bytes_per_second"]


def python_throughput(f, x, y, mode, min_seconds=1.0):
    """Bytes per second of f.quantize(x, out=y), as Google Benchmark times it: calls for at least min_seconds."""
    f.quantize(x, out=y, rounding=mode, seed=ROUNDING_SEED)  # warm: pages touched, code loaded
    calls, start = 0, time.perf_counter()
    while True:
        f.quantize(x, out=y, rounding=mode, seed=ROUNDING_SEED)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return 8 * x.size * calls / elapsed


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", default=os.path.join(root, "build", "altgrad_quantize_bench"))
    parser.add_argument("--format", default="e4m3")
    parser.add_argument("--mode", default="nearest", choices=sorted(MODES))
    parser.add_argument("--mib", type=int, default=64, choices=[16, 64])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    f = altgrad.Registry().format(args.format)
    normal = bench_input(args.mib * 2 ** 20 // 4)
    amax = np.abs(normal).max()
    factor = np.float32(f.info["max_finite"] / 2.0 / float(amax))
    x = normal * factor
    y = np.empty_like(x)
    cpp, py = [], []
    for _ in range(args.repeats):
        cpp.append(cpp_throughput(args.bench, args.format, args.mode, args.mib))
        py.append(python_throughput(f, x, y, args.mode))
    c, p = statistics.median(cpp), statistics.median(py)
    print(f"C++    quantize/{args.format}/{MODES[args.mode]}/{args.mib}MiB: {c / 1e9:.3f} GB/s "
          f"(runs: {', '.join(f'{v / 1e9:.3f}' for v in cpp)})")
    print(f"Python Format.quantize {args.format} {args.mode} {args.mib} MiB: {p / 1e9:.3f} GB/s "
          f"(runs: {', '.join(f'{v / 1e9:.3f}' for v in py)})")
    print(f"ratio Python / C++: {p / c:.3f}")


if __name__ == "__main__":
    main()
