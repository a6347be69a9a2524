#!/usr/bin/python3
"""The tables of docs/study.md, computed from the published runs (docs/results/*/runs.csv), so that
no number in them is typed by hand.

usage: study_tables.py [--check | --write | --print NAME] [--results DIR] [PAGE...]
  each PAGE (default docs/study.md and docs/performance.md) holds its tables between the two lines
      <!-- table NAME: scripts/study_tables.py writes it from the runs; edit the script, not the table -->
      <!-- end table -->
  --check       (the default) exit 1 naming each table that differs from what the runs give, with
                its first differing line
  --write       rewrite those tables in their pages
  --print NAME  print one table
  --results DIR the published studies (default: results/ beside the first PAGE, docs/results)

Every statistic is computed here from runs.csv, independently of `altgrad-host report` (which writes
the same ones to summary.csv; tests/docs/study_tables_test.py checks that the two agree). A group is
runs.csv's `group` column: runs equal but for the seed. A comparison with a baseline is paired by seed
over the seeds both have finished, as in docs/study.md's "How to read the numbers": the mean of the
run-by-run differences, its Student t 95% interval and two-sided p; "relative" is that difference in
% of the baseline's mean over all its finished runs (what summary.csv's relative_error_percent is).
A difference is bold when its interval excludes 0.
"""
import argparse
import csv
import functools
import lzma
import math
import os
import statistics
import sys
import tomllib

# --- Student's t, from the regularized incomplete beta function -----------------------------------


def _beta_continued_fraction(a, b, x):
    """The continued fraction of I_x(a, b) (modified Lentz), converging for x < (a + 1) / (a + b + 2)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def regularized_beta(a, b, x):
    """I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1 - math.exp(log_front) * _beta_continued_fraction(b, a, 1 - x) / b


def t_two_sided_p(t, df):
    """P(|T| >= |t|) for Student's T with df degrees of freedom."""
    return regularized_beta(df / 2, 0.5, df / (df + t * t))


def t_quantile_975(df):
    """The t with P(T <= t) = 0.975: half-width factor of a 95% interval (bisection on the p)."""
    low, high = 0.0, 1e3
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if t_two_sided_p(mid, df) > 0.05 else (low, mid)
    return (low + high) / 2


class Sample:
    """n values: their mean, sample sd and the Student t 95% interval of the mean."""

    def __init__(self, values):
        self.values = list(values)
        self.n = len(self.values)
        self.mean = sum(self.values) / self.n if self.n else math.nan
        if self.n >= 2:
            self.sd = math.sqrt(sum((v - self.mean) ** 2 for v in self.values) / (self.n - 1))
            half = t_quantile_975(self.n - 1) * self.sd / math.sqrt(self.n)
            self.low, self.high = self.mean - half, self.mean + half
        else:
            self.sd = self.low = self.high = math.nan

    def p_of_zero_mean(self):
        """Two-sided one-sample t-test of mean 0 (the paired test when the values are differences)."""
        if self.n < 2:
            return math.nan
        if self.sd == 0:
            return 0.0 if self.mean != 0 else 1.0
        return t_two_sided_p(self.mean / (self.sd / math.sqrt(self.n)), self.n - 1)


def welch_p(a, b):
    """Welch's two-sided t-test of equal means (samples of two or more)."""
    va, vb = a.sd ** 2 / a.n, b.sd ** 2 / b.n
    if va + vb == 0:
        return 0.0 if a.mean != b.mean else 1.0
    df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1))
    return t_two_sided_p((a.mean - b.mean) / math.sqrt(va + vb), df)


# --- the published runs -----------------------------------------------------------------------------


class Group:
    """The runs of one runs.csv group: final validation loss by seed of the finished ones, and the
    failures (failure_mode, failure_step) of those that collapsed."""

    def __init__(self, name, rows):
        self.name = name
        self.loss_by_seed = {int(r["seed"]): float(r["final_val_loss"]) for r in rows
                             if r["status"] == "finished" and r["final_val_loss"] not in ("", "nan")}
        self.failures = [(r["failure_mode"], int(r["failure_step"])) for r in rows
                         if r["status"] == "collapsed"]
        self.decided = len(self.loss_by_seed) + len(self.failures)
        # Wall-clock and CPU seconds of the runs that finished or collapsed (summary.json's, across resumes).
        self.seconds = [float(r["seconds"]) for r in rows if r["status"] in ("finished", "collapsed") and r["seconds"]]
        self.cpu_seconds = [float(r["cpu_seconds"]) for r in rows
                            if r["status"] in ("finished", "collapsed") and r.get("cpu_seconds")]
        self.loss = Sample(self.loss_by_seed.values())

    def paired_with(self, baseline):
        """This group's loss minus the baseline's, seed by seed over the seeds both finished."""
        return Sample(self.loss_by_seed[s] - baseline.loss_by_seed[s]
                      for s in sorted(self.loss_by_seed) if s in baseline.loss_by_seed)


