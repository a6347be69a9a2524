"""altgrad.scaling_law: Kumar et al.'s law fitted to runs (issue #33, study 5).

The fitter is checked on losses generated from known parameters (so the expected values are the
generating ones, not the code's), the reader on run directories written here.
"""
import json
import os

import numpy as np
import pandas as pd
import pytest

import altgrad.scaling_law as sl

TRUE = {"A": 40.0, "alpha": 0.35, "E": 1.3, "gamma": {"weight": 1.6, "activation": 0.9, "gradient": 2.4}}
SIZES = (56544, 211392, 816000)


def synthetic(noise=0.0, seeds=(42, 1, 2), rng_seed=0):
    # Study 5's grid: per size, BF16 (7 bits everywhere) and each role alone at 1..5 bits.
    rng = np.random.default_rng(rng_seed)
    rows = []
    for n in SIZES:
        cells = [(7, 7, 7)] + [tuple(b if r == role else 7 for r in sl.ROLES) for role in sl.ROLES
                                for b in range(1, 6)]
        for bits in cells:
            n_eff = n * np.prod([1 - np.exp(-b / TRUE["gamma"][r]) for r, b in zip(sl.ROLES, bits)])
            loss = TRUE["A"] * n_eff ** -TRUE["alpha"] + TRUE["E"]
            for seed in seeds:
                rows.append({"run_id": f"{n}-{bits}-{seed}", "parameters": n, "weight_bits": bits[0],
                             "activation_bits": bits[1], "gradient_bits": bits[2], "seed": seed,
                             "final_val_loss": loss + noise * rng.standard_normal()})
    return pd.DataFrame(rows)


def test_a_noise_free_grid_gives_back_the_generating_law():
    law = sl.fit(synthetic())
    assert law.alpha == pytest.approx(TRUE["alpha"], rel=1e-3)
    assert law.a == pytest.approx(TRUE["A"], rel=1e-2)
    assert law.e == pytest.approx(TRUE["E"], rel=1e-3)
    assert law.as_dict()["A_alpha"] == pytest.approx(TRUE["A"] * TRUE["alpha"], rel=1e-2)
    for role, gamma in TRUE["gamma"].items():
        assert law.gamma[role] == pytest.approx(gamma, rel=1e-3), role
    assert law.rmse < 1e-6
    # And it predicts what generated it.
    assert sl.predict(law, 211392, 3, 7, 7) == pytest.approx(
        TRUE["A"] * (211392 * (1 - np.exp(-3 / 1.6)) * (1 - np.exp(-7 / 0.9)) * (1 - np.exp(-7 / 2.4)))
        ** -TRUE["alpha"] + TRUE["E"], rel=1e-4)


def test_seed_noise_gives_intervals_as_wide_as_the_error_and_ranks_the_roles():
    # Three seeds a cell resample to intervals that are a little narrow (a 95% percentile interval
    # of 3 values), so the check is that the fit's error is of the interval's size, and that more
    # noise widens the intervals.
    obs = synthetic(noise=0.003)
    intervals = sl.bootstrap(obs, samples=60, seed=1).set_index("parameter")
    quieter = sl.bootstrap(synthetic(noise=0.001), samples=60, seed=1).set_index("parameter")
    for role, gamma in TRUE["gamma"].items():
        fitted, low, high = intervals.loc[f"gamma_{role}", ["fit", "low", "high"]]
        assert low <= fitted <= high and high > low, role
        assert abs(fitted - gamma) < 2 * (high - low), (role, fitted, low, high)
        q_low, q_high = quieter.loc[f"gamma_{role}", ["low", "high"]]
        assert q_high - q_low < high - low, role
    # The gradient role (largest gamma) is the most sensitive; activations the least.
    fitted = {r: intervals.loc[f"gamma_{r}", "fit"] for r in sl.ROLES}
    assert max(fitted, key=fitted.get) == "gradient" and min(fitted, key=fitted.get) == "activation"


