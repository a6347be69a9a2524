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

from . import Format, Registry, _native, default_registry
from . import matmul as _matmul
from . import recipe as _recipe

__all__ = ["Quantizer", "FakeQuantize", "fake_quantize", "Accumulator", "QuantLinear",
           "quantize_model", "quantized_layers", "default_registry", "PRODUCTS"]

class Quantizer:
    """One quantized operand use: a format, its rounding and overflow, and its scaling.

    granularity "tensor": one scale, by `scaling` (none | current | delayed: the trainer's
    power-of-two scales, or float32 ones with tensor_scale="fp32": host/src/quant/scaling.cpp;
    first_scale="one": delayed scaling's scale is 1 until its history has an amax) or the fixed
    `scale` (scaling none). "row" or "block": one scale per row of the last
    dimension, or per block of block_size along it (block_rows > 1: tiles of block_rows x
    block_size of a 2-D tensor), derived by scale_rule on scale_format's values, as the trainer
    derives them (altgrad.Format.quantize's block_size). pre_scale c: q(x*s*c)/(s*c).
    Stochastic rounding takes a fresh seed per call derived from (seed, call, stream) as the
    trainer derives a step's (host/src/quant/seeds.hpp; vary_seed=False: `seed` itself, every call; a
    caller's `seed`: that one), and the top sr_bits of each random word.
    The last call's overflow and underflow counts are kept in `counts`."""

    def __init__(self, format, rounding="nearest", overflow="saturate", scaling="none", margin=0,
                 amax_history_len=16, amax_compute="max", seed=0, stream=0, scale=1.0, vary_seed=True,
                 registry=None, granularity="tensor", block_size=32, block_rows=1, scale_format="pow2",
                 scale_rule="mx_floor", pre_scale=1.0, sr_bits=32, tensor_scale="pow2", first_scale="amax",
                 params=None):
        registry = registry or default_registry()
        if isinstance(format, str):
            format = registry.format(format, params)
        if not isinstance(format, Format):
            raise TypeError(f"format: expected a format name or an altgrad.Format, got {type(format).__name__}")
        if granularity not in ("tensor", "row", "block"):
            raise ValueError(f"granularity: expected tensor, row or block, got {granularity!r}")
        self.format = format
        self.rounding = rounding
        self.overflow = overflow
        self.scaling = _native.ScalingState(scaling, int(amax_history_len), amax_compute, int(margin),
                                            float(format.info["max_finite"]), tensor_scale, first_scale)
        self._scaled = scaling != "none"
        self.scale = float(scale)
        self.last_scale = self.scale
        self.granularity = granularity
        self.block_size, self.block_rows = int(block_size), int(block_rows)
        self.scale_rule = scale_rule
        # A plugin's scales (e.g. e4m3): a Format (made with its parameters), or a name in this
        # registry (made without); "fp32" and "pow2" by name.
        self.scale_format = (scale_format if isinstance(scale_format, Format) or scale_format in ("fp32", "pow2")
                             else registry.format(scale_format))
        self.pre_scale = float(pre_scale)
        self.sr_bits = int(sr_bits)
        self.vary_seed = bool(vary_seed)
        self.seed = int(seed)
        self.stream = int(stream)
        self.calls = 0
        self.counts = (0, 0)
        self.where = None  # set by a recipe: "SOURCE: key 'K' (layer)", K the key that gave block_rows

    @property
    def block_scaled(self):
        return self.granularity != "tensor"

    def __call__(self, x, again=False, seed=None):
        """q(x*s)/s of a float32 tensor, as a new tensor (no autograd). again=True: a second copy
        of the tensor last quantized (along other rows, or transformed): per tensor, at that
        copy's scale, its amax not recorded. seed: stochastic rounding's (None: this call's)."""
        if seed is None:
            seed = _native.seed_of(self.seed, self.calls, self.stream) if self.vary_seed else self.seed
        self.calls += 1
        x = x.detach().contiguous()
        if self.block_scaled:
            k = x.shape[-1] if x.dim() else 1
            block = k if self.granularity == "row" else max(1, min(self.block_size, k))
            shape = dict(block_shape=(self.block_rows, block)) if self.block_rows > 1 else dict(block_size=block)
            try:
                out, overflow, underflow = self.format.quantize(
                    x.reshape(-1, k) if self.block_rows > 1 else x, rounding=self.rounding,
                    overflow=self.overflow, seed=seed, sr_bits=self.sr_bits, scale_rule=self.scale_rule,
                    scale_format=self.scale_format, pre_scale=self.pre_scale, **shape)
            except _native.Error as e:  # tiles that do not divide x: the key that gave them
                if self.where is None or self.block_rows == 1:
                    raise
                raise _native.Error(f"{self.where}: {e}") from e
            self.counts = (overflow, underflow)
            return out.reshape(x.shape)
        scale, amax = self.scale, None
        if again:
            scale = self.last_scale
        elif self._scaled:
            amax = float(x.abs().max()) if x.numel() > 0 else 0.0
            scale = self.scaling.scale_for(amax)
        out, overflow, underflow = self.format.quantize(x, rounding=self.rounding, overflow=self.overflow,
                                                        scale=scale * self.pre_scale, seed=seed,
                                                        sr_bits=self.sr_bits)
        if amax is not None:
            self.scaling.record(amax)
        if not again:
            self.last_scale = scale
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