class Study:
    """One published study: DIR/STUDY/runs.csv read into groups."""

    def __init__(self, results, study):
        self.path = os.path.join(results, study, "runs.csv")
        if not os.path.exists(self.path):
            raise SystemExit(f"study_tables.py: {self.path}: not found (is --results the published studies?)")
        with open(self.path, newline="", encoding="utf-8") as f:
            self.rows = list(csv.DictReader(f))
        by_group = {}
        for row in self.rows:
            by_group.setdefault(row["group"], []).append(row)
        self.order = list(by_group)  # as the report lists the runs
        self.groups = {name: Group(name, rows) for name, rows in by_group.items()}
        self.results, self.study = results, study
        self._val = None

    def val_by_seed(self, name, step):
        """A group's validation loss at `step` (an evaluation step) by seed, over its finished runs:
        from the report's steps.csv.xz."""
        if self._val is None:
            self._val = {}
            seed_of = {r["run"]: (r["group"], int(r["seed"])) for r in self.rows if r["status"] == "finished"}
            with lzma.open(os.path.join(self.results, self.study, "steps.csv.xz"), "rt", encoding="utf-8") as f:
                for row in csv.DictReader(f):
                    if row["run"] in seed_of and row["val_loss"]:
                        group, seed = seed_of[row["run"]]
                        self._val.setdefault((group, int(row["step"])), {})[seed] = float(row["val_loss"])
        return self._val.get((self[name].name, step), {})

    def config_of(self, name):
        """The resolved config.toml of one of a group's runs (runs.csv's `run`, a path from the repository
        root, as scripts/experiments.sh gives the runs to the report)."""
        run = next(row["run"] for row in self.rows if row["group"] == name)
        root = os.path.join(self.results, "..", "..")
        with open(os.path.join(root, run, "config.toml"), "rb") as f:
            return tomllib.load(f)

    def __getitem__(self, name):
        if name not in self.groups:
            raise SystemExit(f"study_tables.py: {self.path}: no group '{name}' "
                             f"(groups: {', '.join(sorted(self.groups))})")
        return self.groups[name]


@functools.lru_cache(maxsize=None)
def load_study(results, study):
    """Study(results, study), read once however many tables it serves."""
    return Study(results, study)


# --- how numbers are written ---------------------------------------------------------------------------


def signed(x, digits=3):
    """+0.003, −0.030 (a true minus sign), +0.000."""
    text = f"{abs(x):.{digits}f}"
    return ("−" if x < 0 and float(text) != 0 else "+") + text


def general(x):
    """Three significant digits, a true minus sign: 0.413, 6.8e+04, −1.26e+07."""
    return f"{x:.3g}".replace("-", "−").replace("e−", "e-")


def p_text(p):
    """0.06, 0.005, 6e-4: two decimals, three below 0.01, one significant digit below 0.001."""
    if p >= 0.01:
        return f"{p:.2f}"
    if p >= 0.001:
        return f"{p:.3f}"
    mantissa, exponent = f"{p:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def excludes_zero(d):
    return d.low > 0 or d.high < 0


def difference_cell(group, baseline, interval=False):
    """"+0.011 (p 3e-5)", bold where the paired interval excludes 0; with interval=True
    "+0.011 (+0.010 – +0.013)". Failures instead where the group has any."""
    if group.failures:
        return failures_cell(group)
    d = group.paired_with(baseline)
    if d.n < 2:
        raise SystemExit(f"study_tables.py: {group.name}: fewer than 2 seeds shared with {baseline.name}")
    text = signed(d.mean)
    if excludes_zero(d):
        text = f"**{text}**"
    if interval:
        return f"{text} ({signed(d.low)} – {signed(d.high)})"
    return f"{text} (p {p_text(d.p_of_zero_mean())})"


def relative_text(d, reference_mean):
    """"+1.23% (+0.50% – +1.96%)": paired differences d in % of the reference's mean, with their 95%
    interval; bold where the interval excludes 0."""
    scale = 100 / reference_mean
    text = f"{signed(d.mean * scale, 2)}%"
    if excludes_zero(d):
        text = f"**{text}**"
    return f"{text} ({signed(d.low * scale, 2)}% – {signed(d.high * scale, 2)}%)"


def relative_cell(group, baseline):
    """The paired difference in % of the baseline's mean, with its 95% interval; failures instead where
    the group has any."""
    if group.failures:
        return failures_cell(group)
    return relative_text(group.paired_with(baseline), baseline.loss.mean)