def log_linear(slope=0.4, top=7.0):
    # Study 5's grid with losses linear in ln N_eff, L = top - slope * ln N_eff: the limit alpha -> 0 of
    # the law with A alpha = slope (what study 5's three sizes look like: they fall faster than a power law).
    obs = synthetic()
    n_eff = obs["parameters"] * np.prod([1 - np.exp(-obs[f"{r}_bits"] / TRUE["gamma"][r]) for r in sl.ROLES],
                                        axis=0)
    return obs.assign(final_val_loss=top - slope * np.log(n_eff))


def test_losses_linear_in_log_n_fit_at_the_limit_with_their_slope_and_gammas():
    law = sl.fit(log_linear())
    assert law.alpha < 1e-3
    assert law.as_dict()["A_alpha"] == pytest.approx(0.4, rel=1e-2)
    for role, gamma in TRUE["gamma"].items():
        assert law.gamma[role] == pytest.approx(gamma, rel=1e-2), role
    assert law.rmse < 1e-4
    # Its predictions do not cancel away at the limit: weights at 1 bit cost 0.4 (ln(1 - e^(-7/1.6)) -
    # ln(1 - e^(-1/1.6))) nats more than at 7.
    expected = 0.4 * (np.log(1 - np.exp(-7 / 1.6)) - np.log(1 - np.exp(-1 / 1.6)))
    assert sl.predict(law, 211392, 1, 7, 7) - sl.predict(law, 211392, 7, 7, 7) == pytest.approx(expected, rel=1e-2)


def test_the_search_steps_over_parameters_where_the_law_is_undefined():
    # alpha 0 (0/0 in the law's column) and a gamma so large that N_eff underflows to 0: the residual is
    # infinite there, not a failed least-squares solve, so a search that tries them goes on.
    n, bits, loss = sl._arrays(synthetic())
    assert sl._linear_part(n, bits, loss, 0.0, [1.6, 0.9, 2.4])[2] == float("inf")
    assert sl._linear_part(n, bits, loss, 0.35, [1e300, 0.9, 2.4])[2] == float("inf")
    assert sl._linear_part(n, bits, loss, 0.35, [1.6, 0.9, 2.4])[2] < 1e-12


def test_too_few_runs_or_one_size_is_refused():
    obs = synthetic()
    with pytest.raises(ValueError, match="over 1 model sizes"):
        sl.fit(obs[obs["parameters"] == SIZES[0]])


def test_departures_compare_each_width_with_the_bf16_seed_spread():
    rows = [(7, 7, 7, 2.00), (7, 7, 7, 2.02), (7, 7, 7, 1.98),   # BF16: mean 2.00, sd 0.02
            (5, 7, 7, 2.01), (5, 7, 7, 2.01),                     # +0.01: within the spread
            (3, 7, 7, 2.05), (3, 7, 7, 2.07),                     # +0.06: departs
            (7, 7, 2, 2.30)]                                      # the gradient role at 2 bits
    obs = pd.DataFrame([{"parameters": 1000, "weight_bits": w, "activation_bits": a, "gradient_bits": g,
                         "seed": i, "final_val_loss": loss} for i, (w, a, g, loss) in enumerate(rows)])
    d = sl.departures(obs).set_index(["role", "bits"])
    assert d.loc[("weight", 5), "difference"] == pytest.approx(0.01)
    assert d.loc[("weight", 5), "seed_spread"] == pytest.approx(0.02)
    assert not d.loc[("weight", 5), "departs"]
    assert d.loc[("weight", 3), "departs"] and d.loc[("weight", 3), "runs"] == 2
    assert d.loc[("gradient", 2), "difference"] == pytest.approx(0.30)
    assert ("activation", 7) not in d.index


