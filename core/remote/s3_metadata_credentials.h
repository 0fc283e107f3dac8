// Temporary keys from the metadata services of the machine a job runs on:
// the container credentials endpoint (ECS task roles, EKS Pod Identity) and
// the EC2 instance metadata service, IMDSv2 (the instance role).
//
// Each is a couple of small HTTP exchanges over libcurl with a short
// deadline (connect and total), no redirects, and answers of at most 64 KiB;
// a machine without the service fails within the deadline with one line
// saying so. Messages never hold a token, a key or an answer's text.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "core/remote/s3_credentials.h"
#include "core/status.h"

namespace stfs {

// Where the container endpoint is, from AWS_CONTAINER_CREDENTIALS_FULL_URI,
// else AWS_CONTAINER_CREDENTIALS_RELATIVE_URI under http://169.254.170.2;
// and the Authorization header value from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
// (read on every fetch: EKS rotates it), else AWS_CONTAINER_AUTHORIZATION_TOKEN.
struct S3ContainerEndpoint {
  std::string url;
  std::string token_file;
  std::string token;
};

// nullopt when neither variable is set. InvalidArgument for a full URI the
// SDKs refuse too: plain http to a host other than loopback or the ECS / EKS
// link-local addresses.
StatusOr<std::optional<S3ContainerEndpoint>> S3ContainerEndpointFromEnv(const EnvLookup& env);

// GETs the container endpoint's keys.
StatusOr<S3Credentials> FetchS3ContainerCredentials(const S3ContainerEndpoint& endpoint,
                                                    std::chrono::milliseconds timeout);

// The instance metadata service: AWS_EC2_METADATA_SERVICE_ENDPOINT, else
// http://169.254.169.254; nullopt when AWS_EC2_METADATA_DISABLED is "true".
std::optional<std::string> S3InstanceMetadataEndpoint(const EnvLookup& env);

// IMDSv2: PUT /latest/api/token, then the role name and its keys under
// /latest/meta-data/iam/security-credentials/ with that token. `timeout`
// bounds each of the three exchanges.
StatusOr<S3Credentials> FetchS3InstanceCredentials(const std::string& endpoint,
                                                   std::chrono::milliseconds timeout);

}  // namespace stfs