def failures_cell(group):
    """"3/3 bit_stall (steps 250–300)", "2/3 overflow (step 1)": the failures of those decided."""
    modes = sorted({mode for mode, _ in group.failures})
    steps = sorted(step for _, step in group.failures)
    where = f"step {steps[0]}" if steps[0] == steps[-1] else f"steps {steps[0]}–{steps[-1]}"
    return f"{len(group.failures)}/{group.decided} {', '.join(modes)} ({where})"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# --- the tables -----------------------------------------------------------------------------------------------

SEED_FORMATS = [("E5M2", "e5m2_short"), ("E4M3", "e4m3_uniform"), ("E3M4", "e3m4_uniform"),
                ("E1M6", "e1m6_uniform"), ("E0M7", "e0m7_uniform"), ("E7M0", "e7m0_uniform")]


def seeds_table(results):
    """Study 1: each seed format under the four conditions, against BF16 under the same one."""
    study = load_study(results, "seeds")
    conditions = [("delayed", "true", "delayed scaling, master weights"),
                  ("none", "true", "no scaling, master weights"),
                  ("delayed", "false", "delayed scaling, no master weights"),
                  ("none", "false", "no scaling, no master weights")]

    def group(config, scaling, shadow):
        return study[f"{config} [scaling={scaling}, shadow_weights={shadow}]"]

    rows = [["BF16 (final val loss)"] + [f"{group('bf16_baseline', s, w).loss.mean:.3f}" for s, w, _ in conditions]]
    for label, config in SEED_FORMATS:
        rows.append([label] + [difference_cell(group(config, s, w), group("bf16_baseline", s, w))
                               for s, w, _ in conditions])
    return table(["format"] + [c for _, _, c in conditions], rows)


def separating_table(results):
    """Study 2: the seed formats at the separating workload against BF16."""
    study = load_study(results, "separating")
    bf16 = study["bf16_baseline"]
    rows = [["BF16", str(bf16.loss.n), f"{bf16.loss.mean:.3f} ({bf16.loss.low:.3f} – {bf16.loss.high:.3f})",
             "baseline", "", ""]]
    for label, config in sorted(SEED_FORMATS):
        g = study[config]
        d = g.paired_with(bf16)
        rows.append([label, str(g.loss.n), f"{g.loss.mean:.3f}", difference_cell(g, bf16, interval=True),
                     p_text(d.p_of_zero_mean()), p_text(welch_p(g.loss, bf16.loss))])
    return table(["format", "seeds", "mean final val loss (95% interval)",
                  "paired difference from BF16 (95% interval)", "p (paired)", "p (Welch)"], rows)


# Study 3's rows: the config, its elements, their max M and 2^(emax+1)/M (format facts, docs/formats.md),
# and its groups under the two scale rules (None: not run under that rule).
BLOCK_ROWS = [
    ("`e1m6_mx`", "E1M6", "1.96875", "1.016", "e1m6_mx", None),
    ("`e0m7_mx`", "E0M7", "0.9921875", "1.008", "e0m7_mx", None),
    ("`e3m4_mx`", "E3M4", "15.5", "1.032", "e3m4_mx", None),
    ("`mxfp6_e2m3`", "E2M3", "7.5", "1.067", "mxfp6_e2m3", None),
    ("`mxfp8_e4m3`", "E4M3", "448", "1.143", "mxfp8_e4m3 [scale_rule=mx_floor]", "mxfp8_e4m3 [scale_rule=round_up]"),
    ("`mxfp8_e5m2`", "E5M2", "57344", "1.143", "mxfp8_e5m2 [scale_rule=mx_floor]", "mxfp8_e5m2 [scale_rule=round_up]"),
    ("`mxfp4_e2m1`", "E2M1", "6", "1.333", "mxfp4_e2m1 [scale_rule=mx_floor]", "mxfp4_e2m1 [scale_rule=round_up]"),
    ("`e7m0_mx`", "E7M0", "2^62", "2", "e7m0_mx [scale_rule=mx_floor]", "e7m0_mx [scale_rule=round_up]"),
    ("`nvfp4`", "E2M1", "6", "(two levels, E4M3 scales: no clipping by design)", "nvfp4", None),
]


def blocks_table(results):
    """Study 3: block-scaled configs under OCP MX's floor rule and the round-up rule, against BF16."""
    study = load_study(results, "blocks")
    bf16 = study["bf16_baseline"]
    rows = []
    for config, elements, largest, ratio, floor, round_up in BLOCK_ROWS:
        rows.append([config, elements, largest, ratio, difference_cell(study[floor], bf16),
                     difference_cell(study[round_up], bf16) if round_up else ""])
    return table(["config", "elements", "M", "2^(emax+1) / M: how far the floor rule may put a block's max above M",
                  "floor rule: paired difference from BF16", "round-up rule"], rows)