PRODUCTS = _recipe.PRODUCTS
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


def _transformed(t, transform, seed, where):
    # t [rows, K] through the product's transform along K, its reduction dimension (None: t itself).
    if transform is None:
        return t
    d = transform.info["block_size"]
    if t.shape[-1] % d:
        raise ValueError(f"{where}: transform {transform.name!r} (d = {d}) along a reduction dimension of "
                         f"{t.shape[-1]}, which d does not divide")
    return transform.apply(t.detach().contiguous(), seed=seed)


class _QuantizedLinear(torch.autograd.Function):
    """The trainer's quantized_linear (host/src/train/quant_plan.cpp) over a QuantLinear's uses:
    forward y = q(x)·q(W)ᵀ + b, input gradient dx = q(dy)·q(W), weight gradient dW = q(dy)ᵀ·q(x),
    each operand quantized (after the product's transform, if any) along that product's reduction
    dimension; a second use is its first copy, or quantized again (QuantLinear._second_copy)."""

    @staticmethod
    def forward(ctx, x, w, b, layer):
        x2, w2 = x.detach().reshape(-1, w.shape[1]), w.detach()
        step = layer._next_step()
        seed = layer._transform_seed(step, 0)
        tf = layer.transforms[0]
        qx = layer._first("x", step)(_transformed(x2, tf, seed, layer._where(0)))
        qw = layer._first("w", step)(_transformed(w2, tf, seed, layer._where(0)))
        ctx.save_for_backward(x2, w2, qx, qw)
        ctx.layer, ctx.step, ctx.has_bias, ctx.shape = layer, step, b is not None, x.shape
        fwd = layer.accumulators[0]
        y = qx @ qw.t() if fwd is None else fwd(qx, qw.t())  # then the bias: the trainer's order
        if b is not None:
            y = y + b
        return y.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, dy):
        x2, w2, qx, qw = ctx.saved_tensors
        layer, step = ctx.layer, ctx.step
        tf, tdx, tdw = layer.transforms
        sdx, sdw = layer._transform_seed(step, 1), layer._transform_seed(step, 2)
        dy2 = dy.detach().reshape(-1, w2.shape[0]).contiguous()
        qdy = layer._first("dy", step)(_transformed(dy2, tdx, sdx, layer._where(1)))
        qw_cols = layer._second_copy("w", step, w2.t(), qw.t(), tf is not None, tdx, sdx)  # [in, out]: along out
        qdy_t = layer._second_copy("dy", step, dy2.t(), qdy.t(), tdx is not None, tdw, sdw)  # [out, tokens]
        qx_t = layer._second_copy("x", step, x2.t(), qx.t(), tf is not None, tdw, sdw)  # [in, tokens]
        _, dx_acc, dw_acc = layer.accumulators
        dx = qdy @ qw_cols.t() if dx_acc is None else dx_acc(qdy, qw_cols.t())
        dw = qdy_t @ qx_t.t() if dw_acc is None else dw_acc(qdy_t, qx_t.t())
        # The bias gradient: dy's input-gradient copy in the layer's own basis (as the trainer).
        db = None
        if ctx.has_bias:
            db = (qdy if tdx is None else tdx.apply(qdy.contiguous(), inverse=True, seed=sdx)).sum(0)
        return dx.reshape(ctx.shape), dw, db, None


