"""docs/examples/python_fake_quant.py, run as a user would, with few steps."""
import csv
import os
import subprocess
import sys

from conftest import ROOT


def test_the_example_trains_and_writes_its_loss(tmp_path):
    script = os.path.join(ROOT, "docs", "examples", "python_fake_quant.py")
    p = subprocess.run([sys.executable, script, "--steps", "30", "--out", str(tmp_path)], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    with open(tmp_path / "loss.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == list(range(1, 31))
    losses = [float(r["loss"]) for r in rows]
    assert sum(losses[-5:]) < sum(losses[:5])  # it learns, even in 30 steps
    assert "quantized layers:" in p.stdout