def comparison_table(results, header, rows, against):
    """A study 4 table under `header`: a row per (label, what, group) of `rows`, as comparison_rows
    writes it."""
    return table(header, comparison_rows(load_study(results, "recipes"), rows, against))


def comparison_rows(study, rows, against):
    """Rows of [label, what, seeds, mean, then for each (baseline group, relative) in `against` the
    paired difference from it (or the relative error with relative=True), blank where the row is that
    baseline]."""
    out = []
    for label, what, name in rows:
        g = study[name]
        row = [label, what, str(g.loss.n) if not g.failures else str(g.decided),
               f"{g.loss.mean:.3f}" if not g.failures else "—"]
        for baseline, relative in against:
            b = study[baseline]
            row.append("" if b is g else relative_cell(g, b) if relative else difference_cell(g, b))
        out.append(row)
    return out


# Study 4's recipes as published: label, what each quantizes, group.
RECIPES = [
    ("BF16", "`separating_bf16`", "separating_bf16"),
    ("TE delayed scaling", "`te_delayed`: per-tensor E4M3 forward, E5M2 gradients, amax history", "te_delayed"),
    ("TE current scaling", "`te_current`: per-tensor E4M3/E5M2, float32 scale from this step's amax", "te_current"),
    ("TE MXFP8", "`te_mxfp8`: E4M3 in 32-blocks, E8M0 scales rounded up", "te_mxfp8"),
    ("DeepSeek-V3", "`deepseek_v3`: E4M3 in 1x128 and 128x128 tiles, E8M13 accumulator promoted every 128",
     "deepseek_v3"),
    ("NVFP4", "`nvfp4`: E2M1 in 16-blocks, two-level scales, RHT, 2D weights, SR gradients, BF16 layers", "nvfp4"),
    ("Tseng et al. MXFP4", "`tseng_mxfp4`: BF16 forward, MXFP4 backward with SR and RHT", "tseng_mxfp4"),
]


def recipes_table(results):
    """Study 4: each recipe as published against BF16 (paired difference and relative error), and the
    4-bit recipes against FP8 as the NVFP4 paper reports them (its FP8 baseline is DeepSeek-V3-style
    blockwise E4M3)."""
    study = load_study(results, "recipes")
    rows = comparison_rows(study, RECIPES, [("separating_bf16", False), ("separating_bf16", True)])
    for row, (_, _, name) in zip(rows, RECIPES):
        four_bit = name in ("nvfp4", "tseng_mxfp4")
        row.append(relative_cell(study[name], study["deepseek_v3"]) if four_bit else "")
    return table(["recipe", "config", "seeds", "mean final val loss", "paired difference from BF16 (p)",
                  "relative error vs BF16 (95% interval)", "relative error vs FP8 (`deepseek_v3`)"], rows)


def fp8_table(results):
    """Study 4: DeepSeek-V3's blockwise FP8 against the per-tensor FP8 recipes and MXFP8, paired by seed
    (no paper compares them in training: a new measurement)."""
    header = ["recipe", "scales", "seeds", "mean final val loss", "paired difference from DeepSeek-V3 (p)",
              "relative to DeepSeek-V3 (95% interval)"]
    return comparison_table(results, header, [
        ("DeepSeek-V3", "`deepseek_v3`: 1x128 and 128x128 tiles, float32 power-of-two scales", "deepseek_v3"),
        ("TE delayed scaling", "`te_delayed`: one scale per tensor, from the amax history", "te_delayed"),
        ("TE current scaling", "`te_current`: one scale per tensor, from this step's amax", "te_current"),
        ("TE MXFP8", "`te_mxfp8`: 32-element blocks, E8M0 scales rounded up", "te_mxfp8"),
    ], [("deepseek_v3", False), ("deepseek_v3", True)])


def nvfp4_ablations_table(results):
    """Study 4: the NVFP4 recipe with each of its parts removed, and with the BF16 final phase: paired
    against the recipe itself and, as the paper reports, against FP8 (deepseek_v3); the paper's finding
    beside each (arXiv 2509.25149)."""
    header = ["NVFP4", "the paper", "seeds", "mean final val loss", "paired difference from NVFP4 (p)",
              "relative error vs BF16", "relative error vs FP8 (`deepseek_v3`)"]
    return comparison_table(results, header, [
        ("NVFP4 as published", "", "nvfp4"),
        ("without RHT", "Wgrad RHT improves loss at 1.2 B (app. E.4.1) and 12 B (Fig. 4)", "nvfp4-no_rht"),
        ("W in 1x16 blocks, not 16x16 tiles", "2D weights improve loss at 1.2 B and 12 B (section 4.3)",
         "nvfp4-no_2d_weights"),
        ("dy rounded to nearest, no SR", "gradient SR is essential at 12 B (section 4.4)", "nvfp4-no_gradient_sr"),
        ("every block in NVFP4 (head BF16)", "diverges at 1.2 B and 12 B (section 4.1, app. E.1)",
         "nvfp4-no_bf16_layers"),
        ("BF16 from 82% of the steps", "matches FP8 when switched at 82% of 12 B's 10 T tokens (app. D)",
         "nvfp4-bf16_final_phase"),
    ], [("nvfp4", False), ("separating_bf16", True), ("deepseek_v3", True)])


