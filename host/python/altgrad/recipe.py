"""Recipes (docs/recipes.md) resolved for any model's layers, by the trainer's own config reader.

    import altgrad.recipe
    r = altgrad.recipe.resolve("configs/recipes/nvfp4.toml", ["fc1", "fc2", "lm_head"])
    r.layers["fc1"]["weight_gradient"]["dy"]   # {"format": "fp4_e2m1", "rounding": "stochastic", ...}

A recipe is a config file (its [quantization] section counts; its [model] does not: the rules
are checked against the layers given), its text parsed as a dict (tomllib.load), or the
[quantization] section alone as a dict. Every key is read, checked and resolved by the C++
config reader and resolver (config::resolve, the trainer's), so a recipe means here what
it means to `altgrad-host run`, and a mistake is the same one-line error naming the key.
"""
import math
import os
import re

from . import _native

__all__ = ["Recipe", "resolve", "to_toml", "PRODUCTS", "OPERANDS"]

PRODUCTS = ("forward", "input_gradient", "weight_gradient")
OPERANDS = {"forward": ("x", "w"), "input_gradient": ("dy", "w"), "weight_gradient": ("dy", "x")}

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _toml_key(key):
    if not isinstance(key, str):
        raise TypeError(f"recipe key {key!r}: expected a string")
    return key if _BARE_KEY.match(key) else _toml_string(key)


def _toml_string(s):
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out) + '"'


def _toml_value(v, where):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(e, f"{where}[{i}]") for i, e in enumerate(v)) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(e, f'{where}.{k}')}" for k, e in v.items()) + " }"
    raise TypeError(f"{where}: expected a string, number, boolean, list or dict, got {type(v).__name__}")


def to_toml(config):
    """A config dict ({"quantization": {...}, "training": {...}, ...}) as TOML text, one key a line."""
    if not isinstance(config, dict):
        raise TypeError(f"recipe: expected a dict, got {type(config).__name__}")
    return "".join(f"{_toml_key(k)} = {_toml_value(v, k)}\n" for k, v in config.items())


# A [quantization] section given alone quantizes only what it names: its left-out formats are
# "fp32" (not quantized) and its scaling "none", where a config file's defaults are e5m2 and delayed.
_SECTION_DEFAULTS = {"weight_format": "fp32", "activation_format": "fp32", "gradient_format": "fp32",
                     "scaling": "none"}


def _text_of(recipe):
    # (TOML text, the name errors give it)
    if isinstance(recipe, (str, os.PathLike)):
        path = os.fspath(recipe)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read(), path
        except OSError as e:
            raise ValueError(f"{path}: cannot read the recipe ({e.strerror})") from None
    if isinstance(recipe, (list, tuple)):
        recipe = {"rules": list(recipe)}
    if not isinstance(recipe, dict):
        raise TypeError(f"recipe: expected a config file's path, a config dict or a [quantization] dict, "
                        f"got {type(recipe).__name__}")
    if "quantization" in recipe:
        return to_toml(recipe), "recipe"
    return to_toml({"quantization": {**_SECTION_DEFAULTS, **recipe}}), "recipe"


class Recipe:
    """A recipe resolved for named layers.

    globals: overflow, sr_bits, scaling, amax_history_len, amax_compute, margin, tensor_scale,
    first_scale, enabled.
    params: {format plugin: {key: value}} ([quantization.params.NAME]).
    layers: {layer: {product: {"transform": None | {"name", "params"}, "accumulator": None | {format,
    instruction, params, rounding, mma_depth, promote_every}, OPERAND: {format, rounding, granularity, block_size,
    block_rows, scale_format, scale_rule, pre_scale, source, own}}}}, each with the "key" that set it
    (an operand also its "tile_key", block_rows's), the products "forward" (x, w),
    "input_gradient" (dy, w) and "weight_gradient" (dy, x). A second use's "own" is False when it is
    quantized as its first use (the trainer's rule: the same settings).
    seed: the config's training.seed. source: the recipe's file, or "recipe".
    """

    def __init__(self, resolved, text=None, overrides=()):
        self.globals = resolved["globals"]
        self.params = resolved["params"]
        self.layers = resolved["layers"]
        self.seed = resolved["seed"]
        self.source = resolved["source"]
        self._text, self._overrides = text, list(overrides)
        self._plans = {}

    def plan(self, registry, seed=None):
        """The trainer's quantization plan for these layers, in this order (altgrad._train.Plan:
        train::assign_formats on this recipe), made once per registry and seed (None: the recipe's)
        and shared by the layers that use it, as one run's plan is: what altgrad.torch.QuantLinear
        runs."""
        key = (registry.folder, seed)
        if key not in self._plans:
            from . import _train  # LibTorch's: loaded with altgrad.torch only
            self._plans[key] = _train.Plan(registry.folder, self._text, self.source, self._overrides,
                                           list(self.layers), None if seed is None else int(seed))
        return self._plans[key]

    def where(self, key, layer):
        """A setting named as `altgrad-host run` names it in an error: the recipe's source, the key,
        and the layer."""
        return f"{self.source}: key '{key}' ({layer})"

    def check(self, registry):
        """Create each plugin the recipe names once, with its parameters, as `altgrad-host run` does
        when it starts: an unknown plugin, one of another kind, or a parameter its manifest refuses
        (type, range, choice) raises altgrad.Error naming the key and the layer."""
        if not self.globals["enabled"]:
            return
        made = set()

        def make(setting, layer, kind, name, params):
            if (kind, name, repr(params)) in made:
                return
            try:
                (registry.transform if kind == "transform" else registry.format)(name, params)
            except (_native.Error, ValueError, RuntimeError, TypeError) as e:
                raise _native.Error(f"{self.where(setting['key'], layer)}: {e}") from e
            made.add((kind, name, repr(params)))

        for layer, products in self.layers.items():
            for product in products.values():
                if product["transform"]:
                    t = product["transform"]
                    make(t, layer, "transform", t["name"], t["params"])
                a = product["accumulator"]
                if a and not a["instruction"]:  # an instruction's plugin is no format (altgrad.matmul loads it)
                    make(a, layer, "format", a["format"], a["params"])
                for operand in ("x", "w", "dy"):
                    o = product.get(operand)
                    if o is None or o["format"] == "fp32":
                        continue
                    make(o, layer, "format", o["format"], self.params.get(o["format"]))
                    if o["scale_format"] not in ("fp32", "pow2"):
                        make(o, layer, "format", o["scale_format"], self.params.get(o["scale_format"]))

    def quantizes(self, layer):
        """Whether the layer quantizes an operand or has a transform or an accumulator."""
        return self.globals["enabled"] and any(
            product["transform"] or product["accumulator"] or
            any(value["format"] != "fp32" for key, value in product.items() if key in ("x", "w", "dy"))
            for product in self.layers[layer].values())


def resolve(recipe, layers, overrides=(), registry=None):
    """The recipe (a path, a config dict, a [quantization] dict or a list of rules) resolved for
    `layers` (names the rules' patterns match), with `overrides` as `--set` gives them
    ("quantization.weight_gradient.transform=none"), its plugins checked in `registry` (default:
    the bundled plugins' registry) as a run checks them (Recipe.check). Raises altgrad.Error naming
    the key."""
    text, source = _text_of(recipe)
    layers = [str(layer) for layer in layers]
    overrides = [str(o) for o in overrides]
    resolved = Recipe(_native.resolve_recipe(text, source, overrides, layers), text, overrides)
    if registry is None:
        from . import default_registry
        registry = default_registry()
    resolved.check(registry)
    return resolved
