#!/usr/bin/python3
"""scripts/study_tables.py: its Student t against published values and closed forms, its statistics
against the C++ report's summary.csv for every published group (two implementations, one answer),
and its check: docs/study.md's tables are what the runs give, a changed number is caught, and its links into
results/ name published files.

usage: study_tables_test.py REPO_ROOT
"""
import csv
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "study_tables.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import study_tables as st  # noqa: E402

failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)


def close(a, b, tolerance):
    return abs(a - b) <= tolerance * max(1.0, abs(b))


# Student t: 97.5% quantiles from the standard tables, and p-values with closed forms.
for df, quantile in [(1, 12.706204736), (2, 4.302652730), (4, 2.776445105), (30, 2.042272456)]:
    expect(close(st.t_quantile_975(df), quantile, 1e-8), f"t quantile df={df}: {st.t_quantile_975(df)} != {quantile}")
expect(close(st.t_two_sided_p(1.0, 1), 0.5, 1e-12), "Cauchy: P(|T| >= 1) = 1/2")
for t in (0.3, 1.7, 9.0):  # df = 2: P(|T| >= t) = 1 - t / sqrt(2 + t^2)
    expect(close(st.t_two_sided_p(t, 2), 1 - t / math.sqrt(2 + t * t), 1e-12), f"df=2 closed form at t={t}")
expect(close(st.t_two_sided_p(2.0, 10), 0.0733880347, 1e-8), "t=2, df=10")
expect(st.p_text(3.3e-5) == "3e-5" and st.p_text(0.0049) == "0.005" and st.p_text(0.0612) == "0.06",
       "p written as the page writes it")
expect(st.signed(-0.0004) == "+0.000" and st.signed(-0.03) == "−0.030", "signs: no −0.000, a true minus")

