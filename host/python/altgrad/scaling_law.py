"""Kumar et al.'s precision scaling law (arXiv 2411.04330) fitted to a study's runs (docs/study.md, study 5).

    import altgrad.scaling_law as sl
    obs = sl.observations(run_dirs)          # one row per finished run: N, P per role, seed, loss
    fit = sl.fit(obs)                        # L = A * N_eff^-alpha + E, N_eff = N * prod_r (1 - e^(-P_r / gamma_r))
    intervals = sl.bootstrap(obs, 200)       # 95% intervals of every parameter, resampling each cell's seeds
    sl.departures(obs)                       # per size and role: the widths whose loss leaves BF16's seed spread

The effective parameter count is the paper's: each role r (weights, activations, gradients) trained
with P_r mantissa bits shrinks N by the factor 1 - e^(-P_r / gamma_r); a larger gamma_r is a more
sensitive role. With the study's fixed tokens per parameter the data term is a power of N too, so one
power law A * N_eff^-alpha + E carries both. Only NumPy: for given alpha and gammas the law is linear
in A and E (solved exactly), and the four are found by Nelder-Mead on log scales.
"""
import json
import math
import os
import tomllib

import numpy as np

__all__ = ["ROLES", "ALPHA_LIMIT", "NEGLIGIBLE_GAMMA", "Fit", "observations", "fit", "predict", "bootstrap",
           "departures", "narrowest_held"]

ROLES = ("weight", "activation", "gradient")

# Below this alpha the fit is at its log-linear limit, where A and E are not determined (Fit says why).
ALPHA_LIMIT = 1e-3
# A gamma below this shrinks N by less than e^(-1/0.05) = 2e-9 at 1 bit or more: no effect, and the
# fit cannot tell it from any other gamma below it.
NEGLIGIBLE_GAMMA = 0.05


def _mantissa_bits(quantization, role, registry):
    name = quantization.get(f"{role}_format", "e5m2")
    if name in ("fp32", "float32"):
        return 23
    params = quantization.get("params", {}).get(name)
    return int(registry.format(name, params).info["mantissa_bits"])


def observations(run_dirs, registry=None):
    """One row per finished run of `run_dirs`: run_id, parameters (N, summary.json's
    model.parameters), each role's mantissa bits (weight_bits, activation_bits, gradient_bits: the
    role's format as its plugin describes it; fp32 23), seed, final_val_loss, and what the run cost
    (summary.json's seconds and cpu_seconds, across resumes). Runs that did not
    finish are left out; a run without a parameter count (a host before it) is an error naming it."""
    import pandas as pd
    from . import Registry
    registry = registry or Registry()
    rows = []
    for run_dir in run_dirs:
        summary_path = os.path.join(run_dir, "summary.json")
        if not os.path.isfile(summary_path):
            continue
        with open(summary_path, encoding="utf-8") as f:
            summary = json.load(f)
        if summary.get("status") != "finished":
            continue
        parameters = (summary.get("model") or {}).get("parameters")
        if not parameters:
            raise ValueError(f"{summary_path}: no model.parameters (written by hosts since study 5's)")
        with open(os.path.join(run_dir, "config.toml"), "rb") as f:
            quantization = tomllib.load(f).get("quantization", {})
        row = {"run_id": summary.get("run_id"), "parameters": int(parameters), "seed": summary.get("seed"),
               "final_val_loss": summary.get("final_val_loss"), "seconds": summary.get("seconds"),
               "cpu_seconds": summary.get("cpu_seconds")}
        for role in ROLES:
            row[f"{role}_bits"] = _mantissa_bits(quantization, role, registry)
        rows.append(row)
    return pd.DataFrame(rows, columns=["run_id", "parameters", *(f"{r}_bits" for r in ROLES), "seed",
                                       "final_val_loss", "seconds", "cpu_seconds"])


