"""stfs for numpy: load_file into numpy arrays through the host loader (no
GPU, no torch), like safetensors.numpy.load_file. BF16 and the 8-bit float
formats have no numpy dtype: they arrive as raw uint16 / uint8 bit patterns
of the same shape; 4- and 6-bit formats are refused."""

import numpy as np

from . import _core

_DTYPES = {"F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "I16": "int16",
           "I32": "int32", "I64": "int64", "U8": "uint8", "U16": "uint16", "U32": "uint32", "U64": "uint64",
           "BOOL": "bool", "C64": "complex64", "BF16": "uint16", "F8_E4M3": "uint8", "F8_E5M2": "uint8",
           "F8_E4M3FNUZ": "uint8", "F8_E5M2FNUZ": "uint8", "F8_E8M0": "uint8"}


def numpy_dtype(name):
    if name not in _DTYPES:
        raise TypeError(f"stfs: dtype {name} has no numpy representation")
    return np.dtype(_DTYPES[name])


class _NumpyTarget:
    def __init__(self, **loader_options):
        self.loader = _core.library().loader(host=True, **loader_options)
        self.stream = 0

    def alloc(self, shape, dtype_name, nbytes):
        a = np.empty(tuple(shape), dtype=numpy_dtype(dtype_name))
        assert a.nbytes == nbytes, (shape, dtype_name, nbytes)
        return a, (a.ctypes.data if nbytes else 0)

    def close(self):
        self.loader.close()


def load_file(source, names=None, slices=None, stats=None, **loader_options):
    """{name: numpy array} of SOURCE's tensors (see stfs.load_file for
    `names` and `slices`); loader_options go to the host loader
    (staging_buffer_bytes, staging_buffer_count, reader_threads, ...)."""
    target = _NumpyTarget(**loader_options)
    opened = _core.OpenSources(_core.library(), source)
    try:
        return _core.load(opened, names, slices, target.alloc, target.loader, target.stream, stats)
    finally:
        target.close()
        opened.close()
