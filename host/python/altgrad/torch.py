"""Fake quantization of PyTorch models through AltGrad's format plugins.

    import altgrad.torch as aqt
    aqt.quantize_model(model, "configs/recipes/nvfp4.toml")
    aqt.quantize_model(model, {"weight_format": "e4m3", "activation_format": "e4m3",
                               "gradient_format": "e5m2",
                               "rules": [{"pattern": "head", "format": "bf16"}]})

A quantized linear layer is the trainer's own (host/src/train/quant_plan.cpp, docs/recipes.md):
altgrad._train binds the trainer's plan, built from the recipe by the trainer's code, and its
autograd function, called on PyTorch's tensors. So a QuantLinear quantizes, transforms and sums its
three products exactly as `altgrad-host run` does, bit for bit, on the CPU or, where the format
plugins have CUDA kernels, on a GPU. The gradient passes the rounding straight through.
"""
import torch

from . import Format, _native, _train, default_registry
from . import recipe as _recipe

__all__ = ["Quantizer", "FakeQuantize", "fake_quantize", "QuantLinear", "quantize_model", "quantized_layers",
           "default_registry", "PRODUCTS"]

PRODUCTS = _recipe.PRODUCTS


class Quantizer:
    """One tensor's quantization: q(x*s)/s in `format` with its rounding and overflow, the scale s
    by `scaling` (none: the fixed `scale`; current | delayed: the trainer's per-tensor scaling
    code, host/src/quant/scaling.cpp, with margin, amax_history_len, amax_compute, tensor_scale,
    first_scale). Stochastic rounding takes a fresh seed per call derived from (seed, call, stream)
    as the trainer derives a step's (vary_seed=False: `seed` itself, every call), and the top
    sr_bits of each random word. The last call's overflow and underflow counts are in `counts`."""

    def __init__(self, format, rounding="nearest", overflow="saturate", scaling="none", margin=0,
                 amax_history_len=16, amax_compute="max", seed=0, stream=0, scale=1.0, vary_seed=True,
                 registry=None, sr_bits=32, tensor_scale="pow2", first_scale="amax", params=None):
        if isinstance(format, str):
            format = (registry or default_registry()).format(format, params)
        if not isinstance(format, Format):
            raise TypeError(f"format: expected a format name or an altgrad.Format, got {type(format).__name__}")
        self.format, self.rounding, self.overflow = format, rounding, overflow
        self.scaling = _native.ScalingState(scaling, int(amax_history_len), amax_compute, int(margin),
                                            float(format.info["max_finite"]), tensor_scale, first_scale)
        self._scaled = scaling != "none"
        self.scale, self.sr_bits = float(scale), int(sr_bits)
        self.seed, self.stream, self.vary_seed = int(seed), int(stream), bool(vary_seed)
        self.calls = 0
        self.counts = (0, 0)

    def __call__(self, x):
        """q(x*s)/s of a float32 tensor, as a new tensor (no autograd)."""
        seed = _native.seed_of(self.seed, self.calls, self.stream) if self.vary_seed else self.seed
        self.calls += 1
        x = x.detach().contiguous()
        scale = self.scale
        if self._scaled:
            amax = float(x.abs().max()) if x.numel() > 0 else 0.0
            scale = self.scaling.scale_for(amax)
            self.scaling.record(amax)
        out, overflow, underflow = self.format.quantize(x, rounding=self.rounding, overflow=self.overflow,
                                                        scale=scale, seed=seed, sr_bits=self.sr_bits)
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


def _simple_recipe(weight, activation, gradient, accumulators, **keys):
    # QuantLinear's simple form as the [quantization] section it means.
    section = {"weight_format": weight or "fp32", "activation_format": activation or "fp32",
               "gradient_format": gradient or "fp32", **keys}
    for product, accumulator in dict(accumulators or {}).items():
        if product not in PRODUCTS:
            raise ValueError(f"accumulators: unknown product {product!r}; the products are {', '.join(PRODUCTS)}")
        section[product] = {"accumulator": accumulator}
    return section


