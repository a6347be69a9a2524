"""`import altgrad` pins OpenBLAS's and ATen's CPU kernels as `altgrad-host run` does (docs/python.md, "The
same bits on every CPU"), so a process that imports it first computes its float32 products with the
trainer's kernels whatever the CPU or the environment asks for. Each case runs in a fresh interpreter:
the kernels are chosen when OpenBLAS and ATen load."""
import hashlib
import os
import subprocess
import sys

PIN = {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2"}


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


FLAGS = cpu_flags()
PINNABLE = {"avx2", "fma"} <= FLAGS

# A quantized layer's forward and backward: three BLAS products and the bias gradient's vectorised sum,
# all in float32 (per-tensor E4M3/E5M2 operands keep full float32 products). Prints the note and a
# digest of every output's bits.
LAYER = """
import altgrad, altgrad.torch as aqt, hashlib, torch
torch.manual_seed(7)
layer = aqt.QuantLinear(96, 48, weight="e4m3", activation="e4m3", gradient=None)
x = (torch.randn(64, 96) * 3).requires_grad_(True)
y = layer(x)
y.backward(torch.randn(64, 48))
h = hashlib.sha256()
for t in (y, x.grad, layer.weight.grad, layer.bias.grad):
    h.update(t.detach().contiguous().numpy().tobytes())
print(altgrad.cpu_kernels())
print(h.hexdigest())
"""


def python(code, **env):
    base = {k: v for k, v in os.environ.items() if k not in PIN and k != "ALTGRAD_CPU_KERNELS"}
    p = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def forced_environments():
    # Each kernel this CPU can run, forced, each core type and each capability at least once (a
    # covering set, not every pair: each run starts torch). OpenBLAS's SkylakeX kernels and ATen's
    # avx512 need AVX-512.
    cores = ["Haswell", "Zen"] + (["SkylakeX"] if "avx512f" in FLAGS else [])
    capabilities = ["default", "avx2"] + (["avx512"] if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= FLAGS
                                          else [])
    n = max(len(cores), len(capabilities))
    return [{"OPENBLAS_CORETYPE": cores[i % len(cores)], "ATEN_CPU_CAPABILITY": capabilities[i % len(capabilities)]}
            for i in range(n)]


def test_importing_altgrad_first_pins_the_trainers_kernels():
    note, blas, aten = python("""
import altgrad, ctypes, torch
lib = next(l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l)
blas = ctypes.CDLL(lib); blas.openblas_get_corename.restype = ctypes.c_char_p
print(altgrad.cpu_kernels()); print(blas.openblas_get_corename().decode())
print(next(l.strip() for l in torch.__config__.show().splitlines() if 'CPU capability' in l))
""", OPENBLAS_CORETYPE="Zen", ATEN_CPU_CAPABILITY="default")
    if PINNABLE:
        assert note.startswith("OpenBLAS Haswell, ATen avx2 (pinned by import altgrad"), note
        assert blas == "Haswell" and aten.endswith("AVX2"), (blas, aten)
    else:
        assert "no AVX2 and FMA here" in note, note


def test_numpy_or_torch_first_is_not_pinned_and_says_how_to_pin():
    note, = python("import numpy, altgrad; print(altgrad.cpu_kernels())")
    if PINNABLE:
        assert note == ("as this CPU chooses them (not pinned: numpy was imported before altgrad; import altgrad "
                        "first, or set OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2)"), note
    note, = python("import numpy, altgrad; print(altgrad.cpu_kernels())", **PIN)
    if PINNABLE:
        assert note.startswith("OpenBLAS Haswell, ATen avx2 (pinned: "), note
    note, = python("import altgrad; print(altgrad.cpu_kernels())", ALTGRAD_CPU_KERNELS="native")
    assert note.startswith("as this CPU chooses them (ALTGRAD_CPU_KERNELS=native"), note


def test_a_pinned_layer_gives_the_same_bits_under_every_forced_kernel():
    if not PINNABLE:  # no pin applies: the note says so (above), and the CPU's own kernels are used
        assert "no AVX2 and FMA here" in python(LAYER)[0]
        return
    runs = {tuple(env.values()): python(LAYER, **env) for env in forced_environments()}
    digests = {digest for _, digest in runs.values()}
    assert len(digests) == 1, runs
    # Unpinned, the same layer's bits do depend on the kernels (else this test would prove nothing).
    # Unpinned, the same layer's bits do depend on the kernels (else this test would prove nothing):
    # the pin's own kernels give the pinned bits, ATen's default (unvectorised) ones others.
    native = {tuple(env.values()): python(LAYER, ALTGRAD_CPU_KERNELS="native", **env)[1]
              for env in ({"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2"},
                          {"OPENBLAS_CORETYPE": "Zen", "ATEN_CPU_CAPABILITY": "default"})}
    assert native[("Haswell", "avx2")] in digests
    assert native[("Zen", "default")] not in digests, native
