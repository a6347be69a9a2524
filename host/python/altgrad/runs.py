"""Run directories (docs/training.md) as pandas tables: metrics by record kind, summary, config."""
import json
import os
import tomllib
from dataclasses import dataclass, field

# JSON has no NaN or Infinity (the host writes a non-finite number as null), but Python's json reads
# them: refused here, as the host's reader refuses them (docs/training.md).
def _not_json(literal):
    raise ValueError(f"{literal} is not JSON: a non-finite number is written null")


def _json_of(text):
    return json.loads(text, parse_constant=_not_json)


def _why(e):
    return e.msg if isinstance(e, json.JSONDecodeError) else str(e)


# Lines written before metrics carried "kind", told apart by their keys as `report` does.
def _kind_of(record):
    if "kind" in record:
        return record["kind"]
    if "diagnostic" in record:
        return "diagnostic"
    if "tensor" in record:
        return "tensor"
    if "event" in record:
        return "event"
    if "val_loss" in record:
        return "val"
    return "train"


@dataclass
class Run:
    """One run directory: `metrics[kind]` a DataFrame per record kind (train, val, tensor,
    diagnostic, event; nested values flattened, e.g. `values.stiffness_mean`), `summary` the
    dict of summary.json (None while the run has none), `config` the dict of config.toml,
    `catalog` a DataFrame of the metrics it wrote (its catalog.json, else the host's metrics:
    name, record, scope, unit, title, source, series, ...), and `steps` its series by step
    (what `altgrad-host report` draws and writes to steps.csv: train_loss, val_loss, the host's
    rates and the diagnostics' headline values), computed by the host's own code."""
    path: str
    run_id: str
    metrics: dict
    summary: dict
    config: dict
    catalog: object = None
    steps: object = None

    def __getitem__(self, kind):
        return self.metrics[kind]


@dataclass
class Runs:
    """Many runs: `metrics[kind]` their tables concatenated (told apart by `run_id`),
    `summaries` one row per run, `steps` their series concatenated (with `run_id`),
    `groups` one row per group against its baseline (study_summary), `runs` the Run objects."""
    runs: list
    metrics: dict = field(default_factory=dict)
    summaries: object = None
    steps: object = None
    groups: object = None

    def __getitem__(self, kind):
        return self.metrics[kind]


def read_run(run_dir):
    """The run directory `run_dir`: its metrics.jsonl by kind, summary.json and config.toml."""
    import pandas as pd
    metrics_path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(metrics_path):
        raise FileNotFoundError(f"{run_dir}: not a run directory (no metrics.jsonl)")
    by_kind = {}
    with open(metrics_path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = _json_of(line)
            except ValueError as e:
                # The last line of a run killed while writing may be cut short.
                raise ValueError(f"{metrics_path}:{number}: not a JSON line ({_why(e)})") from None
            by_kind.setdefault(_kind_of(record), []).append(record)
    # JSON has no NaN: a non-finite number was written null, read back as NaN.
    metrics = {kind: pd.json_normalize(records) for kind, records in by_kind.items()}
    summary = None
    summary_path = os.path.join(run_dir, "summary.json")
    if os.path.isfile(summary_path):
        with open(summary_path, encoding="utf-8") as f:
            try:
                summary = _json_of(f.read())
            except ValueError as e:
                raise ValueError(f"{summary_path}: not valid JSON ({_why(e)})") from None
    config = {}
    config_path = os.path.join(run_dir, "config.toml")
    if os.path.isfile(config_path):
        with open(config_path, "rb") as f:
            config = tomllib.load(f)
    run_id = (summary or {}).get("run_id")
    if run_id is None:
        for records in by_kind.values():
            run_id = records[0].get("run_id")
            break
    catalog, steps = _catalog_and_steps(run_dir)
    return Run(path=str(run_dir), run_id=run_id or os.path.basename(os.path.normpath(run_dir)), metrics=metrics,
               summary=summary, config=config, catalog=catalog, steps=steps)


def _catalog_and_steps(run_dir):
    """The run's catalog and series as the report reads them (host/src/report/run_record.cpp)."""
    import pandas as pd
    from . import _native
    series = _native.read_run_series(str(run_dir))
    catalog = pd.DataFrame(series["catalog"])
    steps = pd.DataFrame(series["values"], columns=series["columns"])
    steps.insert(0, "step", pd.Series(series["steps"], dtype="int64"))
    return catalog, steps


# summary.csv's columns that are text; the others are numbers (NaN where the row has none).
_SUMMARY_TEXT = ("group", "baseline_group", "comparison")
_SUMMARY_COUNTS = ("n", "pairs", "failed", "decided", "not_counted")


def study_summary(run_dirs, baseline="bf16_baseline"):
    """The study of `run_dirs` summed up as `altgrad-host report` opens with it (its summary.csv,
    docs/report.md "Summary"), computed by the host's own code: one row per group (runs equal but
    for the seed) against its baseline (the groups of config `baseline`; by default bf16_baseline,
    else the groups that are BF16 throughout), the baselines first, then by the difference. Needs
    each run's config.toml and summary.json only, so a published study without metrics has one."""
    import io
    import pandas as pd
    from . import _native
    text = _native.study_summary_csv([str(d) for d in run_dirs], baseline)
    table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    for column in table.columns:
        if column in _SUMMARY_TEXT:
            continue
        table[column] = pd.to_numeric(table[column].replace("", float("nan")))
        if column in _SUMMARY_COUNTS:
            table[column] = table[column].astype("int64")
    return table


def read_runs(run_dirs, baseline="bf16_baseline"):
    """Several run directories at once (see Runs); `baseline` as in study_summary."""
    import pandas as pd
    runs = [read_run(d) for d in run_dirs]
    kinds = sorted({k for r in runs for k in r.metrics})
    metrics = {k: pd.concat([r.metrics[k] for r in runs if k in r.metrics], ignore_index=True) for k in kinds}
    summaries = pd.DataFrame([dict(r.summary or {}, run_id=r.run_id, path=r.path) for r in runs])
    steps = pd.concat([r.steps.assign(run_id=r.run_id) for r in runs], ignore_index=True) if runs else None
    return Runs(runs=runs, metrics=metrics, summaries=summaries, steps=steps,
                groups=study_summary(run_dirs, baseline))