# The same statistics as `altgrad-host report`'s summary.csv, group by group, in every published study.
results = os.path.join(ROOT, "docs", "results")
compared = 0
for study in sorted(os.listdir(results)):
    summary = os.path.join(results, study, "summary.csv")
    if not os.path.exists(summary):
        continue
    groups = st.Study(results, study)
    with open(summary, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            g = groups[row["group"]]
            expect(g.loss.n == int(row["n"]), f"{study} {g.name}: n")
            if row["comparison"] != "paired":
                continue
            d, baseline = g.paired_with(groups[row["baseline_group"]]), groups[row["baseline_group"]]
            scale = 100 / baseline.loss.mean
            for mine, theirs, what in [(d.mean, "difference", "difference"), (d.low, "difference_ci_low", "interval"),
                                       (d.high, "difference_ci_high", "interval"), (d.p_of_zero_mean(), "p", "p"),
                                       (d.mean * scale, "relative_error_percent", "relative error"),
                                       (d.low * scale, "relative_error_ci_low", "relative interval")]:
                expect(close(mine, float(row[theirs]), 1e-9), f"{study} {g.name}: {what} {mine} != {row[theirs]}")
            compared += 1
expect(compared >= 40, f"only {compared} paired groups compared with summary.csv")

# Welch's p against the report's "Formats compared across seeds" table (3 decimals).
with open(os.path.join(results, "separating", "report.md"), encoding="utf-8") as f:
    lines = f.read().split("\n")
header = next(line for line in lines if line.startswith("| group |") and "p (Welch)" in line)
columns = [c.strip() for c in header.strip("|").split("|")]
study = st.Study(results, "separating")
welch_checked = 0
for line in lines[lines.index(header) + 2:]:
    if not line.startswith("|"):
        break
    cells = [c.strip() for c in line.strip("|").split("|")]
    if cells[columns.index("p (Welch)")] in ("—", ""):
        continue
    mine = st.welch_p(study[cells[0]].loss, study["bf16_baseline"].loss)
    expect(f"{mine:.3f}" == cells[columns.index("p (Welch)")], f"Welch p of {cells[0]}: {mine:.3f}")
    welch_checked += 1
expect(welch_checked == 6, f"Welch p compared for {welch_checked} groups, not 6")


def check(*pages):
    return subprocess.run([sys.executable, SCRIPT, "--check", "--results", results, *pages],
                          capture_output=True, text=True)


# The pages as published are what the runs give, and every table is on one; one changed number, a
# lost end marker and an unknown table are each caught, by name.
pages = [os.path.join(ROOT, "docs", "study.md"), os.path.join(ROOT, "docs", "performance.md")]
r = check(*pages)
expect(r.returncode == 0, f"the pages' tables are not what the runs give:\n{r.stderr}")
shown = ""
for p in pages:
    with open(p, encoding="utf-8") as f:
        shown += f.read()
for name in st.TABLES:
    expect(st.BEGIN.format(name) in shown, f"table {name} of study_tables.py is on neither page")
page = pages[0]
with open(page, encoding="utf-8") as f:
    text = f.read()
with tempfile.TemporaryDirectory() as tmp:
    mutated = os.path.join(tmp, "study.md")
    for change, needle, message in [
            (lambda s: re.sub(r"\| E7M0 \| 3 \| (\d\.\d{3}) \|",  # study 2's E7M0 mean, 0.001 more
                              lambda m: f"| E7M0 | 3 | {float(m.group(1)) + 0.001:.3f} |", s, count=1),
             "table separating", "changed number"),
            (lambda s: s.replace("<!-- end table -->", "", 1), "has no '<!-- end table -->'", "lost end marker"),
            (lambda s: s.replace("<!-- table seeds:", "<!-- table sedes:", 1), "unknown table marker", "unknown table")]:
        changed = change(text)
        expect(changed != text, f"{message}: the mutation found nothing to change")
        with open(mutated, "w", encoding="utf-8") as f:
            f.write(changed)
        r = check(mutated)
        expect(r.returncode != 0 and needle in r.stderr, f"{message} not caught: rc {r.returncode}, {r.stderr!r}")

# Study 4's ablation and format tables, on made-up runs
# whose answers are worked out here: every group of those tables at seeds 1, 2, 42 on top of a BF16 of
# 1.80, 1.85, 1.75 (mean 1.80).
bf16 = {1: 1.80, 2: 1.85, 42: 1.75}
shift = {"separating_bf16": (0, 0, 0), "deepseek_v3": (0.01, 0.01, 0.01), "nvfp4": (0.03, 0.04, 0.035),
         "nvfp4-no_rht": (0.04, 0.06, 0.065),  # NVFP4 + 0.010, 0.020, 0.030
         "tseng_mxfp4-no_sr_no_rht": (0.09, 0.09, 0.09)}
for name in ["nvfp4-no_2d_weights", "nvfp4-no_gradient_sr", "nvfp4-bf16_final_phase", "tseng_mxfp4",
             "tseng_mxfp4-no_sr", "tseng_mxfp4-no_rht", "deepseek_v3-never_promoted", "deepseek_v3-float32_sums",
             "te_mxfp8", "nvfp4-e1m2", "nvfp4-e3m0", "nvfp4-int4"] + [
                 f"{r}-{e}" for r in ("te_mxfp8", "deepseek_v3") for e in ("e3m4", "e1m6", "e0m7")]:
    shift[name] = (0.02, 0.01, 0.015)
with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "recipes"))
    with open(os.path.join(tmp, "recipes", "runs.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["run", "run_id", "group", "seed", "status", "failure_mode", "failure_step", "final_val_loss",
                    "seconds", "cpu_seconds"])
        for name, d in shift.items():
            for (seed, loss), delta in zip(bf16.items(), d):
                w.writerow([f"runs/{name}-s{seed}", f"{name}-s{seed}", name, seed, "finished", "none", "",
                            repr(loss + delta), 1, 1])
        for seed, step in ((1, 400), (2, 600), (42, 500)):  # every block in NVFP4: collapsed
            w.writerow([f"runs/x-s{seed}", f"x-s{seed}", "nvfp4-no_bf16_layers", seed, "collapsed", "overflow",
                        step, "nan", 1, 1])
        # A fourth seed of Tseng's SR-without-RHT cell collapsed: the cell names it and the other three.
        w.writerow(["runs/y-s7", "y-s7", "tseng_mxfp4-no_rht", 7, "collapsed", "overflow", 30, "nan", 1, 1])
    study4 = ("nvfp4_ablations", "tseng", "accumulation", "formats_in_recipes", "nvfp4_elements")
    made_up = {name: "\n".join(st.TABLES[name](tmp)) for name in study4}
    # NVFP4 + 0.010, 0.020, 0.030 (mean loss 1.80 + 0.055): mean 0.020, sd 0.010, t = 2 sqrt(3), df 2:
    # p = 1 - t / sqrt(2 + t^2) = 0.0742; the interval 0.020 -+ 4.3027 * 0.010 / sqrt(3) contains 0.
    expect("| without RHT | Wgrad RHT improves loss at 1.2 B (app. E.4.1) and 12 B (Fig. 4) | 3 | 1.855 | "
           "+0.020 (p 0.07) |" in made_up["nvfp4_ablations"], "nvfp4_ablations: the no_rht row\n" +
           made_up["nvfp4_ablations"])
    expect("| every block in NVFP4 (head BF16) | diverges at 1.2 B and 12 B (section 4.1, app. E.1) | 3 | — | "
           "3/3 overflow (steps 400–600) |" in made_up["nvfp4_ablations"], "nvfp4_ablations: the collapsed row")
    # With RHT: 0.020, 0.010, 0.015 above BF16: mean 0.015 (0.83% of 1.80), sd 0.005, the interval
    # 0.015 -+ 4.3027 * 0.005 / sqrt(3) = 0.0026 to 0.0274 (0.14% to 1.52%). Without: 0.09 at every seed,
    # 5.00%, an interval of no width.
    expect("| without SR (plain OCP MXFP4) | **+0.83%** (+0.14% – +1.52%) | **+5.00%** (+5.00% – +5.00%) |"
           in made_up["tseng"], "tseng: the no-SR row\n" + made_up["tseng"])
    expect("| 1/4 overflow (step 30); the other 3: **+0.83%** (+0.14% – +1.52%) |" in made_up["tseng"],
           "tseng: a cell with a failure and three finished runs\n" + made_up["tseng"])
    expect(made_up["formats_in_recipes"].count("\n") == 5 and made_up["nvfp4_elements"].count("\n") == 5
           and made_up["accumulation"].count("\n") == 4, "study 4 tables: a row per cell")

