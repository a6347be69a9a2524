#!/usr/bin/python3
"""Study 5's analysis (issue #33; docs/study.md): Kumar et al.'s precision scaling law fitted to runs.

    PYTHONPATH=build/python scripts/scaling_law.py RUN_DIR... -o OUT [--samples 200]

Reads each run's config.toml and summary.json (altgrad.scaling_law.observations), fits
L = A * N_eff^-alpha + E with N_eff = N * prod_r (1 - e^(-P_r / gamma_r)) per role, bootstraps the
seeds for 95% intervals, and writes OUT/runs.csv (the observations: one row per finished run, its N,
each role's mantissa bits, seed and final validation loss), OUT/fit.csv (every parameter, its
interval), OUT/departures.csv
(per size and role: each width's mean loss against BF16's seed spread), OUT/scaling_law.md (both as
tables, the most sensitive role, and the width below which each role departs from BF16) and, with
gnuplot, OUT/loss_vs_bits.png (mean loss above BF16's against a role's mantissa bits, per size, with the
law's).
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

import altgrad.scaling_law as sl


def markdown(table, columns, formats):
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for _, row in table.iterrows():
        out.append("| " + " | ".join(f.format(row[c]) for c, f in zip(columns, formats)) + " |")
    return "\n".join(out)


def ranked(intervals, role):
    """Whether `role`'s gamma interval lies wholly above every other role's."""
    by = intervals.set_index("parameter")
    return all(by.loc[f"gamma_{role}", "low"] > by.loc[f"gamma_{r}", "high"] for r in sl.ROLES if r != role)


def first_departing_widths(departures):
    lines = []
    for (n, role), held in sl.narrowest_held(departures).items():
        what = (f"within BF16's seed spread down to {held} bits" if held is not None
                else "departs already at its widest tested width")
        lines.append(f"- {n:,} parameters, {role}: {what}")
    return "\n".join(lines)


def figure(obs, law, out_dir):
    data = os.path.join(out_dir, "loss_vs_bits.dat")
    sizes = sorted(obs["parameters"].unique())
    with open(data, "w") as f:
        for role in sl.ROLES:  # one gnuplot index per (role, size): measured means, then the law
            for n in sizes:
                # Each size's losses less its BF16 mean (the law's: less its BF16 loss), so that the
                # effects of a few hundredths are not lost under the sizes' spread of a nat.
                others = np.logical_and.reduce([obs[f"{r}_bits"] == 7 for r in sl.ROLES if r != role])
                means = obs[others & (obs["parameters"] == n)].groupby(f"{role}_bits")["final_val_loss"].mean()
                f.write(f"# {role} {n}\n")
                for bits, mean in means.items():
                    f.write(f"{bits} {mean - means.get(7, np.nan)}\n")
                f.write("\n\n")
                f.write(f"# {role} {n} law\n")
                for bits in np.linspace(1, 7, 61):
                    args = [bits if r == role else 7 for r in sl.ROLES]
                    f.write(f"{bits} {sl.predict(law, n, *args) - sl.predict(law, n, 7, 7, 7)}\n")
                f.write("\n\n")
    plots = []
    for i, role in enumerate(sl.ROLES):
        parts = []
        for j, n in enumerate(sizes):
            index = 2 * (i * len(sizes) + j)
            parts.append(f"'{data}' index {index} with points pt 7 lc {j + 1} title '{n:,}'")
            parts.append(f"'{data}' index {index + 1} with lines lc {j + 1} notitle")
        plots.append(f"set title '{role}'; plot " + ", ".join(parts))
    script = ("set terminal pngcairo size 1200,400; set output '" + os.path.join(out_dir, "loss_vs_bits.png") +
              "'; set multiplot layout 1,3; set xlabel 'mantissa bits'; set ylabel 'final val loss above BF16'; "
              "set key top right; " + "; ".join(plots) + "; unset multiplot")
    return subprocess.run(["gnuplot", "-e", script], timeout=120).returncode == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories (a sweep's: OUT/runs/study5_e*/*/)")
    parser.add_argument("-o", "--out", required=True, help="the folder to write")
    parser.add_argument("--samples", type=int, default=200, help="bootstrap refits (default 200)")
    args = parser.parse_args()
    obs = sl.observations(args.runs)
    if obs.empty:
        sys.exit("scaling_law.py: no finished run among the run directories given")
    os.makedirs(args.out, exist_ok=True)
    law = sl.fit(obs)
    intervals = sl.bootstrap(obs, args.samples)
    departures = sl.departures(obs)
    # The observations the fit was made from, one row per run: what a table of the study is checked
    # against (docs/results/scaling/runs.csv), and all a refit needs.
    obs.to_csv(os.path.join(args.out, "runs.csv"), index=False)
    intervals.to_csv(os.path.join(args.out, "fit.csv"), index=False)
    departures.to_csv(os.path.join(args.out, "departures.csv"), index=False)
    gammas = {r: law.gamma[r] for r in sl.ROLES}
    sensitive = max(gammas, key=gammas.get)
    text = [f"# Precision scaling law: {len(obs)} runs, {obs['parameters'].nunique()} model sizes", "",
            "L = A N_eff^-alpha + E, N_eff = N prod_r (1 - e^(-P_r / gamma_r)) (Kumar et al., arXiv 2411.04330), "
            f"fitted by least squares; intervals: {args.samples} refits over each cell's seeds resampled, 95%.", "",
            markdown(intervals, ["parameter", "fit", "low", "high"], ["{}", "{:.4g}", "{:.4g}", "{:.4g}"]), "",
            f"The most sensitive role (the largest gamma): **{sensitive}** (gamma {gammas[sensitive]:.3g})"
            + ("." if ranked(intervals, sensitive) else
               f"; its interval overlaps another role's, so the seeds do not rank the roles."), "",
            *([f"alpha is {law.alpha:.2g}: the sizes' losses fall at least linearly in ln N, which no power law with "
               "an E does, so the fit runs to the limit where A N^-alpha + E is (A + E) - A alpha ln N. A and E are "
               "then not determined, A_alpha (the loss per e-fold of N_eff) and the gammas are.", ""]
              if law.alpha < sl.ALPHA_LIMIT else []),
            "## Against BF16's seed spread", "", first_departing_widths(departures), "",
            markdown(departures, ["parameters", "role", "bits", "runs", "mean_loss", "difference", "seed_spread",
                                  "departs"],
                     ["{:,}", "{}", "{}", "{}", "{:.4f}", "{:+.4f}", "{:.4f}", "{}"])]
    if shutil.which("gnuplot") and figure(obs, law, args.out):
        text += ["", "![loss against bits](loss_vs_bits.png)"]
    with open(os.path.join(args.out, "scaling_law.md"), "w") as f:
        f.write("\n".join(text) + "\n")
    print(os.path.join(args.out, "scaling_law.md"))


if __name__ == "__main__":
    main()
