"""AltGrad from Python: the format plugins on NumPy arrays and PyTorch tensors.

    import altgrad
    reg = altgrad.Registry()                 # the bundled plugins of this build or install
    e4m3 = reg.format("e4m3")
    y, overflow, underflow = e4m3.quantize(x, rounding="stochastic", seed=1)

The numerics are the plugins' own, called through the host's code (the
extension `altgrad._native`); nothing is copied and the GIL is released while
a plugin runs. `altgrad.torch` has the fake-quantization autograd function,
`QuantLinear` and `quantize_model`; `altgrad.read_run` reads a run directory and
`altgrad.study_summary` sums up a study's runs as the report does;
`altgrad.matmul` multiplies through a low-precision accumulator (docs/accumulation.md);
`altgrad.transform` applies a transform plugin such as random_hadamard (docs/transforms.md).
See docs/python.md.
"""
import json
import os
import sys
from collections import namedtuple

from . import _native


def _blas_or_aten_in_process():
    # What has loaded OpenBLAS or ATen already (they read the pin's variables when they load), or None.
    for module in ("torch", "numpy"):
        if module in sys.modules:
            return module
    try:
        with open("/proc/self/maps") as maps:
            if any("openblas" in line or "libblas" in line or "libtorch" in line for line in maps):
                return "a BLAS library"
    except OSError:
        pass
    return None


def _pin_cpu_kernels():
    # The trainer's pin (altgrad-host run re-executes itself with it; util/cpu_kernels.hpp): set here,
    # before numpy or torch loads OpenBLAS and ATen, so that this process's products are the trainer's.
    variables, name, unpinned = _native.cpu_kernel_pin()
    if unpinned:
        return f"as this CPU chooses them ({unpinned})"
    if all(os.environ.get(k) == v for k, v in variables.items()):
        return f"{name} (pinned: the same bits on every x86-64 machine with AVX2)"
    loaded = _blas_or_aten_in_process()
    if loaded:
        return (f"as this CPU chooses them (not pinned: {loaded} was imported before altgrad; import altgrad "
                f"first, or set {' '.join(f'{k}={v}' for k, v in variables.items())})")
    os.environ.update(variables)
    return f"{name} (pinned by import altgrad: the same bits on every x86-64 machine with AVX2)"


_CPU_KERNELS = _pin_cpu_kernels()


def cpu_kernels():
    """Which CPU kernels this process's float32 products (torch, numpy) use, and whether they are the
    trainer's: `import altgrad` before numpy and torch pins OpenBLAS and ATen as `altgrad-host run` does
    (docs/python.md, "The same bits on every CPU"); ALTGRAD_CPU_KERNELS=native leaves the CPU's choice."""
    return _CPU_KERNELS


from ._paths import bundled_plugin_dir  # after the pin: nothing may load BLAS before it
from .runs import Run, Runs, read_run, read_runs, study_summary
from .transforms import Transform, transform

__all__ = ["Error", "Registry", "Format", "QuantizeResult", "EncodeResult", "Run", "Runs", "read_run", "read_runs",
           "study_summary", "default_plugin_dir", "matmul", "Transform", "transform", "cpu_kernels", "scale_rules",
           "ScaleRule", "default_registry"]

# A plugin or host error (a failed plugin call carries the plugin's own message).
Error = _native.Error

QuantizeResult = namedtuple("QuantizeResult", ["output", "overflow", "underflow"])
EncodeResult = namedtuple("EncodeResult", ["codes", "overflow", "underflow"])


ScaleRule = namedtuple("ScaleRule", ["name", "description", "source", "needs_tensor_amax", "may_clip"])


def scale_rules():
    """The block scale rules (scale_rule=), as the kernels define them (quant/vocabulary.hpp): name,
    description, source, whether it needs the tensor's amax, and whether a block's largest elements
    may clip by design."""
    return [ScaleRule(**r) for r in _native.scale_rules()]


def default_plugin_dir():
    """$ALTGRAD_PLUGIN_DIR when set, else the plugins bundled with this build or install."""
    return os.environ.get("ALTGRAD_PLUGIN_DIR") or bundled_plugin_dir()


def _params(params):
    # The values keep their Python type: the native side checks it against the manifest.
    return {str(k): v for k, v in (params or {}).items()}


