"""Fake quantization of PyTorch models through AltGrad's format plugins.

    import altgrad.torch as aqt
    aqt.quantize_model(model, {"weight_format": "e4m3", "activation_format": "e4m3",
                               "gradient_format": "e5m2",
                               "rules": [{"pattern": "head", "format": "bf16"}]})

As the C++ trainer does (docs/config.md, "[quantization]"): each quantized
linear layer quantizes its weight and its input on the way forward, and the
gradient flowing back into its output on the way back, each with its own
format; the gradient passes the rounding straight through (the
straight-through estimator). The numerics are the plugins': tensors are handed
to them without a copy (float32, contiguous, CPU, or CUDA where the plugin has
a CUDA implementation).
"""
import numpy as _np
import torch

from . import Format, Registry, _native
from . import matmul as _matmul

__all__ = ["Quantizer", "FakeQuantize", "fake_quantize", "Accumulator", "AccumulatedLinear", "QuantLinear",
           "quantize_model", "quantized_layers", "default_registry", "PRODUCTS"]

_default_registry = None


def default_registry():
    """One Registry of the bundled plugins (altgrad.default_plugin_dir()), made on first use."""
    global _default_registry
    if _default_registry is None or _default_registry.closed:
        _default_registry = Registry()
    return _default_registry


_MASK64 = (1 << 64) - 1


def _mix(z):
    # SplitMix64's finaliser: distinct (seed, call, stream) give unrelated seeds.
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


class Quantizer:
    """One quantized tensor site: a format, its rounding and overflow, its scaling
    (none | current | delayed, the trainer's power-of-two scales: host/src/quant/scaling.cpp)
    or the fixed `scale` (scaling none) and, for stochastic rounding, a fresh seed per call
    derived from (seed, call, stream) (vary_seed=False: `seed` itself, every call).
    The last call's overflow and underflow counts are kept in `counts`."""

    def __init__(self, format, rounding="nearest", overflow="saturate", scaling="none", margin=0,
                 amax_history_len=16, amax_compute="max", seed=0, stream=0, scale=1.0, vary_seed=True,
                 registry=None):
        if isinstance(format, str):
            format = (registry or default_registry()).format(format)
        if not isinstance(format, Format):
            raise TypeError(f"format: expected a format name or an altgrad.Format, got {type(format).__name__}")
        self.format = format
        self.rounding = rounding
        self.overflow = overflow
        self.scaling = _native.ScalingState(scaling, int(amax_history_len), amax_compute, int(margin),
                                            float(format.info["max_finite"]))
        self._scaled = scaling != "none"
        self.scale = float(scale)
        self.vary_seed = bool(vary_seed)
        self.seed = int(seed)
        self.stream = int(stream)
        self.calls = 0
        self.counts = (0, 0)

    def __call__(self, x):
        """q(x*s)/s of a float32 tensor, as a new tensor (no autograd)."""
        scale = self.scale
        amax = None
        if self._scaled:
            amax = float(x.detach().abs().max()) if x.numel() > 0 else 0.0
            scale = self.scaling.scale_for(amax)
        seed = _mix(self.seed ^ _mix(self.calls ^ _mix(self.stream))) if self.vary_seed else self.seed
        self.calls += 1
        out, overflow, underflow = self.format.quantize(x.detach(), rounding=self.rounding, overflow=self.overflow,
                                                        scale=scale, seed=seed)
        if amax is not None:
            self.scaling.record(amax)
        self.counts = (overflow, underflow)
        return out

    def __repr__(self):
        return f"Quantizer({self.format.name!r}, {self.rounding!r})"


class FakeQuantize(torch.autograd.Function):
    """y = forward(x) (None: y = x); the gradient: backward(dy) (None: dy), straight through."""

    @staticmethod
    def forward(ctx, x, forward, backward):
        ctx.backward_quantizer = backward
        if forward is None:
            return x.view_as(x)
        return forward(x.contiguous())

    @staticmethod
    def backward(ctx, grad):
        q = ctx.backward_quantizer
        return (grad if q is None else q(grad.contiguous())), None, None


def _quantizer(format, rounding, overflow, scale, seed, registry):
    if format is None:
        return None
    return Quantizer(format, rounding=rounding, overflow=overflow, scale=scale, seed=seed, vary_seed=False,
                     registry=registry)


