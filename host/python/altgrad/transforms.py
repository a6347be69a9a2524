"""Transform plugins (ABI 1.4) from Python: orthogonal transforms along the last dimension.

    import altgrad
    rht = altgrad.transform("random_hadamard", d=16)   # signs from each call's seed
    y = rht.apply(x, seed=7)                             # x: float32, last dimension a multiple of 16
    x_again = rht.apply(y, inverse=True, seed=7)

The numerics are the plugin's own, called through the host's transform_handle
(docs/transforms.md says what the bundled transforms compute).
"""


class Transform:
    """A created transform plugin: apply(x) transforms each row along x's last dimension.

    `x` is a C-contiguous numpy.float32 array or a contiguous CPU torch.float32 tensor
    whose last dimension is a multiple of info["block_size"]. Results go to `out`
    when given (`out=x`: in place), else to a new array or tensor like `x`; nothing is
    converted or copied.
    """

    def __init__(self, native):
        self._native = native

    @property
    def name(self):
        return self._native.name

    @property
    def info(self):
        """block_size (d), self_inverse, uses_seed (whether apply's seed matters), memory_kinds."""
        return self._native.info

    def __repr__(self):
        return f"altgrad.Transform({self.name!r}, block_size={self.info['block_size']})"

    def apply(self, x, inverse=False, seed=0, out=None):
        """T applied to every row of x's last dimension (inverse=True: T^-1 = T^T).

        seed is the per-call key of a transform whose info["uses_seed"] is true (e.g.
        random_hadamard's per-call signs); both operands of one product take the same seed.
        """
        from . import _empty_like, _host_view
        src = _host_view(x, "apply input")
        if src.ndim == 0:
            raise ValueError("apply: expected an array with at least one dimension")
        if out is None:
            out = _empty_like(x)
        self._native.apply(src, _host_view(out, "apply out"), int(src.shape[-1]), int(seed), bool(inverse))
        return out


def transform(name, d=16, seed=None, registry=None, **params):
    """A transform plugin of the default registry (or `registry`) with block size `d`.

    seed=None: a transform with random elements draws them from each apply's seed
    (random_hadamard's signs="per_call"). seed=N: one fixed random vector for every call,
    as Transformer Engine uses (random_hadamard's signs="fixed", sign_seed=N).
    Other keyword arguments are the plugin's parameters.
    """
    from . import default_registry
    reg = registry if registry is not None else default_registry()
    params = dict(params, d=d)
    if seed is not None:
        params.update(signs="fixed", sign_seed=int(seed))
    return reg.transform(name, params)
