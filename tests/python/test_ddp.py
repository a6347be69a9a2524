"""quantize_model inside torch.nn.parallel.DistributedDataParallel (docs/distributed.md): two Gloo
processes, each training on half of the batch, keep the same weights (DDP's gradient hooks fire
through QuantLinear's autograd function), and end where one process on the whole batch ends, up to
the rounding of a mean of two means against one mean (DDP's all-reduce is not the trainer's
rank-order sum)."""
import os
import socket
import subprocess
import sys

import torch

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_worker.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_quantize_model_trains_inside_ddp_as_one_process(tmp_path):
    port = free_port()
    ranks = [subprocess.Popen([sys.executable, WORKER, str(r), "2", str(port), str(tmp_path / f"rank{r}.pt")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    for r, p in enumerate(ranks):
        out, _ = p.communicate(timeout=240)
        assert p.returncode == 0, f"rank {r}: {out}"
    one = subprocess.run([sys.executable, WORKER, "0", "1", "0", str(tmp_path / "one.pt")], capture_output=True,
                         text=True, timeout=240)
    assert one.returncode == 0, one.stderr
    saved = [torch.load(tmp_path / f) for f in ("rank0.pt", "rank1.pt", "one.pt")]
    rank0, rank1, whole = (s["final"] for s in saved)
    initial = saved[0]["initial"]
    assert set(rank0) == set(whole) and "body.0.weight" in rank0
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), f"{name}: the ranks' weights differ"
        assert torch.allclose(rank0[name], whole[name], rtol=0, atol=1e-5), \
            f"{name}: DDP's and one process's weights differ by {(rank0[name] - whole[name]).abs().max()}"
    assert torch.equal(initial["body.0.weight"], saved[2]["initial"]["body.0.weight"])
    moved = (rank0["body.0.weight"] - initial["body.0.weight"]).abs().max()
    assert moved > 1e-3, f"the first layer barely trained ({moved})"