def tseng_table(results):
    """Study 4: Tseng et al.'s MXFP4 backward with and without stochastic rounding and the random
    Hadamard transform (a 2 x 2), each against BF16."""
    study = load_study(results, "recipes")
    bf16 = study["separating_bf16"]
    cells = {(True, True): "tseng_mxfp4", (False, True): "tseng_mxfp4-no_sr", (True, False): "tseng_mxfp4-no_rht",
             (False, False): "tseng_mxfp4-no_sr_no_rht"}
    def cell(group):  # a cell with failures also gives its finished runs' relative error, 2 or more
        if group.failures and len(group.loss_by_seed) >= 2:
            return (f"{failures_cell(group)}; the other {len(group.loss_by_seed)}: "
                    f"{relative_text(group.paired_with(bf16), bf16.loss.mean)}")
        return relative_cell(group, bf16)

    rows = []
    for sr in (True, False):
        rows.append(["with SR (and 3/4 pre-scale)" if sr else "without SR (plain OCP MXFP4)"] +
                    [cell(study[cells[(sr, rht)]]) for rht in (True, False)])
    return table(["backward products in MXFP4: relative error vs BF16", "with RHT", "without RHT"], rows)


def accumulation_table(results):
    """Study 4: DeepSeek-V3's E8M13 accumulator promoted every 128, never promoted, and float32 sums."""
    header = ["DeepSeek-V3's accumulation", "the paper", "seeds", "mean final val loss",
              "paired difference from promotion every 128 (p)", "relative error vs BF16"]
    return comparison_table(results, header, [
        ("promoted every N_C = 128 (as published)", "", "deepseek_v3"),
        ("never promoted", "a GEMM with K = 4096 errs by up to 2% (section 3.3.2)", "deepseek_v3-never_promoted"),
        ("float32 sums", "", "deepseek_v3-float32_sums"),
    ], [("deepseek_v3", False), ("separating_bf16", True)])


def wgmma_table(results):
    """Study 4: DeepSeek-V3 on Hopper's FP8 wgmma bit for bit (the recipe since 2026-11-29) against the
    same recipe on the E8M13 model study 4 ran, and against BF16 (the wgmma report)."""
    header = ["DeepSeek-V3's products", "seeds", "mean final val loss",
              "paired difference from the E8M13 model (p)", "relative error vs BF16",
              "NVFP4's relative error vs this FP8"]
    study = load_study(results, "wgmma")
    cells = [("E8M13 model, promoted every 128 (study 4's runs)", "", "deepseek_v3"),
             ("`sm90_wgmma_fp8`, promoted every 128 (as published now)", "", "deepseek_v3-wgmma")]
    rows = comparison_rows(study, cells, [("deepseek_v3", False), ("separating_bf16", True)])
    return table(header, [[row[0]] + row[2:] + [relative_cell(study["nvfp4"], study[name])]
                          for row, (_, _, name) in zip(rows, cells)])


def formats_in_recipes_table(results):
    """Study 4: the seeds' 8-bit formats as the elements of the MXFP8 and DeepSeek-V3 recipes, against
    BF16 and against the recipe's own E4M3."""
    study = load_study(results, "recipes")
    bf16 = study["separating_bf16"]
    rows = []
    for label, point in (("E4M3 (as published)", ""), ("E3M4", "-e3m4"), ("E1M6", "-e1m6"), ("E0M7", "-e0m7")):
        row = [label]
        for recipe in ("te_mxfp8", "deepseek_v3"):
            g = study[recipe + point]
            row += [relative_cell(g, bf16), difference_cell(g, study[recipe]) if point else ""]
        rows.append(row)
    return table(["elements", "MXFP8: relative error vs BF16", "MXFP8: paired difference from E4M3 (p)",
                  "DeepSeek-V3: relative error vs BF16", "DeepSeek-V3: paired difference from E4M3 (p)"], rows)


def nvfp4_elements_table(results):
    """Study 4: 4-bit alternatives to E2M1 in the NVFP4 recipe (16-element blocks, two-level scales)."""
    header = ["elements", "grid", "seeds", "mean final val loss", "paired difference from E2M1 (p)",
              "relative error vs BF16"]
    return comparison_table(results, header, [
        ("E2M1 (as published)", "max 6, 15 values", "nvfp4"),
        ("E1M2", "max 3.5, uniform steps of 0.5", "nvfp4-e1m2"),
        ("E3M0", "max 16, powers of two", "nvfp4-e3m0"),
        ("INT4", "max 7, uniform steps of 1", "nvfp4-int4"),
    ], [("nvfp4", False), ("separating_bf16", True)])