# Study 5's tables on made-up observations: at 1,000 parameters BF16 (every role
# at 7 mantissa bits) ends at 2.0, 2.1, 1.9 (mean 2.000, sd 0.100); weights at 2 bits 0.05 above it,
# within the sd, at 1 bit 0.20 above, beyond it; every other cell equals BF16. Paired by seed, both weight
# cells differ from BF16 by the same amount at every seed: an interval of no width that excludes 0 (bold);
# the cells equal to BF16 differ by 0 at every seed (not bold). † marks the cell beyond BF16's sd. At 8,000 parameters all
# is 0.3 lower (the fit needs two sizes).
rows = []
for n, offset in ((1000, 0.0), (8000, -0.3)):
    for bits, role_shift in (((7, 7, 7), 0.0), ((2, 7, 7), 0.05), ((1, 7, 7), 0.20), ((7, 2, 7), 0.0),
                             ((7, 1, 7), 0.0), ((7, 7, 2), 0.0), ((7, 7, 1), 0.0)):
        for seed, loss in ((1, 2.0), (2, 2.1), (42, 1.9)):
            rows.append([f"r{n}-{bits}-s{seed}", n, *bits, seed, repr(loss + offset + role_shift), 2.0, seed])
with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "scaling"))
    with open(os.path.join(tmp, "scaling", "runs.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["run_id", "parameters", "weight_bits", "activation_bits", "gradient_bits", "seed",
                    "final_val_loss", "seconds", "cpu_seconds"])
        w.writerows(rows)
    fit_csv = os.path.join(tmp, "scaling", "fit.csv")
    st.scaling_law().bootstrap(st.scaling_observations(tmp), 20).to_csv(fit_csv, index=False)
    departures = "\n".join(st.scaling_departures_table(tmp))
    expect("| 1,000 | weight | 2.000 (0.100) | **+0.050** | **+0.200**† | E8M2 |" in departures,
           "scaling_departures: the weight row\n" + departures)
    expect("| 1,000 | gradient | 2.000 (0.100) | +0.000 | +0.000 | E8M1 |" in departures,
           "scaling_departures: the gradient row\n" + departures)
    expect(len(st.scaling_fit_table(tmp)) == 2 + 8, "scaling_fit: a row per parameter")
    # At the log-linear limit (alpha below 1e-3) A, alpha and E are undetermined; a gamma below 0.05 is
    # "no effect"; a refit agrees with its publication within 1e-4, as shown.
    expect(st.scaling_shown("A", 2.4e12, 1.6e-13) == "undetermined" and st.scaling_shown("A", 40.0, 0.35) == "40",
           "scaling_shown: A")
    expect(st.scaling_shown("gamma_weight", 1.4e-6, 0.35) == "< 0.05" and
           st.scaling_shown("gamma_weight", 0.347, 1e-13) == "0.347", "scaling_shown: gamma")
    expect(st.scaling_same("gamma_weight", 0.3, 0.30001, 1e-13) and not st.scaling_same("gamma_weight", 0.3, 0.3001, 1e-13)
           and st.scaling_same("E", -2.4e12, -7.7e7, 1e-13) and st.scaling_same("gamma_gradient", 1e-6, 1e-9, 0.3),
           "scaling_same: 1e-4 where shown as a number, undetermined and negligible values alike")
    # 21 runs per size costing 1, 2 and 42 CPU seconds (the seed) 7 times each: median 2 s, 315 s in all.
    cost = "\n".join(st.scaling_cost_table(tmp))
    expect("| 8,000 | 21 | 2 | 2 | 0.09 |" in cost and "| **all** | 42 |  |  | **0.17** |" in cost,
           "scaling_cost\n" + cost)
    expect(st.scaling_bootstrap_differences(tmp, 20) == [], "scaling: the bootstrap rerun differs from its own fit.csv")
    with open(fit_csv, encoding="utf-8") as f:
        text = f.read()
    with open(fit_csv, "w", encoding="utf-8") as f:  # a gamma's point fit and interval changed by hand
        lines = text.split("\n")
        lines = [",".join([p[0], str(float(p[1]) * 1.01), p[2], str(float(p[3]) * 2)]) if p[0] == "gamma_weight"
                 else line for line, p in ((line, line.split(",")) for line in lines)]
        f.write("\n".join(lines))
    expect(any(d.startswith("gamma_weight:") for d in st.scaling_bootstrap_differences(tmp, 20)),
           "scaling: a changed interval in fit.csv not caught")
    try:
        st.scaling_fit_table(tmp)
        expect(False, "scaling_fit: a point fit changed in fit.csv not caught")
    except SystemExit as e:
        expect("gamma_weight is not the fit of scaling/runs.csv" in str(e), f"scaling_fit: {e}")

# The published bootstrap is the one its runs give (200 refits, a few seconds: once here, not on every
# --check).
expect(st.scaling_bootstrap_differences(results) == [], "scaling: docs/results/scaling/fit.csv's intervals are "
       "not a bootstrap of its runs.csv: rerun scripts/scaling_law.py")

# Every link of docs/study.md into its results (reports, figures, data) names a published file: a
# republished study whose report drew other figures cannot leave the page pointing at none.
with open(os.path.join(ROOT, "docs", "study.md"), encoding="utf-8") as f:
    page = f.read()
links = re.findall(r"\]\((results/[^)#\s]+)", page)
expect(len(links) > 5, f"docs/study.md: only {len(links)} links into results/ found")
for link in links:
    expect(os.path.exists(os.path.join(ROOT, "docs", link)), f"docs/study.md links to {link}, which does not exist")

for failure in failures:
    print("FAIL: " + failure)
print(f"study_tables_test: {compared} groups compared with summary.csv, {welch_checked} Welch p, "
      f"{len(failures)} failures")
sys.exit(1 if failures else 0)