class Registry:
    """The plugins of one folder (each `<name>/manifest.toml`), loaded when first used.

    A plugin that is broken (bad manifest, a library that fails to load or crashes
    while loading: each is probed in a child process first) is reported by
    `plugins()` with its reason, as `altgrad-host list` does, and never stops the others.
    """

    def __init__(self, plugin_dir=None, probe_seconds=10.0):
        self._native = _native.Registry(str(plugin_dir or default_plugin_dir()), float(probe_seconds))
        self._accumulators = {}  # matmul's accumulator plugin instances, one per name (made once)

    @property
    def folder(self):
        return self._native.folder

    @property
    def closed(self):
        return self._native.closed

    def close(self):
        """Forget the folder: later calls raise ValueError. Formats already made keep working."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def plugins(self):
        """Every plugin as `altgrad-host list --json` reports it: kind, name, version, status
        ("ok" or "broken"), description, manifest and error (the reason, for a broken one)."""
        return [json.loads(r) for r in self._native.records_json()]

    def _names(self, kind):
        return [p["name"] for p in self.plugins() if p["kind"] == kind and p["status"] == "ok"]

    def formats(self):
        """The names of the working format plugins."""
        return self._names("format")

    def diagnostics(self):
        """The names of the working diagnostic plugins."""
        return self._names("diagnostic")

    def interventions(self):
        """The names of the working intervention plugins."""
        return self._names("intervention")

    def transforms(self):
        """The names of the working transform plugins (ABI 1.4)."""
        return self._names("transform")

    def broken(self):
        """{name: reason} of the broken plugins."""
        return {p["name"]: p["error"] for p in self.plugins() if p["status"] != "ok"}

    def describe(self, name, params=None, table=False):
        """What `altgrad-host describe NAME --json [--table]` prints, as a dict."""
        return json.loads(self._native.describe_json(name, _params(params), bool(table)))

    def format(self, name, params=None):
        """A format plugin's instance, with plugin parameters {key: value}."""
        return Format(self._native.format(name, _params(params)), self)

    def transform(self, name, params=None):
        """A transform plugin's instance (ABI 1.4), with plugin parameters {key: value}."""
        return Transform(self._native.transform(name, _params(params)))


def _torch_module(x):
    # Only a torch.Tensor has these; torch itself is never imported here.
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _check_tensor(t, what):
    import torch
    if t.dtype != torch.float32:
        raise TypeError(f"{what}: expected a torch.float32 tensor, got {t.dtype} "
                        "(convert it first; altgrad never copies)")
    if not t.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous (pass t.contiguous())")
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{what}: tensors on {t.device} are not supported (cpu or cuda)")


def _host_view(x, what, dtype=None):
    """x as a NumPy array over the same memory: a NumPy array itself, or a CPU tensor's view."""
    if _torch_module(x):
        if dtype is None:
            _check_tensor(x, what)
        if x.device.type != "cpu":
            raise ValueError(f"{what}: a {x.device} tensor where a CPU one is needed")
        return x.detach().numpy()
    import numpy as np
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{what}: expected a numpy.ndarray or a torch.Tensor, got {type(x).__name__}")
    return x


