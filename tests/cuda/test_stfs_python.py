"""Tests of the Python package python/stfs (run by CTest as stfs_python_package).

Without a GPU everything but the torch/CUDA path runs through the host
loader: source resolution (file, tensor directory, model directory of a
mount), index text, shard() slices, load_file with names and slices, and
the safe_open-like handle, all compared with numpy slicing of arrays built
here. numpy comes from Debian's python3-numpy (/usr/bin/python3); tests that
need numpy or torch skip with a message when it is missing.
Environment: STFS_GPU_LIBRARY (the .so), PYTHONPATH holding python/.
"""

import json
import os
import struct
import tempfile
import unittest

import stfs
from stfs import _core

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

try:
    import torch
except ImportError:
    torch = None

# Under STFS_GPU_REQUIRE_DEVICE=1 (scripts/gpu-check.sh on a GPU) nothing may skip.
REQUIRED = os.environ.get("STFS_GPU_REQUIRE_DEVICE") == "1"
if REQUIRED and (np is None or torch is None):
    raise SystemExit("STFS_GPU_REQUIRE_DEVICE=1 but numpy or torch is missing")
NEEDS_NUMPY = unittest.skipIf(np is None, "numpy is not installed (apt-get install python3-numpy)")
NEEDS_TORCH = unittest.skipIf(torch is None, "torch is not installed: skipping the torch tests")

NP_DTYPES = {"F32": "float32", "F16": "float16", "I64": "int64", "U8": "uint8", "I16": "int16",
             "BF16": "uint16", "BOOL": "bool", "F64": "float64", "I32": "int32"}


