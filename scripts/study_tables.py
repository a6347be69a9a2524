#!/usr/bin/python3
"""The tables of docs/study.md, computed from the published runs (docs/results/*/runs.csv), so that
no number in them is typed by hand.

usage: study_tables.py [--check | --write | --print NAME] [--results DIR] [PAGE]
  PAGE (default docs/study.md) holds each table between the two lines
      <!-- table NAME: scripts/study_tables.py writes it from the runs; edit the script, not the table -->
      <!-- end table -->
  --check       (the default) exit 1 naming each table that differs from what the runs give, with
                its first differing line
  --write       rewrite those tables in PAGE
  --print NAME  print one table
  --results DIR the published studies (default: docs/results beside PAGE)

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
import math
import os
import sys

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
        by_group = {}
        with open(self.path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                by_group.setdefault(row["group"], []).append(row)
        self.groups = {name: Group(name, rows) for name, rows in by_group.items()}

    def __getitem__(self, name):
        if name not in self.groups:
            raise SystemExit(f"study_tables.py: {self.path}: no group '{name}' "
                             f"(groups: {', '.join(sorted(self.groups))})")
        return self.groups[name]


# --- how numbers are written ---------------------------------------------------------------------------


def signed(x, digits=3):
    """+0.003, −0.030 (a true minus sign), +0.000."""
    text = f"{abs(x):.{digits}f}"
    return ("−" if x < 0 and float(text) != 0 else "+") + text


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


def relative_cell(group, baseline):
    """The paired difference in % of the baseline's mean, with its 95% interval."""
    if group.failures:
        return failures_cell(group)
    d = group.paired_with(baseline)
    scale = 100 / baseline.loss.mean
    text = f"{signed(d.mean * scale, 2)}%"
    if excludes_zero(d):
        text = f"**{text}**"
    return f"{text} ({signed(d.low * scale, 2)}% – {signed(d.high * scale, 2)}%)"


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
    study = Study(results, "seeds")
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
    study = Study(results, "separating")
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
    study = Study(results, "blocks")
    bf16 = study["bf16_baseline"]
    rows = []
    for config, elements, largest, ratio, floor, round_up in BLOCK_ROWS:
        rows.append([config, elements, largest, ratio, difference_cell(study[floor], bf16),
                     difference_cell(study[round_up], bf16) if round_up else ""])
    return table(["config", "elements", "M", "2^(emax+1) / M: how far the floor rule may put a block's max above M",
                  "floor rule: paired difference from BF16", "round-up rule"], rows)


TABLES = {"seeds": seeds_table, "separating": separating_table, "blocks": blocks_table}

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
    parser.add_argument("page", nargs="?",
                        default=os.path.relpath(os.path.join(os.path.dirname(__file__), "..", "docs", "study.md")))
    args = parser.parse_args()
    results = args.results or os.path.join(os.path.dirname(os.path.abspath(args.page)), "results")
    if args.print:
        print("\n".join(TABLES[args.print](results)))
        return 0
    with open(args.page, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, changed = regenerate(lines, results, args.page)
    if args.write:
        with open(args.page, "w", encoding="utf-8") as f:
            f.write("\n".join(out))
        for c in changed:
            print("rewrote " + c.split("\n")[0])
        return 0
    for c in changed:
        print(c, file=sys.stderr)
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