class Format:
    """A created format plugin: quantize, encode and decode on float32 arrays and tensors.

    `x` is a C-contiguous numpy.float32 array or a contiguous torch.float32 tensor
    (CPU; CUDA where the plugin has a CUDA implementation). Results go to `out`
    when given (`out=x`: in place), else to a new array or tensor like `x`.
    Other dtypes and non-contiguous inputs are refused (TypeError, ValueError):
    nothing is ever converted or copied.
    """

    def __init__(self, native, registry=None):
        self._native = native
        self._registry = registry  # the Registry that made it: where block quantize finds a scale format

    @property
    def name(self):
        return self._native.name

    @property
    def info(self):
        """The format's encoding (bits, bias, max_finite, ...), its rounding modes and memory kinds."""
        return self._native.info

    def __repr__(self):
        return f"altgrad.Format({self.name!r})"

    def quantize(self, x, rounding="nearest", overflow="saturate", scale=1.0, seed=0, offset=0, out=None,
                 block_scales=None, block_size=0, threads=1, sr_bits=32, block_shape=None, scale_rule=None,
                 scale_format=None, pre_scale=None):
        """q(x*s)/s, element by element, through the plugin: (output, overflow, underflow).

        rounding: nearest | stochastic | toward-zero; overflow: saturate | nonfinite.
        Stochastic rounding draws element i from the stream (seed, offset + i), as the
        C++ host does, so a tensor quantized in chunks with their offsets equals one call.
        sr_bits (1..32): stochastic rounding uses only the top sr_bits of each element's 32
        random bits (ABI 1.4 random_bits), which biases it toward zero by less than 2^-sr_bits
        of a step; 32 is full stochastic rounding.
        block_size: elements per block scale. With block_scales (float32, one per block_size
        elements of the flat array), those scales instead of `scale`. Without, the trainer's
        block scaling: each block of block_size along the last dimension (the row; its last block
        may be short) gets its scale from its amax by scale_rule (mx_floor | round_up | two_level |
        nearest, default mx_floor: altgrad.scale_rules() says what each does) on scale_format's
        values ("fp32", "pow2" (default), a format plugin's name or an altgrad.Format, e.g.
        "ue8m0"), times pre_scale (default 1): q(x*s*c)/(s*c).
        block_shape=(R, C) instead of block_size: tiles of R rows by C columns of a 2-D x, one
        scale each (they must divide x's shape).
        threads > 1 splits the work in chunks over threads (the same result).
        """
        if block_scales is None and (block_size or block_shape is not None):
            return self._quantize_blocked(x, out, block_size, block_shape, scale_rule, scale_format, pre_scale,
                                          rounding, overflow, seed, offset, threads, sr_bits)
        for name, value in (("block_shape", block_shape), ("scale_rule", scale_rule), ("scale_format", scale_format),
                            ("pre_scale", pre_scale)):
            if value is not None:
                raise ValueError(f"quantize: {name} is for derived block scales (block_size or block_shape "
                                 "without block_scales)")
        if _torch_module(x) and x.device.type == "cuda":
            return self._quantize_cuda(x, rounding, overflow, scale, seed, offset, out, block_scales, sr_bits)
        if out is None:
            out = _empty_like(x)
        src, dst = _host_view(x, "quantize input"), _host_view(out, "quantize out")
        scales = None if block_scales is None else _host_view(block_scales, "block_scales")
        counts = self._native.quantize(src, dst, rounding, overflow, float(scale), int(seed), int(offset), scales,
                                       int(block_size), int(threads), int(sr_bits))
        return QuantizeResult(out, *counts)

    def _quantize_blocked(self, x, out, block_size, block_shape, scale_rule, scale_format, pre_scale, rounding,
                          overflow, seed, offset, threads, sr_bits):
        # quantize's block scales derived from x, by the C++ host's quantize_blocked (the trainer's).
        if block_shape is not None and block_size:
            raise ValueError("quantize: give block_size (1 x N blocks) or block_shape=(R, C) (tiles), not both")
        if _torch_module(x) and x.device.type == "cuda":
            raise ValueError("quantize: derived block scales on CUDA tensors are not supported from Python "
                             "(pass a CPU tensor)")
        src = _host_view(x, "quantize input")
        if src.ndim == 0:
            raise ValueError("quantize: block scaling needs an array with a last dimension (its rows)")
        if block_shape is None:
            block_rows, block_cols = 1, int(block_size)
        else:
            block_rows, block_cols = (int(v) for v in block_shape)
            if src.ndim != 2:
                raise ValueError(f"quantize: block_shape={tuple(block_shape)} needs a 2-D array, got "
                                 f"{src.ndim} dimensions")
        if block_rows < 1 or block_cols < 1:
            raise ValueError(f"quantize: blocks of {block_rows} x {block_cols}: expected at least 1 x 1")
        scale_format = "pow2" if scale_format is None else scale_format
        plugin = None
        if isinstance(scale_format, Format):
            scale_format, plugin = scale_format.name, scale_format._native
        elif scale_format not in ("fp32", "pow2"):
            registry = self._registry if self._registry is not None else default_registry()
            try:
                plugin = registry.format(str(scale_format))._native
            except Error as e:
                raise Error(f"quantize: scale_format {scale_format!r}: {e}") from None
        if out is None:
            out = _empty_like(x)
        k = src.shape[-1]
        counts = self._native.quantize_blocked(src, _host_view(out, "quantize out"), src.size // k if k else 0, k,
                                               block_rows, block_cols, "mx_floor" if scale_rule is None else
                                               str(scale_rule), str(scale_format), plugin,
                                               1.0 if pre_scale is None else float(pre_scale), rounding, overflow,
                                               int(seed), int(offset), int(threads), int(sr_bits))
        return QuantizeResult(out, *counts)

    def _quantize_cuda(self, x, rounding, overflow, scale, seed, offset, out, block_scales, sr_bits):
        import torch
        _check_tensor(x, "quantize input")
        if block_scales is not None:
            raise ValueError("quantize: block_scales on CUDA tensors are not supported from Python")
        if out is None:
            out = torch.empty_like(x)
        _check_tensor(out, "quantize out")
        if out.device != x.device or out.numel() != x.numel():
            raise ValueError("quantize: out must be on the input's device, with as many elements")
        counts = self._native.quantize_device(x.data_ptr(), out.data_ptr(), x.numel(), x.device.index or 0, rounding,
                                              overflow, float(scale), int(seed), int(offset), int(sr_bits))
        return QuantizeResult(out, *counts)

    def encode(self, x, rounding="nearest", overflow="saturate", scale=1.0, seed=0, offset=0, codes=None,
               block_scales=None, block_size=0, threads=1, sr_bits=32):
        """The codes of quantize's results: (codes, overflow, underflow). Codes are unsigned
        integers of the format's code width (`code_dtype`: uint8, uint16 or uint32); sr_bits as
        in quantize."""
        import numpy as np
        src = _host_view(x, "encode input")
        if codes is None:
            codes = np.empty(src.shape, dtype=self.code_dtype)
        scales = None if block_scales is None else _host_view(block_scales, "block_scales")
        counts = self._native.encode(src, _host_view(codes, "encode codes", dtype=True), rounding, overflow,
                                     float(scale), int(seed), int(offset), scales, int(block_size), int(threads),
                                     int(sr_bits))
        return EncodeResult(codes, *counts)

    def decode(self, codes, scale=1.0, out=None, block_scales=None, block_size=0, threads=1):
        """The values of `codes` (divided by `scale`, or by each block's scale)."""
        import numpy as np
        src = _host_view(codes, "decode codes", dtype=True)
        if out is None:
            out = np.empty(src.shape, dtype=np.float32)
        scales = None if block_scales is None else _host_view(block_scales, "block_scales")
        self._native.decode(src, _host_view(out, "decode out"), float(scale), scales, int(block_size), int(threads))
        return out

    @property
    def code_dtype(self):
        return self._native.code_dtype


