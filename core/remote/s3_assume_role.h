// Profiles that assume a role: a config file profile with role_arn gets its
// keys from STS AssumeRole, signed with the keys of its source, as the AWS
// CLI does for multi-account setups (a bucket in another account):
//
//   [profile models]
//   role_arn = arn:aws:iam::123456789012:role/read-models
//   source_profile = base     # or credential_source = Environment |
//                             #    Ec2InstanceMetadata | EcsContainer
//   role_session_name = ...   # optional (else stfs-<epoch ms>)
//   external_id = ...         # optional
//   duration_seconds = 3600   # optional
//
// source_profile names a profile with static keys (credentials file, else
// aws_access_key_id in the config file), else with a credential_process
// (run at every fetch), or one with its own role_arn: a
// chain of at most kMaxS3RoleChain roles, walked from the source outwards;
// a loop is an error. A profile whose source_profile is itself uses its own
// static keys (as the CLI). Every fetch (the first and each refresh) asks
// the source again, so temporary source keys are fresh too; static source
// keys are read once, when the chain is planned.
//
// STS is the web identity one (S3StsUrl); requests are SigV4-signed by
// libcurl for "aws:amz:REGION:sts". Errors are one line naming the profile
// and the role ARN, and STS's error code; never a key.
#pragma once

#include <optional>
#include <string>

#include "core/remote/s3_credential_provider.h"
#include "core/remote/s3_credentials.h"
#include "core/status.h"

namespace stfs {

constexpr int kMaxS3RoleChain = 5;

struct S3AssumeRolePlan {
  S3CredentialFetch fetch;  // the outermost role's keys, from the source up
  std::string source_key;   // names the chain, for sharing one provider
};

// nullopt when [profile `profile`] of the config file `config` has no
// role_arn. InvalidArgument for a loop, a chain over the limit or a bad
// setting; NotFound for a source profile without keys. `credentials_file`
// is where source profiles' static keys are looked up first.
StatusOr<std::optional<S3AssumeRolePlan>> PlanS3AssumeRole(const std::string& profile,
                                                           const std::string& credentials_file,
                                                           const std::string& config,
                                                           const S3CredentialOptions& options,
                                                           const EnvLookup& env);

}  // namespace stfs