# --- study 5: the precision scaling law ----------------------------------------------------------------

SCALING_PARAMETERS = [("A", "the power law's scale"), ("alpha", "its exponent in N_eff"),
                      ("E", "the loss it tends to as N_eff grows"),
                      ("A_alpha", "the loss per e-fold of N_eff (determined as α → 0, where A and E are not)"),
                      ("gamma_weight", "weights' sensitivity, in mantissa bits"),
                      ("gamma_activation", "activations' sensitivity"), ("gamma_gradient", "gradients' sensitivity"),
                      ("rmse", "the fit's root-mean-square error, in nats")]


@functools.lru_cache(maxsize=None)
def scaling_law():
    """host/python/altgrad/scaling_law.py, loaded by its path: its fit and departures need NumPy and
    pandas only, not the built package."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host", "python", "altgrad",
                        "scaling_law.py")
    spec = importlib.util.spec_from_file_location("altgrad_scaling_law", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def scaling_observations(results):
    """Study 5's observations (scripts/scaling_law.py's OUT/runs.csv: one row per finished run)."""
    import pandas as pd
    path = os.path.join(results, "scaling", "runs.csv")
    if not os.path.exists(path):
        raise SystemExit(f"study_tables.py: {path}: not found (is --results the published studies?)")
    return pd.read_csv(path, float_precision="round_trip")  # the losses the script fitted, to the bit


def scaling_shown(name, value, alpha):
    """A fitted parameter as the tables show it: A, alpha and E "undetermined" at the log-linear limit
    (alpha below altgrad.scaling_law.ALPHA_LIMIT), a gamma below NEGLIGIBLE_GAMMA as "< 0.05" (no
    effect, and any value below it fits as well), anything else to 3 significant digits."""
    sl = scaling_law()
    if name in ("A", "alpha", "E") and alpha < sl.ALPHA_LIMIT:
        return "undetermined"
    if name.startswith("gamma_") and value < sl.NEGLIGIBLE_GAMMA:
        return f"< {sl.NEGLIGIBLE_GAMMA:g}"
    return general(value)


def scaling_same(name, published, refit, alpha):
    """Whether a published value and a refit of it agree: shown alike, and within 1e-4 where shown as
    a number (Nelder-Mead stops within about 1e-6 of the minimum, and NumPy's exp, log and LAPACK may
    differ in the last bits between CPUs)."""
    shown = scaling_shown(name, published, alpha)
    if shown != scaling_shown(name, refit, alpha):
        return False
    return shown in ("undetermined", scaling_shown("gamma_", 0.0, alpha)) or math.isclose(
        published, refit, rel_tol=1e-4)


def scaling_fit_table(results):
    """Study 5: the law refitted here from the observations, beside the 95% intervals of the published
    bootstrap (scaling/fit.csv: 200 refits take seconds, so tests/docs/study_tables_test.py reruns them
    once, not every check). The published point fit must be this refit's."""
    law = scaling_law().fit(scaling_observations(results)).as_dict()
    path = os.path.join(results, "scaling", "fit.csv")
    with open(path, newline="", encoding="utf-8") as f:
        published = {row["parameter"]: row for row in csv.DictReader(f)}
    rows = []
    for name, what in SCALING_PARAMETERS:
        if name not in published or not scaling_same(name, float(published[name]["fit"]), law[name], law["alpha"]):
            raise SystemExit(f"study_tables.py: {path}: {name} is not the fit of scaling/runs.csv "
                             f"({law[name]:.6g}): rerun scripts/scaling_law.py")
        low, high = (scaling_shown(name, float(published[name][k]), law["alpha"]) for k in ("low", "high"))
        interval = "" if low == "undetermined" else f"{low} – {high}"
        rows.append([name.replace("gamma_", "γ ").replace("A_alpha", "A·α").replace("alpha", "α"), what,
                     scaling_shown(name, law[name], law["alpha"]), interval])
    return table(["parameter", "what it is", "fit", "95% interval (seeds resampled)"], rows)


def scaling_bootstrap_differences(results, samples=200):
    """The published bootstrap (scaling/fit.csv, scripts/scaling_law.py's default 200 refits) against
    one rerun here from scaling/runs.csv: the parameters whose fit or interval differs (scaling_same)."""
    rerun = scaling_law().bootstrap(scaling_observations(results), samples)
    with open(os.path.join(results, "scaling", "fit.csv"), newline="", encoding="utf-8") as f:
        published = {row["parameter"]: row for row in csv.DictReader(f)}
    alpha = float(rerun.set_index("parameter").loc["alpha", "fit"])
    return [f"{row.parameter}: published {published[row.parameter]['low']} – {published[row.parameter]['high']}, "
            f"rerun {row.low!r} – {row.high!r}" for row in rerun.itertuples()
            if row.parameter not in published or not all(
                scaling_same(row.parameter, float(published[row.parameter][k]), getattr(row, k), alpha)
                for k in ("fit", "low", "high"))]