def _empty_like(x):
    if _torch_module(x):
        import torch
        return torch.empty_like(x)
    import numpy as np
    return np.empty_like(x) if isinstance(x, np.ndarray) else None


_default_registry = None


def default_registry():
    """The one Registry of the bundled plugins (default_plugin_dir()) that every call without a
    `registry` uses (quantize's scale formats, matmul, transform, recipe.resolve, altgrad.torch):
    made on first use, and made again if it was closed."""
    global _default_registry
    if _default_registry is None or _default_registry.closed:
        _default_registry = Registry()
    return _default_registry


def _accumulator_format(accumulator):
    # A Format, or a plugin's name in the default registry (made once).
    if isinstance(accumulator, Format):
        return accumulator._native
    if isinstance(accumulator, str):
        return default_registry().format(accumulator)._native
    raise TypeError(f"matmul accumulator: expected a format plugin's name or an altgrad.Format, got "
                    f"{type(accumulator).__name__}")


def _matrix(x, what):
    """x as (a C-contiguous float32 NumPy array, whether it is x's transpose): a NumPy array, or a
    torch tensor's CPU copy. A transposed view (Fortran order) is passed as its transpose, uncopied."""
    import numpy as np
    if _torch_module(x):
        import torch
        if x.dtype != torch.float32:
            raise TypeError(f"{what}: expected a torch.float32 tensor, got {x.dtype}")
        x = x.detach().cpu().numpy()
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{what}: expected a numpy.ndarray or a torch.Tensor, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"{what}: expected a float32 array, got {x.dtype} (convert it first)")
    if x.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D array, got {x.ndim} dimensions")
    if not x.flags.c_contiguous and x.flags.f_contiguous:
        return x.T, True
    return np.ascontiguousarray(x), False


