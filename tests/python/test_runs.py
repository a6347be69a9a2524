"""altgrad.read_run / read_runs on short real runs of altgrad-host."""
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
