#!/usr/bin/python3
"""scripts/study_tables.py: its Student t against published values and closed forms, its statistics
against the C++ report's summary.csv for every published group (two implementations, one answer),
and its check: docs/study.md's tables are what the runs give, and a changed number is caught.

usage: study_tables_test.py REPO_ROOT
"""
import csv
import math
import os
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
            (lambda s: s.replace("| E7M0 | 3 | 1.928 |", "| E7M0 | 3 | 1.929 |", 1), "table separating", "changed number"),
            (lambda s: s.replace("<!-- end table -->", "", 1), "has no '<!-- end table -->'", "lost end marker"),
            (lambda s: s.replace("<!-- table seeds:", "<!-- table sedes:", 1), "unknown table marker", "unknown table")]:
        changed = change(text)
        expect(changed != text, f"{message}: the mutation found nothing to change")
        with open(mutated, "w", encoding="utf-8") as f:
            f.write(changed)
        r = check(mutated)
        expect(r.returncode != 0 and needle in r.stderr, f"{message} not caught: rc {r.returncode}, {r.stderr!r}")

for failure in failures:
    print("FAIL: " + failure)
print(f"study_tables_test: {compared} groups compared with summary.csv, {welch_checked} Welch p, "
      f"{len(failures)} failures")
sys.exit(1 if failures else 0)