def scaling_cost_table(results):
    """Study 5: what its runs cost, per model size (scaling/runs.csv keeps each run's seconds)."""
    obs = scaling_observations(results)
    return costs_table("parameters", [(f"{n:,}", list(runs["cpu_seconds"]), list(runs["seconds"]))
                                      for n, runs in obs.groupby("parameters", sort=True)])


def scaling_departures_table(results):
    """Study 5: per model size and role, each width's mean loss minus BF16's: bold where the paired
    differences (per seed, against BF16's run of that seed) have a 95% interval that excludes 0, as in
    every table here; † where the difference exceeds BF16's seed sd (the issue's criterion), and the
    narrowest width from the top that stays within that sd."""
    sl = scaling_law()
    obs = scaling_observations(results)
    departures = sl.departures(obs)
    held = sl.narrowest_held(departures)
    widths = sorted(departures["bits"].unique(), reverse=True)
    rows = []
    for (n, role), cells in departures.groupby(["parameters", "role"], sort=False):
        by_width = {int(r["bits"]): r for _, r in cells.iterrows()}
        first = cells.iloc[0]  # every row: BF16's mean is its mean_loss less its difference
        row = [f"{n:,}", role, f"{first['mean_loss'] - first['difference']:.3f} ({first['seed_spread']:.3f})"]
        for w in widths:
            r = by_width.get(int(w))
            if r is None:
                row.append("")
                continue
            text = signed(r["difference"])
            if excludes_zero(scaling_paired(obs, n, role, int(w))):
                text = f"**{text}**"
            row.append(text + ("†" if r["departs"] else ""))
        narrowest = held[(int(n), role)]
        row.append(f"E8M{narrowest}" if narrowest is not None else f"departs at E8M{int(widths[0])}")
        rows.append(row)
    return table(["parameters", "role", "BF16 mean (seed sd)"] + [f"E8M{int(w)}" for w in widths] +
                 ["within BF16's seed sd down to"], rows)


def scaling_paired(obs, parameters, role, bits, baseline_bits=7):
    """The Sample of per-seed differences between `role` at `bits` (the other roles at BF16's 7) and
    BF16 at the same size, over the seeds both have."""
    at_size = obs[obs["parameters"] == parameters]

    def losses(role_bits):
        mask = functools.reduce(lambda x, y: x & y, [at_size[f"{r}_bits"] == (role_bits if r == role else
                                                                                 baseline_bits)
                                                      for r in scaling_law().ROLES])
        return dict(zip(at_size[mask]["seed"], at_size[mask]["final_val_loss"]))
    quantized, bf16 = losses(bits), losses(baseline_bits)
    return Sample(quantized[s] - bf16[s] for s in sorted(quantized) if s in bf16)


def learning_rate_at(training, step):
    """The trainer's schedule (training_run.cpp, nanoGPT's): linear warm-up, then cosine to min_lr."""
    if step < training["warmup_steps"]:
        return training["learning_rate"] * (step + 1) / (training["warmup_steps"] + 1)
    ratio = min(1.0, (step - training["warmup_steps"]) / max(1, training["max_steps"] - training["warmup_steps"]))
    return training["min_lr"] + 0.5 * (1 + math.cos(math.pi * ratio)) * (training["learning_rate"] - training["min_lr"])


def paired_relative_at(study, group, baseline, step):
    """"+1.23% (+0.50% – +1.96%)": the group's validation loss at `step` minus the baseline's, paired by
    seed, in % of the baseline's mean there."""
    a, b = study.val_by_seed(group, step), study.val_by_seed(baseline, step)
    d = Sample(a[k] - b[k] for k in sorted(a) if k in b)
    if d.n < 2:
        raise SystemExit(f"study_tables.py: {group} and {baseline} share fewer than 2 seeds at step {step}")
    return relative_text(d, statistics.fmean(b.values()))


def nvfp4_over_training_table(results):
    """Study 4: NVFP4's relative error against FP8 (deepseek_v3) and BF16 as training goes, beside the
    learning rate: the NVFP4 paper's gap stays under 1% while the rate is high and widens as it decays."""
    study = load_study(results, "recipes")
    training = study.config_of("nvfp4")["training"]
    rows = []
    for step in (250, 500, 1000, 1500, 2000, 2500, training["max_steps"]):
        rows.append([str(step), f"{100 * learning_rate_at(training, step) / training['learning_rate']:.0f}%",
                     paired_relative_at(study, "nvfp4", "deepseek_v3", step),
                     paired_relative_at(study, "nvfp4", "separating_bf16", step)])
    return table(["step", "learning rate (% of peak)", "NVFP4 vs FP8 (`deepseek_v3`): relative error, paired",
                  "NVFP4 vs BF16"], rows)