def write_safetensors(path, arrays):
    """arrays: {name: (dtype_name, numpy array)}; bf16 given as uint16 bits."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, a) in arrays.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def random_array(rng, dtype, shape):
    if dtype == "BOOL":
        return rng.integers(0, 2, size=shape).astype(bool)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(NP_DTYPES[dtype]).itemsize, dtype=np.uint8)
    a = raw.view(NP_DTYPES[dtype]).reshape(shape)
    if a.dtype.kind == "f":
        a = np.where(np.isfinite(a), a, 0).astype(a.dtype)  # NaN payloads would spoil ==
    return a


class IndexText(unittest.TestCase):
    def test_python_indices_become_numpy_text(self):
        self.assertEqual(stfs.index_to_spec(3), "3")
        self.assertEqual(stfs.index_to_spec(-1), "-1")
        self.assertEqual(stfs.index_to_spec(slice(None)), ":")
        self.assertEqual(stfs.index_to_spec((slice(1, 9, 2), Ellipsis, -2)), "1:9:2, ..., -2")
        self.assertEqual(stfs.index_to_spec((slice(None, 5), slice(2, None))), ":5, 2:")
        self.assertEqual(stfs.index_to_spec(":, 0:512"), ":, 0:512")
        with self.assertRaises(TypeError):
            stfs.index_to_spec(None)
        with self.assertRaises(TypeError):
            stfs.index_to_spec((1, "x"))

    def test_shard_splits_like_torch_chunk(self):
        # 10 rows over 4 ranks: parts of 3, 3, 3, 1.
        self.assertEqual([_core.shard_bounds(10, 4, r) for r in range(4)], [(0, 3), (3, 6), (6, 9), (9, 10)])
        # 5 over 4: 2, 2, 1, then empty.
        self.assertEqual([_core.shard_bounds(5, 4, r) for r in range(4)], [(0, 2), (2, 4), (4, 5), (5, 5)])
        s = stfs.shard(world=4, rank=1, dim=-1)
        self.assertEqual(s("w", (8, 10)), ":, 3:6")
        self.assertEqual(s("b", (10,)), "3:6")
        self.assertEqual(stfs.shard(4, 1, 0)("w", (10, 8)), "3:6")
        self.assertIsNone(stfs.shard(4, 1, 1)("bias", (10,)), "too few dims: loaded whole")
        self.assertIsNone(stfs.shard(4, 1, 0)("scalar", ()))
        with self.assertRaises(ValueError):
            stfs.shard(4, 4, 0)


@NEEDS_NUMPY
class HostLoads(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        rng = np.random.default_rng(7)
        self.arrays = {}
        for i, dtype in enumerate(NP_DTYPES):
            shape = [(13, 21), (7, 3, 10), (33,), ()][i % 4]
            self.arrays[f"t{i}.{dtype.lower()}"] = (dtype, random_array(rng, dtype, shape))
        self.path = os.path.join(self.tmp.name, "m.safetensors")
        write_safetensors(self.path, self.arrays)

    def tearDown(self):
        self.tmp.cleanup()

    def assert_same(self, got, want):
        self.assertEqual(got.shape, want.shape)
        self.assertEqual(got.dtype, want.dtype)
        self.assertTrue(np.array_equal(got, want))

    def test_load_file_whole(self):
        import stfs.numpy as snp
        out = snp.load_file(self.path)
        self.assertEqual(list(out), list(self.arrays))
        for name, (_, a) in self.arrays.items():
            self.assert_same(out[name], a)

    def test_names_and_slices(self):
        import stfs.numpy as snp
        names = [n for n, (_, a) in self.arrays.items() if a.ndim >= 2]
        slices = {names[0]: (slice(1, None, 3), Ellipsis, slice(-4, None)), names[1]: "-1"}
        out = snp.load_file(self.path, names=names, slices=slices, staging_buffer_bytes=256)
        self.assertEqual(sorted(out), sorted(names))
        self.assert_same(out[names[0]], self.arrays[names[0]][1][1::3, ..., -4:])
        self.assert_same(out[names[1]], self.arrays[names[1]][1][-1])
        with self.assertRaises(KeyError):
            snp.load_file(self.path, names=["nope"])

    def test_every_rank_of_row_and_column_shards(self):
        import stfs.numpy as snp
        for world in (1, 3, 4, 8):
            for dim in (0, -1):
                for rank in range(world):
                    stats = {}
                    out = snp.load_file(self.path, slices=stfs.shard(world, rank, dim), stats=stats,
                                        staging_buffer_bytes=128, staging_buffer_count=2)
                    self.assertEqual(stats["bytes_copied"], sum(a.nbytes for a in out.values()))
                    for name, (_, a) in self.arrays.items():
                        d = dim + a.ndim if dim < 0 else dim
                        if not 0 <= d < a.ndim:
                            self.assert_same(out[name], a)
                            continue
                        lo, hi = _core.shard_bounds(a.shape[d], world, rank)
                        index = (slice(None),) * d + (slice(lo, hi),)
                        self.assert_same(out[name], a[index])

    def test_safe_open_handle(self):
        with stfs.safe_open(self.path, framework="numpy") as f:
            self.assertEqual(f.keys(), list(self.arrays))
            name = next(n for n, (_, a) in self.arrays.items() if a.ndim == 3)
            a = self.arrays[name][1]
            self.assert_same(f.get_tensor(name), a)
            sl = f.get_slice(name)
            self.assertEqual(sl.get_shape(), list(a.shape))
            self.assertEqual(sl.get_dtype(), self.arrays[name][0])
            self.assert_same(sl[2], a[2])
            self.assert_same(sl[:, 1:3, ::2], a[:, 1:3, ::2])
            self.assert_same(sl[..., 5], a[..., 5])
            with self.assertRaises(stfs.StfsGpuError) as e:
                sl[:, ::-1]
            self.assertEqual(e.exception.name, "INVALID_ARGUMENT")

    def test_errors_name_the_problem(self):
        import stfs.numpy as snp
        with self.assertRaises(stfs.StfsGpuError) as e:
            snp.load_file(os.path.join(self.tmp.name, "missing.safetensors"))
        self.assertEqual(e.exception.name, "NOT_FOUND")
        self.assertIn("missing.safetensors", str(e.exception))
        with self.assertRaises(stfs.StfsGpuError) as e:
            snp.load_file(self.path, slices="0:1, 0:1, 0:1, 0:1")
        self.assertEqual(e.exception.name, "INVALID_ARGUMENT")

    def test_tensor_and_model_directories_of_a_mount(self):
        # The layout an stfs mount shows: one directory per tensor.
        root = os.path.join(self.tmp.name, "mnt")
        for name, (dtype, a) in self.arrays.items():
            d = os.path.join(root, name)
            os.makedirs(d)
            with open(os.path.join(d, "dtype"), "w") as f:
                f.write(dtype + "\n")
            with open(os.path.join(d, "shape"), "w") as f:
                f.write("[" + ",".join(str(x) for x in a.shape) + "]\n")
            with open(os.path.join(d, "data"), "wb") as f:
                f.write(np.ascontiguousarray(a).tobytes())
        os.makedirs(os.path.join(root, "__stats__"))
        import stfs.numpy as snp
        out = snp.load_file(root)
        self.assertEqual(sorted(out), sorted(self.arrays))
        for name, (_, a) in self.arrays.items():
            self.assert_same(out[name], a)
        name = next(iter(self.arrays))
        one = snp.load_file(os.path.join(root, name))
        self.assertEqual(list(one), [name])
        with self.assertRaises(FileNotFoundError):
            snp.load_file(os.path.join(root, "__stats__"))


@NEEDS_TORCH
class TorchLoads(unittest.TestCase):
    """PyTorch: CPU always; CUDA when torch sees a device (else NO_DEVICE)."""

    def setUp(self):
        if np is None:
            self.skipTest("numpy is not installed")
        self.tmp = tempfile.TemporaryDirectory()
        rng = np.random.default_rng(11)
        self.arrays = {"w": ("F32", random_array(rng, "F32", (64, 48))), "b": ("I64", random_array(rng, "I64", (48,))),
                       "h": ("BF16", random_array(rng, "BF16", (16, 40)))}
        self.path = os.path.join(self.tmp.name, "m.safetensors")
        write_safetensors(self.path, self.arrays)

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, out, slices=None):
        for name, (dtype, a) in self.arrays.items():
            t = out[name].cpu()
            got = t.view(torch.int16).numpy().view(np.uint16) if dtype == "BF16" else t.numpy()
            want = a
            if slices is not None:
                spec = slices(name, a.shape)
                if spec is not None:
                    lo, hi = (int(x) for x in spec.split(", ")[-1].split(":"))
                    want = a[(slice(None),) * (spec.count(",")) + (slice(lo, hi),)]
            self.assertTrue(np.array_equal(got, want), name)

    def test_cpu(self):
        self.check(stfs.load_file(self.path, device="cpu"))
        s = stfs.shard(4, 2, -1)
        self.check(stfs.load_file(self.path, device="cpu", slices=s), s)

    def test_cuda(self):
        if not torch.cuda.is_available():
            self.assertFalse(REQUIRED, "STFS_GPU_REQUIRE_DEVICE=1 but torch sees no CUDA device")
            with self.assertRaises(stfs.StfsGpuError) as e:
                stfs.load_file(self.path, device="cuda:0")
            self.assertEqual(e.exception.name, "NO_DEVICE")
            self.skipTest("torch sees no CUDA device: checked the NO_DEVICE error only")
        out = stfs.load_file(self.path, device="cuda:0")
        self.assertTrue(all(t.device == torch.device("cuda", 0) for t in out.values()))
        self.check(out)
        with stfs.safe_open(self.path, framework="pt", device="cuda:0") as f:
            w = f.get_slice("w")[:, 8:16]
            self.assertTrue(torch.equal(w.cpu(), torch.from_numpy(self.arrays["w"][1][:, 8:16])))


if __name__ == "__main__":
    unittest.main()
