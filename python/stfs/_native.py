"""ctypes binding of libstfs_gpu.so (the C ABI in core/cuda/stfs_gpu.h).

Standard library only; the friendly API (load_file, safe_open, shard) is in
stfs/__init__.py. It knows nothing of torch: callers pass raw addresses
(tensor.data_ptr()) and streams (torch.cuda.current_stream().cuda_stream).
Every failure raises StfsGpuError carrying the C code name and the
library's one-line message; nothing here keeps a pointer beyond a call.
find_library() looks for the .so: $STFS_GPU_LIBRARY, next to this package,
the repository's build/ trees, then the system loader's path.

    lib = StfsGpu("build/core/cuda/libstfs_gpu.so")
    with lib.open("model.safetensors") as src, lib.loader() as ld:
        info = src.tensor(src.find("lm_head.weight"))
        shape, nbytes = src.slice_shape(info.index, ":, 0:512")
        ld.load(src, info.index, ":, 0:512", dst_ptr, nbytes, stream)
"""

import ctypes
import os
from collections import namedtuple

OK = 0
NO_DEVICE = 11


class StfsGpuError(RuntimeError):
    def __init__(self, code, name, message):
        super().__init__(f"{name}: {message}")
        self.code = code
        self.name = name
        self.message = message


class _Options(ctypes.Structure):
    _fields_ = [
        ("staging_buffer_bytes", ctypes.c_uint64),
        ("staging_buffer_count", ctypes.c_int32),
        ("reader_threads", ctypes.c_int32),
        ("max_read_gap_bytes", ctypes.c_uint64),
        ("direct_io", ctypes.c_int32),
        ("synchronize", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("gather_kernel_max_width", ctypes.c_uint64),
    ]


class _TensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.POINTER(ctypes.c_char)),
        ("name_len", ctypes.c_size_t),
        ("dtype", ctypes.c_char_p),
        ("ndim", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_uint64)),
        ("byte_size", ctypes.c_uint64),
    ]


class _Request(ctypes.Structure):
    _fields_ = [
        ("tensor_index", ctypes.c_size_t),
        ("slice", ctypes.c_char_p),
        ("dst", ctypes.c_void_p),
        ("capacity", ctypes.c_uint64),
    ]


class _Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("fills", "reads", "bytes_read", "copies", "copies_2d", "bytes_copied")]


TensorInfo = namedtuple("TensorInfo", "index name dtype shape byte_size")


def _slice_bytes(spec):
    if spec is None:
        return b""
    return spec.encode() if isinstance(spec, str) else bytes(spec)


def find_library():
    """Path of libstfs_gpu.so to load (see the top of this file)."""
    env = os.environ.get("STFS_GPU_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    for candidate in (os.path.join(here, "libstfs_gpu.so"),
                      os.path.join(root, "build", "core", "cuda", "libstfs_gpu.so"),
                      os.path.join(root, "build-gpu-check", "core", "cuda", "libstfs_gpu.so")):
        if os.path.isfile(candidate):
            return candidate
    return "libstfs_gpu.so"


class StfsGpu:
    """The loaded library."""

    def __init__(self, path=None):
        path = path or find_library()
        self.lib = ctypes.CDLL(path)
        L = self.lib
        vp, sz, u64, i32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_int
        L.stfs_gpu_last_error.restype = ctypes.c_char_p
        L.stfs_gpu_code_name.restype = ctypes.c_char_p
        L.stfs_gpu_code_name.argtypes = [i32]
        L.stfs_gpu_device_count.restype = i32
        L.stfs_gpu_options_init.argtypes = [ctypes.POINTER(_Options)]
        L.stfs_gpu_source_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp)]
        L.stfs_gpu_source_close.argtypes = [vp]
        L.stfs_gpu_source_tensor_count.argtypes = [vp, ctypes.POINTER(sz)]
        L.stfs_gpu_source_tensor.argtypes = [vp, sz, ctypes.POINTER(_TensorInfo)]
        L.stfs_gpu_source_find.argtypes = [vp, ctypes.c_char_p, sz, ctypes.POINTER(sz)]
        L.stfs_gpu_slice_shape.argtypes = [vp, sz, ctypes.c_char_p, ctypes.POINTER(u64), ctypes.c_uint32,
                                           ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(u64)]
        L.stfs_gpu_loader_create.argtypes = [ctypes.POINTER(_Options), ctypes.POINTER(vp)]
        L.stfs_gpu_loader_create_host.argtypes = [ctypes.POINTER(_Options), ctypes.POINTER(vp)]
        L.stfs_gpu_loader_destroy.argtypes = [vp]
        L.stfs_gpu_load.argtypes = [vp, vp, sz, ctypes.c_char_p, vp, u64, vp, ctypes.POINTER(u64)]
        L.stfs_gpu_load_alloc.argtypes = [vp, vp, sz, ctypes.c_char_p, vp, ctypes.POINTER(vp), ctypes.POINTER(u64)]
        L.stfs_gpu_free.argtypes = [vp, vp]
        L.stfs_gpu_load_batch.argtypes = [vp, vp, ctypes.POINTER(_Request), sz, vp]
        L.stfs_gpu_last_stats.argtypes = [vp, ctypes.POINTER(_Stats)]
        L.stfs_gpu_copy_to_host.argtypes = [vp, vp, u64, vp]

    def check(self, code):
        if code != OK:
            name = self.lib.stfs_gpu_code_name(code).decode()
            raise StfsGpuError(code, name, self.lib.stfs_gpu_last_error().decode(errors="replace"))

    def device_count(self):
        return self.lib.stfs_gpu_device_count()

    def last_error(self):
        return self.lib.stfs_gpu_last_error().decode(errors="replace")

    def open(self, location):
        handle = ctypes.c_void_p()
        self.check(self.lib.stfs_gpu_source_open(os.fsencode(location), ctypes.byref(handle)))
        return Source(self, handle)

    def loader(self, host=False, **options):
        """A loader into GPU memory (host=True: into host memory, no GPU)."""
        opts = _Options()
        self.lib.stfs_gpu_options_init(ctypes.byref(opts))
        for key, value in options.items():
            setattr(opts, key, int(value))
        handle = ctypes.c_void_p()
        create = self.lib.stfs_gpu_loader_create_host if host else self.lib.stfs_gpu_loader_create
        self.check(create(ctypes.byref(opts), ctypes.byref(handle)))
        return Loader(self, handle)


