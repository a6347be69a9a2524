#!/usr/bin/env python3
"""Tests of benchmarks/ratios.py: its verdicts on a hand-made benchmark file
(expected ratios worked out by hand below), and, given the benchmark program,
that a short real run of every family parses into rows for every format.

    ALTGRAD_QUANTIZE_BENCH=build/altgrad_quantize_bench python3 benchmarks/ratios_test.py
    python3 benchmarks/ratios_test.py Verdicts     # the hand-made file only
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RATIOS = os.path.join(HERE, "ratios.py")
BENCH = os.environ.get("ALTGRAD_QUANTIZE_BENCH")  # the benchmark program, for RealRun


def median(name, gbs):
    """A median aggregate as Google Benchmark writes it: gbs in 10^9 bytes/s, 8 bytes per element."""
    return {"name": name + "_median", "run_name": name, "run_type": "aggregate", "aggregate_name": "median",
            "bytes_per_second": gbs * 1e9, "items_per_second": gbs * 1e9 / 8}


def run_ratios(benchmarks, *extra, check=True):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"context": {}, "benchmarks": benchmarks}, f)
        path = f.name
    try:
        p = subprocess.run([sys.executable, RATIOS, *(["--check"] if check else []), *extra, path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    return p.returncode, p.stdout, p.stderr


def row(stdout, fmt, mode):
    for line in stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == fmt and fields[1] == mode:
            return line
    raise AssertionError(f"no row {fmt} {mode} in:\n{stdout}")


class Verdicts(unittest.TestCase):
    # 64 MiB, copy 10 GB/s. Per tensor e5m2 nearest-even 8 GB/s: 0.8 x copy (target 0.6, met).
    base = [median("copy/memcpy/64MiB/real_time", 10.0),
            median("quantize/e5m2/nearest_even/64MiB/real_time", 8.0)]

    def test_block_call_is_judged_against_the_call_that_also_scales(self):
        # block32 6.0 against scaled 7.0: 6/7 = 0.857, met; against the scale-1 call 6/8 = 0.75, shown only.
        code, out, err = run_ratios(self.base + [
            median("quantize_scaled/e5m2/nearest_even/64MiB/real_time", 7.0),
            median("quantize_block32/e5m2/nearest_even/64MiB/real_time", 6.0)])
        self.assertEqual(code, 0, out + err)
        line = row(out, "e5m2/block32", "nearest_even")
        self.assertIn("(0.857)", line)
        self.assertIn("x scale-1 call 0.75", line)
        self.assertTrue(line.rstrip().endswith("met"), line)
        self.assertNotIn("met", row(out, "e5m2/scaled", "nearest_even"))  # a counterpart: no verdict of its own

    def test_block_call_below_the_line_is_missed(self):
        # block32 5.5 against scaled 7.0: 0.786 < 0.8.
        code, out, err = run_ratios(self.base + [
            median("quantize_scaled/e5m2/nearest_even/64MiB/real_time", 7.0),
            median("quantize_block32/e5m2/nearest_even/64MiB/real_time", 5.5)])
        self.assertEqual(code, 1)
        self.assertIn("(0.786)", row(out, "e5m2/block32", "nearest_even"))
        self.assertIn("targets missed: e5m2/block32/nearest_even", err)

    def test_files_without_scaled_rows_judge_against_the_scale_1_call(self):
        # Older files: block32 6.0 against quantize 8.0 = 0.75, missed.
        code, out, err = run_ratios(self.base + [median("quantize_block32/e5m2/nearest_even/64MiB/real_time", 6.0)])
        self.assertEqual(code, 1)
        line = row(out, "e5m2/block32", "nearest_even")
        self.assertIn("(0.75)", line)
        self.assertNotIn("scale-1 call", line)

    def test_whole_block_scaled_quantize_against_the_per_tensor_one_with_its_amax(self):
        # mx32 3.3 against amax 4.0: 0.825, met; against delayed 4.4: 0.75, shown only.
        code, out, err = run_ratios(self.base + [
            median("quantize_amax/e5m2/nearest_even/64MiB/real_time", 4.0),
            median("quantize_delayed/e5m2/nearest_even/64MiB/real_time", 4.4),
            median("quantize_mx32/e5m2/nearest_even/64MiB/real_time", 3.3)])
        self.assertEqual(code, 0, out + err)
        line = row(out, "e5m2/mx32", "nearest_even")
        self.assertIn("(0.825)", line)
        self.assertIn("x delayed 0.75", line)

    def test_block_ratios_below_64_mib_are_shown_not_judged(self):
        # 256 KiB: block32 6.0 against scaled 8.0 = 0.75, shown without a verdict; nearest-even
        # 12.5 GB/s = 1.5625 G elements/s, under the in-cache 3 G: missed.
        code, out, err = run_ratios([median("copy/memcpy/256KiB/real_time", 50.0),
                                     median("quantize/e5m2/nearest_even/256KiB/real_time", 12.5),
                                     median("quantize_scaled/e5m2/nearest_even/256KiB/real_time", 8.0),
                                     median("quantize_block32/e5m2/nearest_even/256KiB/real_time", 6.0)])
        self.assertEqual(code, 1)
        self.assertIn("x tensor 0.75", row(out, "e5m2/block32", "nearest_even"))
        self.assertNotIn("block32", err)
        self.assertIn("targets missed: e5m2/nearest_even", err)

    def test_per_tensor_ratio_to_copy(self):
        # Toward-zero 6.5 GB/s: 0.65 x copy < 0.70.
        code, out, err = run_ratios(self.base + [median("quantize/e5m2/toward_zero/64MiB/real_time", 6.5)])
        self.assertEqual(code, 1)
        self.assertIn("0.650", row(out, "e5m2", "toward_zero"))
        self.assertIn("e5m2/toward_zero", err)


class RealRun(unittest.TestCase):
    def test_every_benchmark_of_a_short_run_has_its_row(self):
        self.assertIsNotNone(BENCH, "set ALTGRAD_QUANTIZE_BENCH to the benchmark program")
        with tempfile.TemporaryDirectory() as tmp:
            out_json = os.path.join(tmp, "run.json")
            subprocess.run([BENCH, "--benchmark_filter=^(copy/memcpy|quantize[a-z0-9_]*)/(.*/)?4KiB/",
                            "--benchmark_min_time=0.001", f"--benchmark_out={out_json}",
                            "--benchmark_out_format=json"], check=True, capture_output=True)
            with open(out_json, encoding="utf-8") as f:
                doc = json.load(f)
        runs = [b for b in doc["benchmarks"] if b["name"].startswith("quantize")]
        errors = [b["name"] + ": " + b.get("error_message", "") for b in runs if b.get("error_occurred")]
        self.assertEqual(errors, [])  # quantize_scaled refuses inputs that do not halve exactly
        families = {b["name"].split("/")[0] for b in runs}
        self.assertEqual(families, {"quantize", "quantize_scaled", "quantize_block32", "quantize_amax",
                                    "quantize_delayed", "quantize_mx32"})
        code, out, err = run_ratios(doc["benchmarks"], "--size", "4KiB", check=False)
        self.assertEqual(code, 0, out + err)
        suffix = {"quantize": "", "quantize_scaled": "/scaled", "quantize_block32": "/block32",
                  "quantize_amax": "/amax", "quantize_delayed": "/delayed", "quantize_mx32": "/mx32"}
        for b in runs:
            family, fmt, mode = b["name"].split("/")[:3]
            row(out, fmt + suffix[family], mode)

    def test_the_block_scale_and_hadamard_benchmarks_run(self):
        # Outside ratios.py's table: each case of block_scales/ and fwht/ runs and processes items.
        self.assertIsNotNone(BENCH, "set ALTGRAD_QUANTIZE_BENCH to the benchmark program")
        with tempfile.TemporaryDirectory() as tmp:
            out_json = os.path.join(tmp, "run.json")
            subprocess.run([BENCH, "--benchmark_filter=^(block_scales|fwht)/.*/4KiB", "--benchmark_min_time=0.001",
                            f"--benchmark_out={out_json}", "--benchmark_out_format=json"], check=True,
                           capture_output=True)
            with open(out_json, encoding="utf-8") as f:
                runs = json.load(f)["benchmarks"]
        self.assertEqual(sorted(b["name"].rsplit("/", 2)[0] for b in runs),
                         ["block_scales/mx_floor/pow2", "block_scales/round_up/e4m3", "block_scales/two_level/e4m3",
                          "fwht/16/scalar", "fwht/16/vector", "fwht/64/scalar", "fwht/64/vector"])
        for b in runs:
            self.assertFalse(b.get("error_occurred"), b["name"])
            self.assertGreater(b["items_per_second"], 0, b["name"])


if __name__ == "__main__":
    unittest.main()