class QuantLinear(torch.nn.Linear):
    """nn.Linear whose three matrix products are the trainer's (docs/recipes.md): forward y = x·Wᵀ,
    input gradient dx = dy·W and weight gradient dW = dyᵀ·x, each operand quantized along its
    product's reduction dimension, after the product's transform if any, each product summed by
    its accumulator (a format's chunked model or a GPU instruction) if any.

    Either a recipe: `recipe` (a config file's path, a config dict, a [quantization] dict, or an
    altgrad.recipe.Recipe) resolved for the layer named `layer` (what the recipe's rules match),
    with `seed` (None: the recipe's training.seed) and `overrides` ("KEY=VALUE" as --set). A Recipe
    resolved for a model's layers gives them one plan, as the trainer's: layer k of L draws the
    random bits of the trainer's layer k, its forward calls counted as the trainer's steps (from
    0), so the same recipe, seed, place and inputs give the trainer's outputs and gradients.
    Or the simple form: `weight`, `activation`, `gradient` formats (None: that operand stays
    float32), rounding, overflow and scaling as the config's [quantization] keys, and
    `accumulators`: {"forward" | "input_gradient" | "weight_gradient": the config's accumulator
    table (format, params, rounding, mma_depth, promote_every, or instruction) or "none"}."""

    def __init__(self, in_features, out_features, bias=True, *, weight=None, activation=None, gradient=None,
                 forward_rounding="nearest", backward_rounding="stochastic", overflow="saturate", scaling="none",
                 margin=0, amax_history_len=16, amax_compute="max", seed=None, accumulators=None, recipe=None,
                 layer="layer", overrides=(), registry=None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        if recipe is not None and (weight or activation or gradient or accumulators):
            raise ValueError("QuantLinear: give a recipe, or weight/activation/gradient formats and "
                             "accumulators, not both")
        if recipe is None:
            recipe = _simple_recipe(weight, activation, gradient, accumulators, forward_rounding=forward_rounding,
                                    backward_rounding=backward_rounding, overflow=overflow, scaling=scaling,
                                    margin=margin, amax_history_len=amax_history_len, amax_compute=amax_compute)
        self.layer_name = str(layer)
        registry = registry or default_registry()
        if not isinstance(recipe, _recipe.Recipe):
            recipe = _recipe.resolve(recipe, [self.layer_name], overrides, registry)
        elif overrides:
            raise ValueError("QuantLinear: overrides apply when a recipe is resolved; resolve it with them")
        if self.layer_name not in recipe.layers:
            raise ValueError(f"QuantLinear: the recipe was resolved for {', '.join(recipe.layers)}, "
                             f"not for {self.layer_name!r}")
        self.recipe = recipe
        self.products = recipe.layers[self.layer_name]  # per product: transform, accumulator, operands
        self._plan = recipe.plan(registry, seed)
        self._index = list(recipe.layers).index(self.layer_name)
        self._steps = 0

    @classmethod
    def from_linear(cls, linear, **kwargs):
        """A QuantLinear sharing `linear`'s parameters (an optimizer holding them keeps working)."""
        q = cls(linear.in_features, linear.out_features, bias=linear.bias is not None,
                device=linear.weight.device, **kwargs)
        q.weight = linear.weight
        q.bias = linear.bias
        return q

    @property
    def seed(self):
        return self._plan.seed

    def _per_product(self, key):
        # Each product's entry under `key`, in PRODUCTS' order; None for all with quantization off.
        enabled = self.recipe.globals["enabled"]
        return tuple(self.products[p][key] if enabled else None for p in PRODUCTS)

    @property
    def transforms(self):
        """Each product's transform ({"name", "params"}) or None, in PRODUCTS' order."""
        return self._per_product("transform")

    @property
    def accumulators(self):
        """Each product's accumulator (the recipe's table) or None, in PRODUCTS' order."""
        return self._per_product("accumulator")

    def formats(self):
        """(weight, activation, gradient) formats of the operands' first uses; None where not quantized."""
        if not self.recipe.globals["enabled"]:
            return (None, None, None)
        first = (self.products["forward"]["w"], self.products["forward"]["x"], self.products["input_gradient"]["dy"])
        return tuple(None if o["format"] == "fp32" else o["format"] for o in first)

    def statistics(self):
        """The layer's quantized tensors at their last use, as a run's tensor lines (docs/metrics.md):
        a dict each of tensor, role, format, scale, amax, overflow, underflow, count, block statistics."""
        return self._plan.statistics(self._index)

    def forward(self, x):
        if not self.recipe.quantizes(self.layer_name):
            return torch.nn.functional.linear(x, self.weight, self.bias)
        self._steps += 1
        return self._plan.linear(x, self.weight, self.bias, self._index, self._steps - 1)

    def extra_repr(self):
        w, a, g = self.formats()
        extra = "".join(f", {p}.accumulator={acc!r}" for p, acc in zip(PRODUCTS, self.accumulators) if acc)
        extra += "".join(f", {p}.transform={t['name']!r}" for p, t in zip(PRODUCTS, self.transforms) if t)
        return super().extra_repr() + f", weight={w}, activation={a}, gradient={g}" + extra


def quantize_model(model, recipe, registry=None, seed=None, overrides=()):
    """Replace the model's nn.Linear layers by QuantLinear ones (in place; returns the model).

    `recipe`: a config file's path (configs/recipes/nvfp4.toml), a config dict (its parsed TOML),
    or the [quantization] section alone as a dict or a list of rules (docs/python.md). Its rules
    take the model's nn.Linear modules by name pattern (model.named_modules()' names) or by place
    (last = N, last_fraction = f: in named_modules() order), the first rule that takes one deciding,
    and every key means what it means to the trainer: the recipe is read by the C++ config reader
    (altgrad.recipe.resolve), so a mistake is its one-line error naming the key. A section dict's
    left-out formats are "fp32" and its scaling "none" (a config file's defaults are e5m2 and
    delayed), so it quantizes only what it names. Layers that quantize nothing, with no transform
    and no accumulator, stay nn.Linear. The layers share one plan, the trainer's for these layers
    in this order; `seed` (None: the recipe's training.seed) keys stochastic rounding and per-call
    transforms; `overrides` are --set's "KEY=VALUE"s.
    """
    linears = [(name, m) for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and not isinstance(m, QuantLinear)]
    registry = registry or default_registry()
    resolved = _recipe.resolve(recipe, [name for name, _ in linears], overrides, registry)
    for name, linear in linears:
        if not resolved.quantizes(name):
            continue
        q = QuantLinear.from_linear(linear, recipe=resolved, layer=name, seed=seed, registry=registry)
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, q)
    return model


def quantized_layers(model):
    """{module name: (weight, activation, gradient) formats} of the model's QuantLinear layers."""
    return {name: m.formats() for name, m in model.named_modules() if isinstance(m, QuantLinear)}