def _instruction_accumulator(accumulator):
    # The accumulator plugin's instance when `accumulator` names one (made once per name), else None.
    if not isinstance(accumulator, str):
        return None
    registry = default_registry()
    if registry._native.kind(accumulator) != "accumulator":
        return None
    made = registry._accumulators.get(accumulator)
    if made is None:
        made = registry._accumulators[accumulator] = registry._native.accumulator(accumulator, {})
    return made


def _operand_format(fmt, what):
    # A Format, or a format plugin's name in the default registry.
    if fmt is None:
        raise ValueError(f"matmul {what}: an instruction accumulator needs the operand's format (e.g. "
                         f"{what}=\"e4m3\")")
    return _accumulator_format(fmt)


def _row_major(x, what):
    # x as a C-contiguous float32 NumPy array of its own shape (a transposed view copied).
    import numpy as np
    m, transposed = _matrix(x, what)
    return np.ascontiguousarray(m.T) if transposed else m


def _matmul_instructions(acc, a, b, a_format, b_format, promote_every, scale_a, scale_b, threads):
    fa, fb = _operand_format(a_format, "a_format"), _operand_format(b_format, "b_format")
    sa = None if scale_a is None else _row_major(scale_a, "matmul scale_a")
    sb = None if scale_b is None else _row_major(scale_b, "matmul scale_b")
    return _native.matmul_instructions(acc, fa, fb, _row_major(a, "matmul a"), _row_major(b, "matmul b"),
                                       int(promote_every), sa, sb, int(threads))


def matmul(a, b, accumulator, rounding=None, mma_depth=None, promote_every=0, threads=1, a_format=None,
           b_format=None, scale_a=None, scale_b=None):
    """C = a @ b with the products summed through a low-precision accumulator (docs/accumulation.md).

    a: M x K, b: K x N, float32 NumPy arrays or torch tensors (a tensor is copied to the CPU; the
    result is then a tensor on a's device). The same C++ code as `altgrad-host gemm`, bit for bit;
    threads=N (0: every core) gives the same result.

    accumulator names a format plugin (the bundled plugins, or $ALTGRAD_PLUGIN_DIR's) or is an
    altgrad.Format: the accumulation model. Each chunk of `mma_depth` (default 32) elements of the
    reduction is summed exactly and added to the accumulator, rounded once to its format with
    `rounding` ("toward-zero", the default, or "nearest"); every `promote_every` elements (0: never)
    the accumulator is added into a float32 total.

    accumulator names an accumulator plugin (e.g. "sm90_wgmma_fp8"): the GPU's instructions, bit for
    bit. a and b hold values of a_format and b_format (format plugins' names or altgrad.Format; a
    value outside its format is an altgrad.Error naming the operand, index and value); the
    instructions run in sequence along K, C = the previous D; promote_every = N (a multiple of the
    instruction's depth) adds the chain into a float32 total every N elements, as cuBLAS's default
    FP8 GEMM does every 128. The block-scaled instructions take scale_a (M x K/block) and scale_b
    (K/block x N), one scale per block of 32 (UE8M0) or 16 (UE4M3) along K.
    """
    acc = _instruction_accumulator(accumulator)
    if acc is not None:
        if rounding is not None or mma_depth is not None:
            raise ValueError(f"matmul: rounding and mma_depth are the accumulation model's; '{accumulator}' "
                             f"is an accumulator plugin (its instruction fixes both)")
        c = _matmul_instructions(acc, a, b, a_format, b_format, promote_every, scale_a, scale_b, threads)
    else:
        for name, value in (("a_format", a_format), ("b_format", b_format), ("scale_a", scale_a),
                            ("scale_b", scale_b)):
            if value is not None:
                raise ValueError(f"matmul {name}: only for an accumulator plugin (an instruction); "
                                 f"'{accumulator}' is a format, the accumulation model's")
        fmt = _accumulator_format(accumulator)
        sa, a_transposed = _matrix(a, "matmul a")
        sb, b_transposed = _matrix(b, "matmul b")
        c = _native.matmul(fmt, sa, a_transposed, sb, b_transposed, str(rounding or "toward-zero"),
                           int(32 if mma_depth is None else mma_depth), int(promote_every), int(threads))
    if _torch_module(a):
        import torch
        return torch.from_numpy(c).to(a.device)
    return c
