"""One process of test_ddp.py: quantize_model's layers trained inside DistributedDataParallel (Gloo),
or, with world size 1, as one process on the whole batch. Writes the initial and final weights to OUT.
usage: ddp_worker.py RANK WORLD_SIZE PORT OUT"""
import os
import sys

import torch
import torch.distributed as dist

import altgrad.torch as aqt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_torch import Small  # noqa: E402  (the small model of the torch tests)

# E4M3 weights and inputs, rounded to nearest at scale 1: no random bits, no per-rank scaling state.
RECIPE = {"weight_format": "e4m3", "activation_format": "e4m3", "forward_rounding": "nearest"}
STEPS, ROWS = 5, 16


def main(rank, world, port, out):
    torch.manual_seed(0)
    x, target = torch.randn(ROWS, 4), torch.randn(ROWS, 1)
    model = aqt.quantize_model(Small(), RECIPE)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert isinstance(model.body[0], aqt.QuantLinear), type(model.body[0])
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        trained = torch.nn.parallel.DistributedDataParallel(model)
    else:
        trained = model
    share = ROWS // world
    xs, ts = x[rank * share:(rank + 1) * share], target[rank * share:(rank + 1) * share]
    optimizer = torch.optim.SGD(trained.parameters(), lr=0.05)
    for _ in range(STEPS):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(trained(xs), ts).backward()  # DDP averages the ranks' gradients
        optimizer.step()
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.save({"initial": initial, "final": final}, out)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
