"""altgrad.read_run / read_runs on short real runs of altgrad-host; altgrad.study_summary on runs
written as a published study keeps them (config.toml and summary.json)."""
import json
import math
import os

import pytest

import altgrad
from conftest import ROOT, run_host


def short_run(out, seed):
    run_host("run", os.path.join(ROOT, "configs", "e5m2_short.toml"), "--out", str(out),
             "--set", "training.max_steps=10", "--set", "training.warmup_steps=2", "--set", "training.eval_interval=5",
             "--set", "quantization.diagnostic_interval=5", "--set", "diagnostics.plugins=range",
             "--set", f"training.seed={seed}")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    return [short_run(base / "first", 1), short_run(base / "second", 2)]


def test_read_run_returns_the_logged_steps(runs):
    run = altgrad.read_run(runs[0])
    assert run.run_id == "first"
    train = run["train"]
    assert list(train.step) == list(range(1, 11))
    assert train.loss.map(math.isfinite).all()
    assert list(run["val"].step) == [0, 5, 10]
    assert {"tensor", "diagnostic"} <= set(run.metrics)
    assert "values.max_abs" in run["diagnostic"].columns or any(c.startswith("values.") for c in run["diagnostic"])
    assert run.summary["steps_done"] == 10 and run.summary["status"] == "finished"
    assert run.config["training"]["max_steps"] == 10
    assert run.config["quantization"]["weight_format"] == "e5m2"


def test_read_run_describes_its_metrics_and_gives_its_series(runs):
    run = altgrad.read_run(runs[0])
    stored = run.catalog[run.catalog.summary_of == ""].set_index("name")  # not the series drawn from them
    assert stored.loc["grad_sparsity", "record"] == "train"
    assert run.catalog.set_index("series").loc["grad_sparsity", "summary_of"] == "grad_sparsity"
    assert stored.loc["grad_sparsity", "unit"] == "fraction"
    assert stored.loc["count", "type"] == "count"
    # The series are steps.csv's columns, from the same code: the host's, then the diagnostics' headlines.
    assert list(run.steps.columns[:7]) == ["step", "train_loss", "val_loss", "bit_stall", "overflow", "underflow",
                                           "grad_sparsity"]
    train = run["train"].set_index("step")
    steps = run.steps.set_index("step")
    assert (steps.loc[train.index, "train_loss"] == train.loss).all()
    assert (steps.loc[train.index, "grad_sparsity"] == train.grad_sparsity).all()
    assert list(steps.val_loss.dropna().index) == [0, 5, 10]
    # Bit stall: the weights' bit_stall_rate weighted by their element counts, at the measurements.
    weights = run["tensor"].dropna(subset=["bit_stall_rate"])
    at5 = weights[weights.step == 5]
    assert steps.loc[5, "bit_stall"] == pytest.approx((at5.bit_stall_rate * at5["count"]).sum() / at5["count"].sum())


def test_read_runs_tells_the_runs_apart(runs):
    both = altgrad.read_runs(runs)
    assert sorted(both["train"].run_id.unique()) == ["first", "second"]
    assert len(both["train"]) == 20
    assert list(both.summaries.run_id) == ["first", "second"]
    assert sorted(both.steps.run_id.unique()) == ["first", "second"]
    last = both["train"].groupby("run_id").loss.last()
    assert last["first"] != last["second"]  # other seeds, other runs


def test_not_a_run_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        altgrad.read_run(tmp_path)


def test_a_damaged_metrics_line_names_the_file_and_line(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"kind": "train", "run_id": "x", "step": 1, "loss": 2.0}\n{"kind": "tr\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2: not a JSON line"):
        altgrad.read_run(tmp_path)


# NaN and Infinity are not JSON (the host writes a non-finite number as null), but Python's json
# reads them: a line or summary holding one is refused, as the host's own reader refuses it.
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_literal_is_not_json(tmp_path, literal):
    good = '{"kind": "train", "run_id": "x", "step": 1, "loss": 2.0}\n'
    (tmp_path / "metrics.jsonl").write_text(good + '{"kind": "train", "run_id": "x", "step": 2, "loss": %s}\n'
                                            % literal)
    with pytest.raises(ValueError, match=r"metrics.jsonl:2: not a JSON line \(%s is not JSON: a non-finite "
                       r"number is written null\)" % literal):
        altgrad.read_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text(good)
    (tmp_path / "summary.json").write_text('{"run_id": "x", "final_train_loss": %s}\n' % literal)
    with pytest.raises(ValueError, match=r"summary.json: not valid JSON \(%s is not JSON" % literal):
        altgrad.read_run(tmp_path)


def test_read_runs_sums_up_the_groups(runs):
    groups = altgrad.read_runs(runs).groups
    assert list(groups.group) == ["e5m2_short"]
    assert groups.n[0] == 2 and groups.comparison[0] == "none" and groups.baseline_group[0] == ""
    assert math.isnan(groups.difference[0])


