"""What load_file and safe_open share, whatever the framework.

Resolves a SOURCE (a safetensors path, an http(s)/hf URL, a tensor directory
of an stfs mount, or a model directory of a mount: every tensor directory in
it), turns `names` and `slices` into one request per tensor, asks the
library for each result's shape and size, lets the framework allocate the
destinations, and loads each source's requests as one batch. Pure standard
library: numpy and torch enter only through the `alloc` callables the
framework modules pass in.
"""

import os

from . import _native

_library = None


def library():
    """The process's one libstfs_gpu.so binding, loaded on first use."""
    global _library
    if _library is None:
        _library = _native.StfsGpu()
    return _library


def index_to_spec(key):
    """numpy basic-index text ("1:3, ..., -1") for a Python index: ints,
    slices with step >= 1, Ellipsis, or a tuple of them; a str passes as is."""
    if isinstance(key, str):
        return key
    if not isinstance(key, tuple):
        key = (key,)
    parts = []
    for k in key:
        if k is Ellipsis:
            parts.append("...")
        elif isinstance(k, slice):
            start = "" if k.start is None else str(int(k.start))
            stop = "" if k.stop is None else str(int(k.stop))
            if k.step is None:
                parts.append(f"{start}:{stop}")
            else:
                parts.append(f"{start}:{stop}:{int(k.step)}")
        elif isinstance(k, bool) or k is None:
            raise TypeError(f"stfs: unsupported index {k!r} (integers, slices and ... only)")
        else:
            try:
                parts.append(str(int(k.__index__())))
            except AttributeError:
                raise TypeError(f"stfs: unsupported index {k!r} (integers, slices and ... only)") from None
    return ", ".join(parts)


def shard_bounds(size, world, rank):
    """[start, stop) of part `rank` of `world` of a dimension of `size`, as
    torch.chunk splits: parts of ceil(size / world), the last shorter or empty."""
    part = -(-size // world)
    start = min(size, part * rank)
    return start, min(size, start + part)


class Shard:
    """The slice each tensor-parallel rank needs: part `rank` of `world` of
    dimension `dim` (negative counts from the end). Tensors with too few
    dimensions (biases, norms, scalars) are loaded whole, as replicated
    weights are. Pass it as `slices=`; call it as shard(name, shape)."""

    def __init__(self, world, rank, dim):
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"stfs: shard rank {rank} of world {world} is not valid")
        self.world, self.rank, self.dim = int(world), int(rank), int(dim)

    def __call__(self, name, shape):
        ndim = len(shape)
        d = self.dim + ndim if self.dim < 0 else self.dim
        if not 0 <= d < ndim:
            return None  # whole tensor
        start, stop = shard_bounds(shape[d], self.world, self.rank)
        return ", ".join([":"] * d + [f"{start}:{stop}"])

    def __repr__(self):
        return f"shard(world={self.world}, rank={self.rank}, dim={self.dim})"


def _is_tensor_dir(path):
    return all(os.path.isfile(os.path.join(path, f)) for f in ("dtype", "shape", "data"))


def source_locations(source):
    """The locations to open for SOURCE: itself, or for a model directory of
    an stfs mount, each tensor directory in it (sorted by name)."""
    source = os.fspath(source)
    if os.path.isdir(source) and not _is_tensor_dir(source):
        found = sorted(os.path.join(source, e) for e in os.listdir(source)
                       if not e.startswith((".", "__")) and _is_tensor_dir(os.path.join(source, e)))
        if not found:
            raise FileNotFoundError(f"stfs: {source}: no tensor directories (dtype, shape, data) in it")
        return found
    return [source]


class OpenSources:
    """The opened sources of a SOURCE and where each tensor name lives."""

    def __init__(self, gpu, source):
        self.gpu = gpu
        self.sources = []
        self.where = {}  # name -> (source, TensorInfo)
        try:
            for location in source_locations(source):
                src = gpu.open(location)
                self.sources.append(src)
                for info in src.tensors():
                    self.where.setdefault(info.name, (src, info))
        except BaseException:
            self.close()
            raise

    def keys(self):
        return list(self.where)

    def info(self, name):
        try:
            return self.where[name]
        except KeyError:
            raise KeyError(f"stfs: no tensor named {name!r}") from None

    def close(self):
        for src in self.sources:
            src.close()
        self.sources = []


def slice_for(slices, name, shape):
    """The slice text for tensor `name` from the `slices` argument."""
    if slices is None:
        return ""
    if callable(slices):
        spec = slices(name, tuple(shape))
    elif isinstance(slices, dict):
        spec = slices.get(name)
    else:
        spec = slices
    return "" if spec is None else index_to_spec(spec)


def load(opened, names, slices, alloc, loader, stream, stats=None):
    """Loads the named tensors (all when None) with their slices into
    destinations from alloc(shape, dtype_name, nbytes) -> (object, address);
    returns {name: object}. One batch per source; the loader's counters
    (bytes_read, bytes_copied, ...) are added to the dict `stats` if given."""
    names = opened.keys() if names is None else list(names)
    out = {}
    batches = {}
    for name in names:
        src, info = opened.info(name)
        spec = slice_for(slices, name, info.shape)
        shape, nbytes = src.slice_shape(info.index, spec)
        obj, address = alloc(shape, info.dtype, nbytes)
        out[name] = obj
        batches.setdefault(id(src), (src, []))[1].append((info.index, spec, address, nbytes))
    for src, requests in batches.values():
        loader.load_batch(src, requests, stream)
        if stats is not None:
            for key, value in loader.stats().items():
                stats[key] = stats.get(key, 0) + value
    return out