class Fit:
    """The fitted law: A, alpha, E, gamma (one per role), and rmse (of the runs' losses). as_dict adds
    A_alpha, A * alpha: where the sizes do not bend the way a power law does, the fit runs to alpha -> 0,
    where A N^-alpha + E tends to (A + E) - A alpha ln N: A and E then grow without bound in opposite
    directions, while A alpha, the loss per e-fold of N_eff, and the gammas keep their meaning."""

    def __init__(self, a, alpha, e, gamma, rmse, a_alpha=None, top=None):
        self.a, self.alpha, self.e, self.gamma, self.rmse = a, alpha, e, dict(gamma), rmse
        # The fit's own A alpha and A + E, as solved (A may overflow, and A + E cancels near the limit).
        self.a_alpha = a * alpha if a_alpha is None else a_alpha
        self.top = a + e if top is None else top

    def as_dict(self):
        return {"A": self.a, "alpha": self.alpha, "E": self.e, "A_alpha": self.a_alpha,
                **{f"gamma_{r}": g for r, g in self.gamma.items()}, "rmse": self.rmse}

    def __repr__(self):
        return "Fit(" + ", ".join(f"{k}={v:.4g}" for k, v in self.as_dict().items()) + ")"


def _arrays(obs):
    n = obs["parameters"].to_numpy(float)
    bits = np.stack([obs[f"{r}_bits"].to_numpy(float) for r in ROLES], axis=1)
    return n, bits, obs["final_val_loss"].to_numpy(float)


def _effective(n, bits, gamma):
    return n * np.prod(1.0 - np.exp(-bits / np.asarray(gamma)), axis=1)


def _linear_part(n, bits, loss, alpha, gamma):
    # For given alpha and gammas, the least-squares A alpha and A + E, and the residual. The law is solved as
    # L = (A + E) - A alpha x with x = (1 - N_eff^-alpha) / alpha, which tends to ln N_eff as alpha -> 0:
    # well conditioned at every alpha, where N_eff^-alpha itself tends to a constant column.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = -np.expm1(-alpha * np.log(_effective(n, bits, gamma))) / alpha
    if not np.all(np.isfinite(x)):  # alpha 0, or a gamma so large that N_eff is 0: out of bounds for the search
        return math.nan, math.nan, math.inf
    design = np.stack([x, np.ones_like(x)], axis=1)
    (slope, top), *_ = np.linalg.lstsq(design, loss, rcond=None)
    return float(-slope), float(top), float(np.sum((design @ [slope, top] - loss) ** 2))


def _nelder_mead(f, x0, steps, iterations=3000, tolerance=1e-12):
    # Minimise f from x0 (NumPy only): the standard simplex moves (reflect 1, expand 2, contract 1/2).
    simplex = [np.asarray(x0, float)] + [np.asarray(x0, float) + np.eye(len(x0))[i] * steps[i]
                                         for i in range(len(x0))]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if abs(values[-1] - values[0]) <= tolerance * (abs(values[0]) + tolerance):
            break
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (s - simplex[0]) for s in simplex]
                values = [f(s) for s in simplex]
    best = int(np.argmin(values))
    return simplex[best], values[best]


def fit(obs):
    """The law fitted to `obs` (observations()'s rows) by least squares over the runs' final losses."""
    n, bits, loss = _arrays(obs)
    if len(loss) < 6 or len(np.unique(n)) < 2:
        raise ValueError(f"fit: {len(loss)} runs over {len(np.unique(n))} model sizes: the law's 6 parameters "
                         "need at least 6 runs and 2 sizes")

    def sse(z):  # z: log alpha, log gamma per role
        return _linear_part(n, bits, loss, np.exp(z[0]), np.exp(z[1:]))[2]

    starts = [np.log([0.3, g, g, g]) for g in (0.5, 1.0, 2.0)]
    best = min((_nelder_mead(sse, z0, [0.5] * 4) for z0 in starts), key=lambda r: r[1])[0]
    alpha, gamma = float(np.exp(best[0])), np.exp(best[1:])
    a_alpha, top, residual = _linear_part(n, bits, loss, alpha, gamma)
    with np.errstate(over="ignore"):
        a = a_alpha / alpha  # Inf where alpha is near the smallest double: A alpha and A + E stand all the same
    return Fit(float(a), alpha, float(top - a), {r: float(g) for r, g in zip(ROLES, gamma)},
               float(np.sqrt(residual / len(loss))), a_alpha, top)