def write_run(root, name, formats, params=None, parameters=816000, status="finished", loss=2.0, seed=1):
    run = os.path.join(root, name)
    os.makedirs(run)
    lines = ["[quantization]"] + [f'{role}_format = "{fmt}"' for role, fmt in zip(sl.ROLES, formats)]
    for plugin, values in (params or {}).items():
        lines.append(f"[quantization.params.{plugin}]")
        lines += [f"{k} = {v}" for k, v in values.items()]
    with open(os.path.join(run, "config.toml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    summary = {"run_id": name, "status": status, "seed": seed, "final_val_loss": loss,
               "model": {"parameters": parameters}, "seconds": 12.5, "cpu_seconds": 11.0 + seed}
    with open(os.path.join(run, "summary.json"), "w") as f:
        json.dump(summary, f)
    return run


def test_observations_read_each_roles_mantissa_bits_from_the_runs(tmp_path):
    runs = [write_run(tmp_path, "bf16", ("bf16", "bf16", "bf16")),
            write_run(tmp_path, "w3", ("float", "bf16", "bf16"), {"float": {"exponent_bits": 8, "mantissa_bits": 3}}),
            write_run(tmp_path, "g-e5m2", ("bf16", "bf16", "e5m2")),
            write_run(tmp_path, "crashed", ("bf16", "bf16", "bf16"), status="collapsed")]
    obs = sl.observations(runs).set_index("run_id")
    assert list(obs.index) == ["bf16", "w3", "g-e5m2"]  # the collapsed run is left out
    assert tuple(obs.loc["bf16", ["weight_bits", "activation_bits", "gradient_bits"]]) == (7, 7, 7)
    assert tuple(obs.loc["w3", ["weight_bits", "activation_bits", "gradient_bits"]]) == (3, 7, 7)
    assert obs.loc["g-e5m2", "gradient_bits"] == 2 and obs.loc["w3", "parameters"] == 816000
    assert obs.loc["w3", "seconds"] == 12.5 and obs.loc["w3", "cpu_seconds"] == 12.0  # its cost, seed 1


def test_a_run_without_a_parameter_count_is_named(tmp_path):
    run = write_run(tmp_path, "old", ("bf16", "bf16", "bf16"), parameters=None)
    with pytest.raises(ValueError, match="old/summary.json: no model.parameters"):
        sl.observations([run])


def test_the_script_writes_the_fit_the_departures_and_the_figure(tmp_path):
    import subprocess
    import sys
    from conftest import ROOT
    runs = []
    for row in synthetic(noise=0.002).itertuples():
        bits = (row.weight_bits, row.activation_bits, row.gradient_bits)
        formats = tuple("bf16" if b == 7 else "float" for b in bits)
        quantized = [b for b in bits if b != 7]
        params = {"float": {"exponent_bits": 8, "mantissa_bits": quantized[0]}} if quantized else None
        runs.append(write_run(tmp_path / "runs", row.run_id.replace(" ", ""), formats, params,
                              parameters=row.parameters, loss=row.final_val_loss, seed=row.seed))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "scaling_law.py"), *runs, "-o", str(out),
                        "--samples", "20"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = (out / "scaling_law.md").read_text()
    assert "144 runs, 3 model sizes" in text
    assert "The most sensitive role (the largest gamma): **gradient** (gamma" in text
    assert "do not rank the roles" not in text  # gammas 2.4, 1.6, 0.9 with noise 0.002: well apart
    assert "runs to the limit" not in text  # alpha is 0.35 here
    fit = pd.read_csv(out / "fit.csv").set_index("parameter")
    assert fit.loc["gamma_gradient", "fit"] == pytest.approx(TRUE["gamma"]["gradient"], rel=0.1)
    assert len(pd.read_csv(out / "departures.csv")) == 3 * 3 * 5
    # The runs it fitted, as rows: refitting them gives the same law.
    observed = pd.read_csv(out / "runs.csv")
    assert len(observed) == 144 and set(observed["parameters"]) == set(synthetic(noise=0.002)["parameters"])
    assert sl.fit(observed).gamma["gradient"] == pytest.approx(fit.loc["gamma_gradient", "fit"], rel=1e-9)
    if os.path.exists(out / "loss_vs_bits.png"):
        assert "![loss against bits](loss_vs_bits.png)" in text
