// Loading through the HTTP byte source: a real nginx on 127.0.0.1 serves a
// safetensors file and the loader (host engine) reads tensors and shards
// from its URL. Built only when stfs::remote and its test servers are.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cuda/loader.h"
#include "tests/cuda/reference_slice.h"
#include "tests/remote/test_servers.h"
#include "tests/test_files.h"

namespace stfs::gpu {
namespace {

using stfs::testing::BuildSafetensors;
using stfs::testing::NginxServer;
using stfs::testing::TempDir;
using stfs::testing::TestTensor;

TEST(RemoteLoad, ShardsFromAUrlMatchTheFile) {
  TempDir root;
  std::vector<TestTensor> tensors = {{"w", DType::BF16, {300, 256}, ""}, {"b", DType::F32, {256}, ""}};
  root.Write("m.safetensors", BuildSafetensors(tensors));
  std::string error;
  auto server = NginxServer::Start(root.path(), &error);
  ASSERT_NE(server, nullptr) << error;

  auto source = TensorSource::Open(server->Url("/m.safetensors"));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_TRUE((*source)->local_path().empty());
  LoaderOptions o;
  o.staging_buffer_bytes = 32 << 10;
  o.staging_buffer_count = 3;
  auto loader = NewHostLoader(o);
  ASSERT_TRUE(loader.ok());
  for (int dim : {0, -1}) {
    for (int rank = 0; rank < 4; ++rank) {
      auto items = ShardSlice(tensors[0].shape, dim, rank, 4);
      auto want = testing::ReferenceSliceOf(DType::BF16, tensors[0].shape, tensors[0].bytes, *items);
      std::string got(want->bytes.size(), '\0');
      Status s = (*loader)->LoadInto(**source, "w", *items, got.data(), got.size());
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(got, want->bytes) << "dim " << dim << " rank " << rank;
    }
  }
  auto all = (*loader)->LoadAll(**source);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(std::string(static_cast<char*>(all->tensors[1].data), all->tensors[1].bytes), tensors[1].bytes);

  o.direct_io = true;
  o.staging_buffer_bytes = 8192;
  auto direct = NewHostLoader(o);
  ASSERT_TRUE(direct.ok());
  std::string b(1024, '\0');
  EXPECT_EQ((*direct)->LoadInto(**source, "b", "", b.data(), b.size()).code(), StatusCode::kNotSupported);

  auto missing = TensorSource::Open(server->Url("/absent.safetensors"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.safetensors"), std::string::npos) << missing.status().ToString();
}

}  // namespace
}  // namespace stfs::gpu