# The first use of each operand, and the product of each second use (config::first_use_of).
_FIRST_USE = {"x": "forward", "w": "forward", "dy": "input_gradient"}
_SECOND_USE = {"w": "input_gradient", "x": "weight_gradient", "dy": "weight_gradient"}
_ROLE = {"w": 0, "x": 1, "dy": 2}  # quant::operand_role: a layer's random streams, as the trainer's sites


class QuantLinear(torch.nn.Linear):
    """nn.Linear whose three matrix products are quantized as the trainer's (docs/recipes.md):
    forward y = x·Wᵀ, input gradient dx = dy·W and weight gradient dW = dyᵀ·x, each operand
    quantized along the product's reduction dimension, after the product's transform if any,
    and each product summed by its accumulator if any.

    Either a recipe: `recipe` (a config file's path, a config dict, a [quantization] dict, or an
    altgrad.recipe.Recipe) resolved for the layer named `layer` (what the recipe's rules match),
    with `seed` (None: the recipe's training.seed) and `overrides` ("KEY=VALUE" as --set); it is
    layer `stream` of `layers` linear layers (None: its place among the Recipe's layers, and their
    number), which keys its random bits as the trainer keys layer k of L's, its forward calls
    counted as the trainer's steps (from 0): the same recipe, seed, layer and inputs give the
    trainer's outputs and gradients, bit for bit.
    Or the simple form: `weight`, `activation`, `gradient` formats (None: that operand stays
    float32), each tensor's second use as its first, rounding, overflow and scaling as the
    config's [quantization] keys, and `accumulators`: {"forward" | "input_gradient" |
    "weight_gradient": an accumulator dict (format, params, rounding, mma_depth,
    promote_every), an Accumulator or "none"} (`stream`: 0 and `layers`: stream + 1 when None)."""

    def __init__(self, in_features, out_features, bias=True, *, weight=None, activation=None, gradient=None,
                 forward_rounding="nearest", backward_rounding="stochastic", overflow="saturate", scaling="none",
                 margin=0, amax_history_len=16, amax_compute="max", seed=None, stream=None, layers=None,
                 accumulators=None, recipe=None, layer="layer", overrides=(), registry=None, device=None,
                 dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        registry = registry or default_registry()
        self.layer_name = str(layer)
        self._steps = 0
        self.transforms = (None, None, None)
        if recipe is not None:
            if weight or activation or gradient or accumulators:
                raise ValueError("QuantLinear: give a recipe, or weight/activation/gradient formats and "
                                 "accumulators, not both")
            self._from_recipe(recipe, seed, overrides, registry)
            self._place(stream, layers, list(self._recipe_layers))
            return
        self.seed = int(seed or 0)
        self._place(stream, layers, None)

        def site(format, rounding):
            if format is None or format == "fp32":
                return None
            return Quantizer(format, rounding=rounding, overflow=overflow, scaling=scaling, margin=margin,
                             amax_history_len=amax_history_len, amax_compute=amax_compute, seed=self.seed,
                             registry=registry)

        self.first_uses = {"w": site(weight, forward_rounding), "x": site(activation, forward_rounding),
                           "dy": site(gradient, backward_rounding)}
        self.second_uses = {o: (False, None, "unquantized") for o in _SECOND_USE}
        accumulators = dict(accumulators or {})
        for k in accumulators:
            if k not in PRODUCTS:
                raise ValueError(f"accumulators: unknown product {k!r}; the products are {', '.join(PRODUCTS)}")
        self.accumulators = tuple(_accumulator(accumulators.get(p), f"accumulators.{p}", registry)
                                  for p in PRODUCTS)

    def _from_recipe(self, recipe, seed, overrides, registry):
        if not isinstance(recipe, _recipe.Recipe):
            recipe = _recipe.resolve(recipe, [self.layer_name], overrides, registry)
        elif overrides:
            raise ValueError("QuantLinear: overrides apply when a recipe is resolved; resolve it with them")
        if self.layer_name not in recipe.layers:
            raise ValueError(f"QuantLinear: the recipe was resolved for {', '.join(recipe.layers)}, "
                             f"not for {self.layer_name!r}")
        self.seed = int(recipe.seed if seed is None else seed)
        self._recipe_layers = tuple(recipe.layers)
        g, products = recipe.globals, recipe.layers[self.layer_name]
        enabled = g["enabled"]

        def keyed(spec, make):
            # A plugin's refusal names the recipe key that chose the plugin, as a run's does.
            try:
                return make()
            except (_native.Error, ValueError, RuntimeError) as e:
                raise _native.Error(f"{recipe.where(spec['key'], self.layer_name)}: {e}") from e

        def scale_format(name):
            # With the parameters the recipe gives that format, as the trainer makes it.
            return name if name in ("fp32", "pow2") else registry.format(name, recipe.params.get(name))

        def site(settings):
            if not enabled or settings["format"] == "fp32":
                return None
            q = keyed(settings, lambda: Quantizer(
                             settings["format"], rounding=settings["rounding"], overflow=g["overflow"],
                             scaling=g["scaling"], margin=g["margin"], amax_history_len=g["amax_history_len"],
                             amax_compute=g["amax_compute"], seed=self.seed, registry=registry,
                             granularity=settings["granularity"], block_size=settings["block_size"],
                             block_rows=settings["block_rows"], scale_format=scale_format(settings["scale_format"]),
                             scale_rule=settings["scale_rule"], pre_scale=settings["pre_scale"],
                             sr_bits=g["sr_bits"], tensor_scale=g["tensor_scale"], first_scale=g["first_scale"],
                             params=recipe.params.get(settings["format"])))
            q.where = recipe.where(settings["tile_key"], self.layer_name)  # a tile's error names block_rows
            return q

        self.first_uses = {o: site(products[p][o]) for o, p in _FIRST_USE.items()}
        self.second_uses = {}
        for o, p in _SECOND_USE.items():
            settings = products[p][o]
            self.second_uses[o] = (settings["own"], site(settings) if settings["own"] else None, settings["source"])

        def transform(spec):
            if spec is None or not enabled:
                return None
            return keyed(spec, lambda: registry.transform(spec["name"], spec["params"]))

        def accumulator(spec, p):
            if spec is None or not enabled:
                return None
            if spec["instruction"]:
                raise _native.Error(f"{recipe.where(spec['key'], self.layer_name)}: instruction "
                                    f"{spec['instruction']!r}: QuantLinear sums products with the chunked model "
                                    "only (altgrad-host run and altgrad.matmul run instructions)")
            keys = {k: v for k, v in spec.items() if k not in ("key", "instruction")}
            return keyed(spec, lambda: _accumulator(keys, f"{self.layer_name}.{p}.accumulator", registry))

        self.transforms = tuple(transform(products[p]["transform"]) for p in PRODUCTS)
        self.accumulators = tuple(accumulator(products[p]["accumulator"], p) for p in PRODUCTS)

    @classmethod
    def from_linear(cls, linear, **kwargs):
        """A QuantLinear sharing `linear`'s parameters (an optimizer holding them keeps working)."""
        q = cls(linear.in_features, linear.out_features, bias=linear.bias is not None,
                device=linear.weight.device, **kwargs)
        q.weight = linear.weight
        q.bias = linear.bias
        return q

    # The first uses' quantizers by their roles' names.
    weight_quantizer = property(lambda self: self.first_uses["w"])
    activation_quantizer = property(lambda self: self.first_uses["x"])
    gradient_quantizer = property(lambda self: self.first_uses["dy"])

    def formats(self):
        """(weight, activation, gradient) formats of the operands' first uses; None where not quantized."""
        return tuple(None if q is None else q.format.name
                     for q in (self.first_uses["w"], self.first_uses["x"], self.first_uses["dy"]))

    def _place(self, stream, layers, names):
        # Layer `stream` of `layers` (host/src/quant/seeds.hpp's layer k of L).
        if stream is None:
            stream = names.index(self.layer_name) if names else 0
        if layers is None:
            layers = len(names) if names else int(stream) + 1
        self._stream, self._layers = int(stream), int(layers)
        if not 0 <= self._stream < self._layers:
            raise ValueError(f"QuantLinear: stream {self._stream} is not a layer of {self._layers} (0 .. layers - 1)")

    def _next_step(self):
        self._steps += 1
        return self._steps - 1

    def _rounding_seed(self, step, operand, second_copy):
        # The trainer's seed of this operand's copy in this step.
        stream = _native.operand_stream(self._stream, _ROLE[operand], self._layers, second_copy)
        return _native.seed_of(self.seed, step, stream)

    def _transform_seed(self, step, product):
        # Both operands of one product take one seed: (seed, step, layer, product).
        return _native.seed_of(self.seed, step, _native.transform_stream(self._stream, product))

    def _where(self, product):
        return f"{self.layer_name}.{PRODUCTS[product]}.transform"

    def _first(self, operand, step):
        q = self.first_uses[operand]
        seed = self._rounding_seed(step, operand, False)
        return (lambda t: t) if q is None else (lambda t: q(t, seed=seed))

    def _second_copy(self, operand, step, t, q, transformed_first, transform, seed):
        # The trainer's second_copy: t the unquantized tensor and q its first copy, both in the second
        # product's layout (its reduction dimension last).
        own, quantizer, source = self.second_uses[operand]
        product = PRODUCTS.index(_SECOND_USE[operand])
        any_transform = transformed_first or transform is not None
        src = (_transformed(t, transform, seed, self._where(product)) if any_transform
               else q if source == "rowwise" else t)
        rounding_seed = self._rounding_seed(step, operand, True)
        if own:
            return src if quantizer is None else quantizer(src, seed=rounding_seed)
        first = self.first_uses[operand]
        if first is None:
            return src
        if not any_transform and (not first.block_scaled or first.block_rows > 1):
            return q
        return first(src, again=True, seed=rounding_seed)

    def forward(self, x):
        if not (any(self.first_uses.values()) or any(q for _, q, _ in self.second_uses.values())
                or any(self.transforms) or any(self.accumulators)):
            return torch.nn.functional.linear(x, self.weight, self.bias)
        return _QuantizedLinear.apply(x, self.weight, self.bias, self)

    def extra_repr(self):
        w, a, g = self.formats()
        extra = "".join(f", {p}={acc!r}" for p, acc in zip(PRODUCTS, self.accumulators) if acc)
        extra += "".join(f", {p}.transform={t!r}" for p, t in zip(PRODUCTS, self.transforms) if t)
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
    and no accumulator, stay nn.Linear. `seed` (None: the recipe's training.seed) keys stochastic
    rounding and per-call transforms; `overrides` are --set's "KEY=VALUE"s.
    """
    linears = [(name, m) for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and not isinstance(m, QuantLinear)]
    registry = registry or default_registry()
    resolved = _recipe.resolve(recipe, [name for name, _ in linears], overrides, registry)
    for name, linear in linears:
        if not resolved.quantizes(name):
            continue
        # Layer k of the model's L linear layers (its random bits: the trainer's layer k's).
        q = QuantLinear.from_linear(linear, recipe=resolved, layer=name, seed=seed, registry=registry)
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, q)
    return model


def quantized_layers(model):
    """{module name: (weight, activation, gradient) formats} of the model's QuantLinear layers."""
    return {name: m.formats() for name, m in model.named_modules() if isinstance(m, QuantLinear)}