def predict(law, parameters, weight_bits, activation_bits, gradient_bits):
    """The law's loss at N parameters and each role's mantissa bits (NumPy broadcasting)."""
    bits = np.stack(np.broadcast_arrays(weight_bits, activation_bits, gradient_bits), axis=-1).astype(float)
    n = np.broadcast_to(np.asarray(parameters, float), bits.shape[:-1])
    n_eff = n * np.prod(1.0 - np.exp(-bits / np.array([law.gamma[r] for r in ROLES])), axis=-1)
    # (A + E) - A alpha (1 - N_eff^-alpha) / alpha: A N_eff^-alpha + E without its cancellation near alpha 0.
    return law.top - law.a_alpha * -np.expm1(-law.alpha * np.log(n_eff)) / law.alpha


def _cells(obs):
    return obs.groupby(["parameters", *(f"{r}_bits" for r in ROLES)], sort=True)


def bootstrap(obs, samples=200, seed=0, level=0.95):
    """`samples` refits, each over every cell's runs (equal but for the seed) resampled with
    replacement: per parameter, the point fit and the bootstrap's `level` percentile interval."""
    import pandas as pd
    point = fit(obs).as_dict()
    rng = np.random.default_rng(seed)
    cells = [group.index.to_numpy() for _, group in _cells(obs)]
    draws = []
    for _ in range(samples):
        rows = np.concatenate([rng.choice(c, size=len(c), replace=True) for c in cells])
        draws.append(fit(obs.loc[rows]).as_dict())
    draws = pd.DataFrame(draws)
    lo, hi = (1 - level) / 2, 1 - (1 - level) / 2
    return pd.DataFrame([{"parameter": k, "fit": v, "low": draws[k].quantile(lo), "high": draws[k].quantile(hi)}
                         for k, v in point.items()])


def departures(obs, baseline_bits=7):
    """Per model size and role (the others at `baseline_bits`, BF16's 7): the mean loss at each of the
    role's widths, its difference from the BF16 runs' mean, the BF16 runs' seed spread (their
    standard deviation), and `departs`: whether the difference exceeds that spread; widest first."""
    import pandas as pd
    rows = []
    for n, runs in obs.groupby("parameters", sort=True):
        others = {r: runs[f"{r}_bits"] == baseline_bits for r in ROLES}
        bf16 = runs[np.logical_and.reduce(list(others.values()))]["final_val_loss"]
        if len(bf16) == 0:
            continue
        spread = float(bf16.std(ddof=1)) if len(bf16) > 1 else float("nan")
        for role in ROLES:
            mask = np.logical_and.reduce([others[r] for r in ROLES if r != role])
            per_width = runs[mask].groupby(f"{role}_bits")["final_val_loss"].agg(["mean", "count"])
            for width, (mean, count) in per_width.sort_index(ascending=False).iterrows():
                if width == baseline_bits:
                    continue
                difference = float(mean - bf16.mean())
                rows.append({"parameters": int(n), "role": role, "bits": int(width), "runs": int(count),
                             "mean_loss": float(mean), "difference": difference, "seed_spread": spread,
                             "departs": bool(difference > spread)})
    return pd.DataFrame(rows, columns=["parameters", "role", "bits", "runs", "mean_loss", "difference",
                                       "seed_spread", "departs"])


def narrowest_held(departures):
    """Per (parameters, role) of `departures`: going from the widest width down, the narrowest one
    reached before a width departs (None where the widest already does)."""
    held = {}
    for (n, role), rows in departures.groupby(["parameters", "role"], sort=True):
        held[(int(n), role)] = None
        for _, row in rows.sort_values("bits", ascending=False).iterrows():
            if row["departs"]:
                break
            held[(int(n), role)] = int(row["bits"])
    return held