def fake_quantize(x, format=None, rounding="nearest", overflow="saturate", scale=1.0, seed=0,
                  grad_format=None, grad_rounding="stochastic", grad_scale=1.0, grad_seed=0, registry=None):
    """x quantized with `format` (a name, an altgrad.Format or None), differentiable: the
    gradient passes straight through, quantized with `grad_format` and `grad_rounding`
    (None: unchanged). Stochastic rounding uses the given seeds (offset 0)."""
    return FakeQuantize.apply(x, _quantizer(format, rounding, overflow, scale, seed, registry),
                              _quantizer(grad_format, grad_rounding, overflow, grad_scale, grad_seed, registry))


PRODUCTS = ("forward", "input_gradient", "weight_gradient")
_ACCUMULATOR_KEYS = ("format", "params", "rounding", "mma_depth", "promote_every")


class Accumulator:
    """A product's accumulator, as the config's `accumulator = {...}` (docs/accumulation.md): `format`
    (a plugin's name or an altgrad.Format), `params` for a named plugin, `rounding` ("toward-zero" or
    "nearest"), `mma_depth` (G, 32) and `promote_every` (N, 0: never). Called with a and b, it is
    altgrad.matmul(a, b, ...) on the CPU, every torch thread (the same bits for any number)."""

    def __init__(self, format, params=None, rounding="toward-zero", mma_depth=32, promote_every=0, registry=None):
        if isinstance(format, str):
            format = (registry or default_registry()).format(format, params)
        elif params:
            raise ValueError("accumulator params: give them with the plugin's name, not with a Format")
        self.format, self.rounding = format, rounding
        self.mma_depth, self.promote_every = int(mma_depth), int(promote_every)
        _matmul(_np.zeros((1, 1), _np.float32), _np.zeros((1, 1), _np.float32), self.format, rounding,
                        self.mma_depth, self.promote_every)  # refuses what cannot be, here and now

    def __call__(self, a, b):
        return _matmul(a, b, self.format, self.rounding, self.mma_depth, self.promote_every,
                               threads=torch.get_num_threads())

    def __repr__(self):
        return (f"Accumulator({self.format.name!r}, rounding={self.rounding!r}, mma_depth={self.mma_depth}, "
                f"promote_every={self.promote_every})")


def _accumulator(spec, where, registry):
    # None, "none", an Accumulator, or its keys as a dict (the config's inline table).
    if spec is None or spec == "none" or isinstance(spec, Accumulator):
        return None if spec == "none" else spec
    if not isinstance(spec, dict):
        raise TypeError(f"{where}: expected a dict of {', '.join(_ACCUMULATOR_KEYS)}, an Accumulator or 'none', "
                        f"got {type(spec).__name__}")
    for k in spec:
        if k not in _ACCUMULATOR_KEYS:
            raise ValueError(f"{where}.{k}: unknown key; an accumulator has {', '.join(_ACCUMULATOR_KEYS)}")
    if "format" not in spec:
        raise ValueError(f"{where}.format: missing (the accumulator's format plugin, e.g. 'fp16')")
    try:
        return Accumulator(registry=registry, **spec)
    except (ValueError, RuntimeError) as e:
        raise ValueError(f"{where}: {e}") from e


class AccumulatedLinear(torch.autograd.Function):
    """y = x @ w.T + b with each of the three products through its accumulator (None: torch's)."""

    @staticmethod
    def forward(ctx, x, w, b, accumulators):
        ctx.accumulators = accumulators
        x2 = x.reshape(-1, w.shape[1])
        ctx.save_for_backward(x2, w)
        ctx.has_bias = b is not None
        fwd = accumulators[0]
        y = (fwd(x2, w.t()) if fwd else x2 @ w.t()).reshape(*x.shape[:-1], w.shape[0])
        return y if b is None else y + b

    @staticmethod
    def backward(ctx, dy):
        x2, w = ctx.saved_tensors
        _, dx_acc, dw_acc = ctx.accumulators
        dy2 = dy.reshape(-1, w.shape[0])
        dx = (dx_acc(dy2, w) if dx_acc else dy2 @ w).reshape(*dy.shape[:-1], w.shape[1])
        dw = dw_acc(dy2.t(), x2) if dw_acc else dy2.t() @ x2
        return dx, dw, dy2.sum(0) if ctx.has_bias else None, None


