// Tests for the .npy header encoder. In-process tests pin the layout (magic,
// version, 64-byte alignment, the dict text) and the read split; the numpy
// test writes header + random bytes for every dtype and several shapes and
// has /usr/bin/python3 + numpy check each file: np.load(mmap_mode='r') gives
// the declared dtype and shape and exactly our bytes, and for dtypes numpy
// has, our header is byte for byte the one np.save writes. It is skipped
// with a message when numpy is not installed.
#include "core/npy_header.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/header.h"
#include "tests/test_files.h"

namespace stfs {
namespace {

using testing::RandomBytes;
using testing::TempDir;

uint64_t LengthField(const std::string& header) {
  int version = static_cast<unsigned char>(header[6]);
  int bytes = version == 1 ? 2 : 4;
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(header[8 + i]);
  return value;
}

TEST(NpyHeader, MatchesNumpyLayoutForAMatrix) {
  StatusOr<std::string> header = EncodeNpyHeader(DType::F32, {3, 4});
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->size(), 128u);  // numpy >= 1.24 leaves growth room, so 128 not 64
  EXPECT_EQ(header->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(LengthField(*header), header->size() - 10);
  std::string dict = header->substr(10);
  EXPECT_EQ(dict.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 0), 0u) << dict;
  EXPECT_EQ(dict.back(), '\n');
  EXPECT_EQ(dict.find_first_not_of(' ', 59), dict.size() - 1);
}

TEST(NpyHeader, ScalarAndVectorTuples) {
  std::string scalar = *EncodeNpyHeader(DType::F64, {});
  EXPECT_NE(scalar.find("'shape': (), }"), std::string::npos);
  EXPECT_EQ(scalar.size() % 64, 0u);
  std::string vector = *EncodeNpyHeader(DType::I8, {7});
  EXPECT_NE(vector.find("'descr': '|i1'"), std::string::npos);
  EXPECT_NE(vector.find("'shape': (7,), }"), std::string::npos);
}

TEST(NpyHeader, EveryHeaderIsAlignedToSixtyFourBytes) {
  for (DType dtype : AllDTypes()) {
    for (std::vector<uint64_t> shape : {std::vector<uint64_t>{8}, {16, 24}, {2, 4, 8, 16}, {123456789012, 8}}) {
      StatusOr<std::string> header = EncodeNpyHeader(dtype, shape);
      ASSERT_TRUE(header.ok()) << DTypeName(dtype);
      EXPECT_EQ(header->size() % 64, 0u) << DTypeName(dtype);
      EXPECT_EQ(LengthField(*header), header->size() - 10);
    }
  }
}

TEST(NpyHeader, StandInsForDtypesNumpyLacks) {
  EXPECT_EQ(NpyTypeOf(DType::BF16).descr, "<u2");
  EXPECT_FALSE(NpyTypeOf(DType::BF16).exact);
  for (DType dtype : {DType::F8_E5M2, DType::F8_E4M3, DType::F8_E8M0, DType::F8_E4M3FNUZ, DType::F8_E5M2FNUZ}) {
    EXPECT_EQ(NpyTypeOf(dtype).descr, "|u1") << DTypeName(dtype);
    EXPECT_FALSE(NpyTypeOf(dtype).exact);
  }
  EXPECT_TRUE(NpyTypeOf(DType::C64).exact);
  EXPECT_EQ(NpyTypeOf(DType::C64).descr, "<c8");
  // Every stand-in has the dtype's element size.
  for (DType dtype : AllDTypes()) {
    if (DTypeBits(dtype) % 8 != 0) continue;
    std::string_view descr = NpyTypeOf(dtype).descr;
    EXPECT_EQ(std::stoul(std::string(descr.substr(2))) * 8, DTypeBits(dtype))
        << DTypeName(dtype);
  }
}

TEST(NpyHeader, SubByteDtypesBecomePackedBytes) {
  EXPECT_EQ(*NpyShapeOf(DType::F4, {3, 8}), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(*NpyShapeOf(DType::F6_E2M3, {2, 4}), (std::vector<uint64_t>{2, 3}));
  // The last dimension is not whole bytes but the tensor is: one dimension.
  EXPECT_EQ(*NpyShapeOf(DType::F4, {2, 3}), (std::vector<uint64_t>{3}));
  EXPECT_EQ(*NpyShapeOf(DType::F6_E3M2, {4, 2, 1}), (std::vector<uint64_t>{6}));
  // Odd element counts cannot be described.
  EXPECT_EQ(NpyShapeOf(DType::F4, {3, 3}).status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(EncodeNpyHeader(DType::F4, {}).status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(EncodeNpyHeader(DType::F6_E2M3, {6}).status().code(), StatusCode::kNotSupported);
  EXPECT_TRUE(EncodeNpyHeader(DType::F4, {0}).ok());
  // Whole-byte dtypes keep their shape.
  EXPECT_EQ(*NpyShapeOf(DType::BF16, {3, 5}), (std::vector<uint64_t>{3, 5}));
}

TEST(NpyHeader, SwitchesToVersionTwoWhenTheHeaderNeedsIt) {
  std::vector<uint64_t> small(1000, 1);
  EXPECT_EQ((*EncodeNpyHeader(DType::U8, small))[6], 1);
  std::vector<uint64_t> huge(30000, 1);  // "1, " x 30000 > 65535 bytes
  std::string header = *EncodeNpyHeader(DType::U8, huge);
  EXPECT_EQ(header[6], 2);
  EXPECT_EQ(header.size() % 64, 0u);
  EXPECT_EQ(LengthField(header), header.size() - 12);
}

TEST(NpyHeader, ReadSplitCoversHeaderThenData) {
  auto split = SplitNpyRead(128, 1000, 100, 50);
  EXPECT_EQ(split.header_offset, 100u);
  EXPECT_EQ(split.header_length, 28u);
  EXPECT_EQ(split.data_offset, 0u);
  EXPECT_EQ(split.data_length, 22u);
  split = SplitNpyRead(128, 1000, 10, 20);
  EXPECT_EQ(split.header_length, 20u);
  EXPECT_EQ(split.data_length, 0u);
  split = SplitNpyRead(128, 1000, 500, 10000);
  EXPECT_EQ(split.header_length, 0u);
  EXPECT_EQ(split.data_offset, 372u);
  EXPECT_EQ(split.data_length, 628u);
  split = SplitNpyRead(128, 1000, 1128, 10);
  EXPECT_EQ(split.header_length + split.data_length, 0u);
  split = SplitNpyRead(128, 0, 0, 1 << 20);
  EXPECT_EQ(split.header_length, 128u);
  EXPECT_EQ(split.data_length, 0u);
}

// The checker numpy runs: each manifest line is "path descr shape exact
// header_size" (shape as comma-separated numbers, "-" for a scalar).
constexpr const char* kNumpyChecker = R"PY(
import sys
try:
    import numpy as np
except ImportError:
    print("NO_NUMPY"); sys.exit(0)
import io
failures = []
for line in open(sys.argv[1]):
    path, descr, shape, exact, header_size = line.split()
    shape = () if shape == "-" else tuple(int(x) for x in shape.split(","))
    header_size = int(header_size)
    a = np.load(path, mmap_mode="r")
    raw = open(path, "rb").read()
    if a.dtype.str != descr or a.shape != shape:
        failures.append("%s: got %s %s, want %s %s" % (path, a.dtype.str, a.shape, descr, shape))
        continue
    if isinstance(a, np.memmap) and a.offset != header_size:
        failures.append("%s: data offset %d, want %d" % (path, a.offset, header_size))
    if a.tobytes() != raw[header_size:]:
        failures.append("%s: bytes differ" % path)
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        got_shape, fortran, dtype = read(f)
        if got_shape != shape or fortran or dtype.str != descr or f.tell() != header_size:
            failures.append("%s: read_array_header disagrees" % path)
    if exact == "1":
        buf = io.BytesIO()
        np.save(buf, np.zeros(shape, dtype=np.dtype(descr)))
        if buf.getvalue()[:header_size] != raw[:header_size] or len(buf.getvalue()) != len(raw):
            failures.append("%s: header differs from np.save: %r vs %r" % (path, buf.getvalue()[:header_size], raw[:header_size]))
print("\n".join(failures) if failures else "ALL_OK")
)PY";

std::string RunCommand(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return "popen failed";
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  pclose(pipe);
  return output;
}

TEST(NpyHeader, NumpyLoadsEveryDtypeWithoutCopying) {
  TempDir dir;
  std::string manifest;
  int count = 0;
  const std::vector<std::vector<uint64_t>> shapes = {{}, {0}, {5}, {3, 4}, {2, 3, 4}, {1, 1, 1, 1, 8}, {16, 0, 3}};
  for (DType dtype : AllDTypes()) {
    for (const std::vector<uint64_t>& shape : shapes) {
      StatusOr<std::string> header = EncodeNpyHeader(dtype, shape);
      StatusOr<uint64_t> bytes = TensorByteSize(dtype, shape);
      if (!bytes.ok()) {
        EXPECT_FALSE(header.ok()) << DTypeName(dtype) << ShapeToString(shape);
        continue;
      }
      ASSERT_TRUE(header.ok()) << DTypeName(dtype) << ShapeToString(shape) << ": " << header.status().ToString();
      std::vector<uint64_t> npy_shape = *NpyShapeOf(dtype, shape);
      std::string name = std::string(DTypeName(dtype)) + "_" + std::to_string(count++) + ".npy";
      std::string path = dir.Write(name, *header + RandomBytes(*bytes));
      std::string shape_text;
      for (uint64_t d : npy_shape) shape_text += (shape_text.empty() ? "" : ",") + std::to_string(d);
      manifest += path + " " + std::string(NpyTypeOf(dtype).descr) + " " +
                  (shape_text.empty() ? "-" : shape_text) + " " + (NpyTypeOf(dtype).exact ? "1" : "0") + " " +
                  std::to_string(header->size()) + "\n";
    }
  }
  std::string manifest_path = dir.Write("manifest.txt", manifest);
  std::string script_path = dir.Write("check.py", kNumpyChecker);
  std::string output = RunCommand("/usr/bin/python3 " + script_path + " " + manifest_path + " 2>&1");
  if (output.find("NO_NUMPY") != std::string::npos) GTEST_SKIP() << "numpy is not installed (apt-get install python3-numpy)";
  EXPECT_EQ(output, "ALL_OK\n");
  EXPECT_GT(count, 100);
}

TEST(NpyHeader, NumpyReadsAVersionTwoHeader) {
  TempDir dir;
  std::vector<uint64_t> shape(30000, 1);
  std::string header = *EncodeNpyHeader(DType::U8, shape);
  std::string path = dir.Write("v2.npy", header + "x");
  std::string script = dir.Write("v2.py",
      "import sys\n"
      "try:\n    import numpy as np\nexcept ImportError:\n    print('NO_NUMPY'); sys.exit(0)\n"
      "f = open(sys.argv[1], 'rb')\n"
      "v = np.lib.format.read_magic(f)\n"
      "shape, fortran, dtype = np.lib.format.read_array_header_2_0(f, max_header_size=1 << 20)\n"
      "print(v, len(shape), set(shape), fortran, dtype.str, f.tell())\n");
  std::string output = RunCommand("/usr/bin/python3 " + script + " " + path + " 2>&1");
  if (output.find("NO_NUMPY") != std::string::npos) GTEST_SKIP() << "numpy is not installed";
  EXPECT_EQ(output, "(2, 0) 30000 {1} False |u1 " + std::to_string(header.size()) + "\n");
}

}  // namespace
}  // namespace stfs