def median(values):
    return statistics.median(values) if values else math.nan


def cost_table(results, study):
    """What a study's runs cost: per group the runs, the median CPU and wall seconds of a run (one thread
    each; wall stretches with what ran beside), and the group's CPU hours; then the study's total."""
    s = load_study(results, study)
    return costs_table("group", [(name, s.groups[name].cpu_seconds, s.groups[name].seconds) for name in s.order])


def costs_table(what, costs):
    """costs_table's rows from (name, CPU seconds of each run, wall seconds of each run)."""
    rows, total_cpu, total_runs = [], 0.0, 0
    for name, cpu_seconds, seconds in costs:
        total_cpu += sum(cpu_seconds)
        total_runs += len(cpu_seconds)
        rows.append([name, str(len(cpu_seconds)), f"{median(cpu_seconds):.0f}", f"{median(seconds):.0f}",
                     f"{sum(cpu_seconds) / 3600:.2f}"])
    rows.append(["**all**", str(total_runs), "", "", f"**{total_cpu / 3600:.2f}**"])
    return table([what, "runs", "CPU per run (median, s)", "wall per run (median, s)", "CPU (hours)"], rows)


TABLES = {"seeds": seeds_table, "separating": separating_table, "blocks": blocks_table, "recipes": recipes_table,
          "nvfp4_over_training": nvfp4_over_training_table, "fp8": fp8_table,
          "nvfp4_ablations": nvfp4_ablations_table, "tseng": tseng_table, "accumulation": accumulation_table,
          "wgmma": wgmma_table,
          "nvfp4_elements": nvfp4_elements_table, "formats_in_recipes": formats_in_recipes_table,
          "scaling_fit": scaling_fit_table, "scaling_departures": scaling_departures_table,
          "scaling_cost": scaling_cost_table,
          "recipes_cost": lambda results: cost_table(results, "recipes")}

# --- the page ----------------------------------------------------------------------------------------------------

BEGIN = "<!-- table {}: scripts/study_tables.py writes it from the runs; edit the script, not the table -->"
END = "<!-- end table -->"


def regenerate(lines, results, page):
    """The page's lines with every marked table recomputed, and the names of the tables that changed
    (each with its first differing line)."""
    out, changed, i = [], [], 0
    names = {BEGIN.format(name): name for name in TABLES}
    while i < len(lines):
        out.append(lines[i])
        name = names.get(lines[i].strip())
        if name is None:
            if lines[i].startswith("<!-- table "):
                raise SystemExit(f"study_tables.py: {page}:{i + 1}: unknown table marker "
                                 f"(tables: {', '.join(TABLES)}): {lines[i].strip()}")
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].strip() != END and not lines[end].startswith("<!-- table "):
            end += 1
        if end == len(lines) or lines[end].strip() != END:
            raise SystemExit(f"study_tables.py: {page}:{i + 1}: table {name} has no '{END}' line")
        old, new = lines[i + 1:end], TABLES[name](results)
        if old != new:
            k = next((k for k in range(max(len(old), len(new)))
                      if k >= len(old) or k >= len(new) or old[k] != new[k]))
            changed.append(f"{page}:{i + 2 + k}: table {name}: the page has\n  "
                           f"{old[k] if k < len(old) else '(nothing)'}\nthe runs give\n  "
                           f"{new[k] if k < len(new) else '(nothing)'}")
        out += new
        out.append(lines[end])
        i = end + 1
    return out, changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--print", metavar="NAME", choices=sorted(TABLES))
    parser.add_argument("--results")
    docs = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs"))
    parser.add_argument("pages", nargs="*",
                        default=[os.path.join(docs, "study.md"), os.path.join(docs, "performance.md")])
    args = parser.parse_args()
    results = args.results or os.path.join(os.path.dirname(os.path.abspath(args.pages[0])), "results")
    if args.print:
        print("\n".join(TABLES[args.print](results)))
        return 0
    all_changed = []
    for page in args.pages:
        with open(page, encoding="utf-8") as f:
            lines = f.read().split("\n")
        out, changed = regenerate(lines, results, page)
        all_changed += changed
        if args.write and changed:
            with open(page, "w", encoding="utf-8") as f:
                f.write("\n".join(out))
    for c in all_changed:
        print(("rewrote " + c.split("\n")[0]) if args.write else c, file=sys.stdout if args.write else sys.stderr)
    return 1 if all_changed and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