def study_run(root, name, fmt, seed, final_val, failure_mode="none"):
    """A run as a published study keeps it; final_val None: collapsed at step 7."""
    run = root / f"{name}-s{seed}"
    run.mkdir()
    run.joinpath("config.toml").write_text(
        f'name = "{name}"\n[training]\nmax_steps = 500\nseed = {seed}\n[quantization]\n'
        f'weight_format = "{fmt}"\nactivation_format = "{fmt}"\ngradient_format = "{fmt}"\n')
    collapsed = final_val is None
    run.joinpath("summary.json").write_text(json.dumps({
        "name": name, "status": "collapsed" if collapsed else "finished", "failure_mode": failure_mode,
        "failure_evidence": "", "failure_step": 7 if collapsed else None, "steps_done": 7 if collapsed else 500,
        "max_steps": 500, "seed": seed, "final_train_loss": 2.5, "final_val_loss": final_val,
        "best_val_loss": final_val, "seconds": 40.1, "formats": {"weight": fmt, "activation": fmt, "gradient": fmt},
        "switches": [], "interventions": {}}))
    return run


def test_study_summary_by_hand(tmp_path):
    dirs = [study_run(tmp_path, "bf16_baseline", "bf16", s, v) for s, v in [(1, 2.00), (2, 2.10), (3, 2.05)]]
    dirs += [study_run(tmp_path, "e5m2_short", "e5m2", s, v) for s, v in [(1, 2.03), (2, 2.12), (3, 2.10)]]
    dirs += [study_run(tmp_path, "e4m3_uniform", "e4m3", s, v) for s, v in [(4, 2.20), (5, 2.30), (6, 2.25)]]
    dirs += [study_run(tmp_path, "e0m7_uniform", "e0m7", s, None, "overflow") for s in (1, 2)]
    table = altgrad.study_summary(dirs)
    assert list(table.group) == ["bf16_baseline", "e5m2_short", "e4m3_uniform", "e0m7_uniform"]
    assert list(table.comparison) == ["baseline", "paired", "welch", "none"]
    rows = table.set_index("group")
    assert rows.loc["bf16_baseline", "mean_final_val_loss"] == pytest.approx(2.05, abs=1e-12)
    # Paired: differences 0.03, 0.02, 0.05: mean 1/30, sd sqrt(21)/300, 2 degrees of freedom, where
    # t(0.975, 2) = 0.95 sqrt(2 / (1 - 0.95^2)) and the two-sided p is 1 - t / sqrt(2 + t^2).
    se = math.sqrt(21) / 300 / math.sqrt(3)
    t2 = 0.95 * math.sqrt(2 / (1 - 0.95 ** 2))
    e5m2 = rows.loc["e5m2_short"]
    assert e5m2.pairs == 3 and e5m2.baseline_group == "bf16_baseline"
    assert e5m2.difference == pytest.approx(1 / 30, abs=1e-12)
    assert e5m2.difference_ci_low == pytest.approx(1 / 30 - t2 * se, abs=1e-9)
    assert e5m2.difference_ci_high == pytest.approx(1 / 30 + t2 * se, abs=1e-9)
    t = (1 / 30) / se
    assert e5m2.p == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-9)
    assert e5m2.relative_error_percent == pytest.approx(100 / 30 / 2.05, abs=1e-9)
    # Welch: no seed shared; both sds 0.05, se sqrt(2 x 0.0025 / 3), df 4, t(0.975, 4) = 2.7764 (the table).
    se = math.sqrt(2 * 0.0025 / 3)
    e4m3 = rows.loc["e4m3_uniform"]
    assert e4m3.pairs == 0
    assert e4m3.difference == pytest.approx(0.2, abs=1e-12)
    assert e4m3.difference_ci_low == pytest.approx(0.2 - 2.7764451051977987 * se, abs=1e-9)
    e0m7 = rows.loc["e0m7_uniform"]
    assert (e0m7.n, e0m7.failed, e0m7.decided) == (0, 2, 2)
    assert math.isnan(e0m7.difference) and math.isnan(e0m7.mean_final_val_loss)


def test_study_summary_of_a_folder_that_is_no_run(tmp_path):
    with pytest.raises(altgrad.Error, match="not a run directory"):
        altgrad.study_summary([tmp_path])


def test_study_summary_of_a_baseline_no_run_has(tmp_path):
    run = study_run(tmp_path, "e5m2_short", "e5m2", 1, 2.5)
    with pytest.raises(altgrad.Error, match=r"baseline 'mxfp8_e4m3': no run of that config among the runs given "
                                            r"\(their configs: 'e5m2_short'\)"):
        altgrad.study_summary([run], baseline="mxfp8_e4m3")