class QuantLinear(torch.nn.Linear):
    """nn.Linear whose weight and input are fake-quantized on the way forward, and whose
    output gradient on the way back, each with its own format (None: that direction stays
    float32). Rounding, overflow and scaling as the config's [quantization] keys.
    `accumulators`: {"forward" | "input_gradient" | "weight_gradient": an accumulator dict
    (format, params, rounding, mma_depth, promote_every), an Accumulator or "none"}."""

    def __init__(self, in_features, out_features, bias=True, *, weight=None, activation=None, gradient=None,
                 forward_rounding="nearest", backward_rounding="stochastic", overflow="saturate", scaling="none",
                 margin=0, amax_history_len=16, amax_compute="max", seed=0, stream=0, accumulators=None,
                 registry=None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        registry = registry or default_registry()

        def site(format, rounding, index):
            if format is None:
                return None
            return Quantizer(format, rounding=rounding, overflow=overflow, scaling=scaling, margin=margin,
                             amax_history_len=amax_history_len, amax_compute=amax_compute, seed=seed,
                             stream=3 * stream + index, registry=registry)

        self.weight_quantizer = site(weight, forward_rounding, 0)
        self.activation_quantizer = site(activation, forward_rounding, 1)
        self.gradient_quantizer = site(gradient, backward_rounding, 2)
        accumulators = dict(accumulators or {})
        for k in accumulators:
            if k not in PRODUCTS:
                raise ValueError(f"accumulators: unknown product {k!r}; the products are {', '.join(PRODUCTS)}")
        self.accumulators = tuple(_accumulator(accumulators.get(p), f"accumulators.{p}", registry)
                                  for p in PRODUCTS)

    @classmethod
    def from_linear(cls, linear, **kwargs):
        """A QuantLinear sharing `linear`'s parameters (an optimizer holding them keeps working)."""
        q = cls(linear.in_features, linear.out_features, bias=linear.bias is not None,
                device=linear.weight.device, **kwargs)
        q.weight = linear.weight
        q.bias = linear.bias
        return q

    def formats(self):
        """(weight, activation, gradient) format names; None where not quantized."""
        return tuple(None if q is None else q.format.name
                     for q in (self.weight_quantizer, self.activation_quantizer, self.gradient_quantizer))

    def forward(self, x):
        w = self.weight if self.weight_quantizer is None else FakeQuantize.apply(self.weight, self.weight_quantizer,
                                                                                None)
        if self.activation_quantizer is not None:
            x = FakeQuantize.apply(x, self.activation_quantizer, None)
        if any(self.accumulators):
            y = AccumulatedLinear.apply(x, w, self.bias, self.accumulators)
        else:
            y = torch.nn.functional.linear(x, w, self.bias)
        if self.gradient_quantizer is not None:
            y = FakeQuantize.apply(y, None, self.gradient_quantizer)
        return y

    def extra_repr(self):
        w, a, g = self.formats()
        extra = "".join(f", {p}={acc!r}" for p, acc in zip(PRODUCTS, self.accumulators) if acc)
        return super().extra_repr() + f", weight={w}, activation={a}, gradient={g}" + extra


_SECTION_KEYS = ("weight_format", "activation_format", "gradient_format", "forward_rounding", "backward_rounding",
                 "overflow", "scaling", "amax_history_len", "amax_compute", "margin", "seed", "rules") + PRODUCTS
_RULE_KEYS = ("pattern", "format", "weight", "activation", "gradient") + PRODUCTS


def _product_accumulators(table, where):
    # {"forward": {"accumulator": ...}, ...} of a section or a rule -> {product: accumulator spec}
    out = {}
    for p in PRODUCTS:
        if p not in table:
            continue
        entry = table[p]
        if not isinstance(entry, dict) or set(entry) - {"accumulator"}:
            raise ValueError(f"{where}{p}: expected {{'accumulator': ...}}, got {entry!r}")
        if "accumulator" in entry:
            out[p] = entry["accumulator"]
    return out


def _rule_tuples(rules):
    # (pattern, weight, activation, gradient), `format` folded in as the config loader does.
    out = []
    for i, rule in enumerate(rules):
        key = f"rules[{i}]"
        if not isinstance(rule, dict):
            raise TypeError(f"{key}: expected a dict (pattern=..., format=...), got {type(rule).__name__}")
        for k in rule:
            if k not in _RULE_KEYS:
                raise ValueError(f"{key}.{k}: unknown key; a rule has {', '.join(_RULE_KEYS)}")
        if "pattern" not in rule or not isinstance(rule["pattern"], str):
            raise ValueError(f"{key}.pattern: missing (every rule needs one, e.g. 'blocks.*.attn.*')")
        every = rule.get("format")
        directions = [rule.get(d, every) for d in ("weight", "activation", "gradient")]
        if all(d is None for d in directions) and not any(p in rule for p in PRODUCTS):
            raise ValueError(f"{key}: sets no format: give format (all three directions) or weight, activation "
                             "or gradient, or a product's accumulator")
        out.append((rule["pattern"], *directions))
    return out


def _check_rules_reach(rules, layers):
    # As the config loader: a rule matching no layer, or only layers an earlier rule takes, is a mistake.
    for i, (pattern, *_) in enumerate(rules):
        matched = [layer for layer in layers if _native.pattern_matches(pattern, layer)]
        if not matched:
            raise ValueError(f"rules[{i}].pattern: '{pattern}' matches no nn.Linear of this model; its layers: "
                             + ", ".join(layers))
        taken = [next(j for j in range(i + 1) if _native.pattern_matches(rules[j][0], layer)) for layer in matched]
        if all(j < i for j in taken):
            raise ValueError(f"rules[{i}].pattern: '{pattern}' never applies: every layer it matches is taken by an "
                             f"earlier rule (rules[{taken[0]}], '{rules[taken[0]][0]}', e.g. {matched[0]}); "
                             "the first matching rule wins")


def quantize_model(model, rules, registry=None):
    """Replace the model's nn.Linear layers by QuantLinear ones (in place; returns the model).

    `rules` is the config's [quantization] section as a dict (docs/python.md): the
    default formats `weight_format`, `activation_format`, `gradient_format` (left out:
    layers no rule matches stay nn.Linear), `forward_rounding`, `backward_rounding`,
    `overflow`, `scaling`, `amax_history_len`, `amax_compute`, `margin`, `seed`, and
    `rules`: [{"pattern": glob over module names, "format" and/or "weight", "activation",
    "gradient"}], the first match deciding, as in configs. A plain list is the rules alone.
    Accumulators as in configs: `forward`, `input_gradient`, `weight_gradient` each
    {"accumulator": {format, params, rounding, mma_depth, promote_every} or "none"}, in the
    section and in rules (the first matching rule that gives a product's decides).
    """
    section = {"rules": rules} if isinstance(rules, (list, tuple)) else dict(rules)
    for k in section:
        if k not in _SECTION_KEYS:
            raise ValueError(f"{k}: unknown key; the section has {', '.join(_SECTION_KEYS)}")
    rule_list = _rule_tuples(section.get("rules", []))
    section_accumulators = _product_accumulators(section, "")
    rule_accumulators = [_product_accumulators(r, f"rules[{i}].") for i, r in enumerate(section.get("rules", []))]
    linears = [(name, m) for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and not isinstance(m, QuantLinear)]
    layer_names = [name for name, _ in linears]
    _check_rules_reach(rule_list, layer_names)
    defaults = [section.get(k) or "" for k in ("weight_format", "activation_format", "gradient_format")]
    options = {k: section[k] for k in ("forward_rounding", "backward_rounding", "overflow", "scaling",
                                       "amax_history_len", "amax_compute", "margin", "seed") if k in section}
    registry = registry or default_registry()
    for index, (name, linear) in enumerate(linears):
        weight, activation, gradient, rule = _native.formats_for(*defaults, rule_list, name)
        accumulators = {**section_accumulators, **(rule_accumulators[rule] if rule >= 0 else {})}
        if not (weight or activation or gradient or any(a not in (None, "none") for a in accumulators.values())):
            continue
        q = QuantLinear.from_linear(linear, weight=weight or None, activation=activation or None,
                                    gradient=gradient or None, stream=index, accumulators=accumulators,
                                    registry=registry, **options)
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, q)
    return model


def quantized_layers(model):
    """{module name: (weight, activation, gradient) formats} of the model's QuantLinear layers."""
    return {name: m.formats() for name, m in model.named_modules() if isinstance(m, QuantLinear)}
