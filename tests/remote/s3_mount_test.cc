// s3:// through the stfs binary against s3rver: `stfs inspect s3://...`, a
// mount whose every tensor byte matches, and a refused key reported in one
// line without the secret. Credentials come from the environment only.
#include <cstdlib>

#include "tests/fs/mount_harness.h"
#include "tests/remote/s3_mount_fixture.h"
#include "tests/remote/s3_server.h"

namespace stfs::testing {
namespace {

class S3Mount : public S3rverMountTest {
 protected:
  // Filled with fresh random bytes by BuildSafetensors.
  std::vector<TestTensor> tensors_ = {{"embed", DType::F16, {1000, 1501}, ""},
                                      {"layers.0/attn%q", DType::BF16, {7, 3}, ""},
                                      {"scalar", DType::F64, {}, ""},
                                      {"tail", DType::U8, {2 * (1 << 20) + 3}, ""}};
};

TEST_F(S3Mount, InspectReadsTheHeaderOfAnS3Object) {
  server_->Put("models", "llm/model.safetensors", BuildSafetensors(tensors_, R"({"format":"pt"})"));
  CommandResult r = RunStfs({"inspect", "s3://models/llm/model.safetensors", "-o", EndpointOption()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("embed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tail"), std::string::npos) << r.out;
}

TEST_F(S3Mount, MountServesEveryTensorByteForByte) {
  server_->Put("models", "llm/model.safetensors", BuildSafetensors(tensors_, R"({"format":"pt"})"));
  std::string mnt = MountFile("s3://models/llm/model.safetensors",
                              {"-o", EndpointOption() + ",region=us-east-1,block_size=1M,cache_size=16M"});
  ASSERT_FALSE(mnt.empty());
  ExpectRootListing(mnt, tensors_);
  for (const TestTensor& t : tensors_) ExpectTensorServed(mnt, t);
}

TEST_F(S3Mount, UnknownKeyIsOneLineNamingTheCredentialsNotTheSecret) {
  server_->Put("models", "m.safetensors", BuildSafetensors(tensors_, "{}"));
  UseS3Keys("NOSUCHKEY", "very-secret-value");
  CommandResult r = RunStfs({"inspect", "s3://models/m.safetensors", "-o", EndpointOption()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("stfs: s3://models/m.safetensors: HTTP 403", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("check the credentials (access key NOSUCHKEY from environment"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("very-secret"), std::string::npos) << r.err;
}

TEST_F(S3Mount, ProfileOptionTakesKeysFromTheSharedCredentialsFile) {
  server_->Put("models", "m.safetensors", BuildSafetensors(tensors_, "{}"));
  UseS3Keys("NOSUCHKEY", "very-secret-value");  // -o profile= wins over these
  std::string file = dir_.Write("credentials", "[default]\naws_access_key_id = NOSUCHKEY\n"
                                               "aws_secret_access_key = x\n"
                                               "[s3rver]\naws_access_key_id = S3RVER\n"
                                               "aws_secret_access_key = S3RVER\n");
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", file.c_str(), 1);
  CommandResult r = RunStfs({"inspect", "s3://models/m.safetensors", "-o", EndpointOption() + ",profile=s3rver"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("embed"), std::string::npos) << r.out;

  CommandResult missing =
      RunStfs({"inspect", "s3://models/m.safetensors", "-o", EndpointOption() + ",profile=absent"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no profile [absent] in " + file), std::string::npos) << missing.err;
}

// Virtual-host requests for real: libcurl resolves BUCKET.localhost to
// loopback, and s3rver takes a Host that is neither an IP address nor
// "localhost" as the bucket's name (CNAME-style). So with the endpoint
// http://localhost:PORT, a virtual-host request for bucket "models" reaches
// s3rver's bucket "models.localhost", while a path-style one would read the
// decoy under the same key in "models".
TEST_F(S3Mount, VirtualHostAddressingNamesTheBucketInTheHost) {
  std::vector<TestTensor> decoy = {{"decoy", DType::U8, {64}, ""}};
  server_->Put("models", "v/model.safetensors", BuildSafetensors(decoy, "{}"));
  server_->CreateBucket("models.localhost");
  server_->Put("models.localhost", "v/model.safetensors", BuildSafetensors(tensors_, "{}"));
  std::string localhost = EndpointOption();
  localhost.replace(localhost.find("127.0.0.1"), 9, "localhost");

  std::string mnt = MountFile("s3://models/v/model.safetensors", {"-o", localhost + ",addressing=virtual"});
  ASSERT_FALSE(mnt.empty());
  ExpectRootListing(mnt, tensors_);
  for (const TestTensor& t : tensors_) ExpectTensorServed(mnt, t);

  // The same mount without the option goes path-style (localhost) and finds the decoy.
  std::string path_style = MountFile("s3://models/v/model.safetensors", {"-o", localhost});
  ASSERT_FALSE(path_style.empty());
  ExpectRootListing(path_style, decoy);
}

TEST_F(S3Mount, MalformedBucketIsRefusedBeforeAnyRequest) {
  CommandResult r = RunStfs({"inspect", "s3://Bad_Bucket/m.safetensors", "-o", EndpointOption()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("bucket name 'Bad_Bucket'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stfs::testing
