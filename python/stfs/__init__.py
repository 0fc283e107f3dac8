"""stfs: safetensors tensors and slices straight into GPU memory.

    import stfs
    weights = stfs.load_file("model.safetensors", device="cuda:0")
    mine = stfs.load_file("model.safetensors", slices=stfs.shard(world=8, rank=3, dim=-1))
    with stfs.safe_open("hf://org/repo/model.safetensors", framework="pt", device="cuda:1") as f:
        w = f.get_slice("lm_head.weight")[:, 0:512]

Like safetensors.torch.load_file / safe_open, over libstfs_gpu.so (ctypes;
no compiler needed): bytes go from the source through a fixed budget of
pinned staging buffers to memory torch allocates on the loader's device,
filled in order on torch's current stream of that device. SOURCE may be a
path, an http(s):// or hf:// URL, or a tensor or model directory of an stfs
mount. device="cpu" (or stfs.numpy) uses the host loader: same pipeline, no
GPU. Errors raise StfsGpuError (a RuntimeError) with the library's message.
"""

from . import _core
from ._core import Shard, index_to_spec
from ._native import StfsGpuError

__all__ = ["load_file", "safe_open", "shard", "StfsGpuError", "index_to_spec"]


def shard(world, rank, dim):
    """The slices tensor-parallel rank `rank` of `world` needs along `dim`
    (see _core.Shard); pass as load_file(..., slices=shard(8, 3, -1))."""
    return Shard(world, rank, dim)


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError("stfs: this needs PyTorch (use stfs.numpy without it)") from e
    return torch


def _torch_dtype(torch, name):
    table = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8",
             "I16": "int16", "I32": "int32", "I64": "int64", "U8": "uint8", "U16": "uint16", "U32": "uint32",
             "U64": "uint64", "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
             "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz", "F8_E8M0": "float8_e8m0fnu",
             "C64": "complex64"}
    dtype = getattr(torch, table.get(name, ""), None)
    if dtype is None:
        raise TypeError(f"stfs: dtype {name} has no torch dtype in this torch")
    return dtype


class _TorchTarget:
    """Where torch tensors go: a device, its loader, its current stream."""

    def __init__(self, device):
        torch = self.torch = _torch()
        self.device = torch.device(device)
        gpu = _core.library()
        if self.device.type == "cuda":
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            self.device = torch.device("cuda", index)
            self.loader = gpu.loader(device=index)
            self.stream = torch.cuda.current_stream(self.device).cuda_stream
        elif self.device.type == "cpu":
            self.loader = gpu.loader(host=True)
            self.stream = 0
        else:
            raise ValueError(f"stfs: device {device!r}: only cuda and cpu")

    def alloc(self, shape, dtype_name, nbytes):
        t = self.torch.empty(tuple(shape), dtype=_torch_dtype(self.torch, dtype_name), device=self.device)
        return t, (t.data_ptr() if nbytes else 0)

    def close(self):
        self.loader.close()


def load_file(source, device="cuda:0", names=None, slices=None, stats=None):
    """Loads tensors of SOURCE into torch tensors on `device`; returns
    {name: tensor}, like safetensors.torch.load_file. `names`: the tensors to
    load (default all); `slices`: one slice for all, {name: slice}, or a
    callable (name, shape) -> slice such as shard(world, rank, dim); a slice
    is numpy index text or a Python index (ints, slices, ...). `stats`: a
    dict that receives the loader's counters (bytes_read, bytes_copied, ...)."""
    target = _TorchTarget(device)
    opened = _core.OpenSources(_core.library(), source)
    try:
        return _core.load(opened, names, slices, target.alloc, target.loader, target.stream, stats)
    finally:
        target.close()  # waits for the copies; the tensors are ready in stream order
        opened.close()


class _Slice:
    def __init__(self, handle, name):
        self._handle, self._name = handle, name
        _, self._info = handle._opened.info(name)

    def get_shape(self):
        return list(self._info.shape)

    def get_dtype(self):
        return self._info.dtype

    def __getitem__(self, key):
        return self._handle._load(self._name, index_to_spec(key))


class SafeOpen:
    """safe_open-like handle: keys(), get_tensor(name), get_slice(name)[...]."""

    def __init__(self, source, framework="pt", device="cpu"):
        if framework in ("pt", "torch"):
            self._target = _TorchTarget(device)
        elif framework in ("np", "numpy"):
            from . import numpy as stfs_numpy
            if str(device) != "cpu":
                raise ValueError("stfs: framework='numpy' loads to device='cpu' only")
            self._target = stfs_numpy._NumpyTarget()
        else:
            raise ValueError(f"stfs: framework {framework!r}: only 'pt' and 'numpy'")
        self._opened = _core.OpenSources(_core.library(), source)

    def keys(self):
        return self._opened.keys()

    def metadata(self):
        return None  # not exposed by the C ABI yet

    def get_tensor(self, name):
        return self._load(name, "")

    def get_slice(self, name):
        return _Slice(self, name)

    def _load(self, name, spec):
        t = self._target
        return _core.load(self._opened, [name], {name: spec}, t.alloc, t.loader, t.stream)[name]

    def close(self):
        if self._opened is not None:
            self._target.close()
            self._opened.close()
            self._opened = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def safe_open(source, framework="pt", device="cpu"):
    """Opens SOURCE like safetensors.safe_open; use as a context manager."""
    return SafeOpen(source, framework, device)