class Source:
    def __init__(self, gpu, handle):
        self.gpu, self.handle = gpu, handle

    def close(self):
        if self.handle:
            self.gpu.lib.stfs_gpu_source_close(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        n = ctypes.c_size_t()
        self.gpu.check(self.gpu.lib.stfs_gpu_source_tensor_count(self.handle, ctypes.byref(n)))
        return n.value

    def tensor(self, index):
        info = _TensorInfo()
        self.gpu.check(self.gpu.lib.stfs_gpu_source_tensor(self.handle, index, ctypes.byref(info)))
        name = ctypes.string_at(info.name, info.name_len).decode(errors="surrogateescape")
        shape = tuple(info.shape[i] for i in range(info.ndim))
        return TensorInfo(index, name, info.dtype.decode(), shape, info.byte_size)

    def tensors(self):
        return [self.tensor(i) for i in range(len(self))]

    def find(self, name):
        raw = name.encode(errors="surrogateescape") if isinstance(name, str) else bytes(name)
        index = ctypes.c_size_t()
        self.gpu.check(self.gpu.lib.stfs_gpu_source_find(self.handle, raw, len(raw), ctypes.byref(index)))
        return index.value

    def slice_shape(self, index, spec=""):
        """Returns (result shape, result bytes) of a slice."""
        dims = (ctypes.c_uint64 * 64)()
        ndim, nbytes = ctypes.c_uint32(), ctypes.c_uint64()
        self.gpu.check(self.gpu.lib.stfs_gpu_slice_shape(self.handle, index, _slice_bytes(spec), dims, 64,
                                                         ctypes.byref(ndim), ctypes.byref(nbytes)))
        return tuple(dims[i] for i in range(ndim.value)), nbytes.value


class Loader:
    def __init__(self, gpu, handle):
        self.gpu, self.handle = gpu, handle

    def close(self):
        if self.handle:
            self.gpu.lib.stfs_gpu_loader_destroy(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def load(self, source, index, spec, dst, capacity, stream=0):
        """Loads a slice into memory at address `dst`; returns its bytes."""
        written = ctypes.c_uint64()
        self.gpu.check(self.gpu.lib.stfs_gpu_load(self.handle, source.handle, index, _slice_bytes(spec),
                                                  ctypes.c_void_p(dst), capacity, ctypes.c_void_p(stream or 0),
                                                  ctypes.byref(written)))
        return written.value

    def load_batch(self, source, requests, stream=0):
        """Loads [(index, spec, dst, capacity), ...] through one pipeline."""
        specs = [_slice_bytes(spec) for _, spec, _, _ in requests]
        array = (_Request * len(requests))()
        for i, (index, _, dst, capacity) in enumerate(requests):
            array[i] = _Request(index, specs[i], dst or None, capacity)
        self.gpu.check(self.gpu.lib.stfs_gpu_load_batch(self.handle, source.handle, array, len(requests),
                                                        ctypes.c_void_p(stream or 0)))

    def stats(self):
        s = _Stats()
        self.gpu.check(self.gpu.lib.stfs_gpu_last_stats(self.handle, ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _Stats._fields_}
