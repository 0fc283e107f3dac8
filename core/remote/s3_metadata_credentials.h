// Temporary keys from the services of the machine a job runs on: web
// identity (EKS IRSA: a token file traded for a role's keys at STS), the
// container credentials endpoint (ECS task roles, EKS Pod Identity) and the
// EC2 instance metadata service, IMDSv2 (the instance role).
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

// Web identity: AWS_WEB_IDENTITY_TOKEN_FILE (read at every fetch: the
// kubelet rotates it), AWS_ROLE_ARN, AWS_ROLE_SESSION_NAME (else
// "stfs-<epoch ms>"), STS at AWS_ENDPOINT_URL_STS, else
// https://sts.REGION.amazonaws.com for AWS_REGION / AWS_DEFAULT_REGION, else
// https://sts.amazonaws.com.
struct S3WebIdentity {
  std::string token_file;
  std::string role_arn;
  std::string session_name;
  std::string sts_url;
};

// nullopt when AWS_WEB_IDENTITY_TOKEN_FILE is not set; InvalidArgument
// when it is but AWS_ROLE_ARN is not.
StatusOr<std::optional<S3WebIdentity>> S3WebIdentityFromEnv(const EnvLookup& env);

// POSTs AssumeRoleWithWebIdentity (unsigned: the token is the proof) and
// returns the role's keys.
StatusOr<S3Credentials> FetchS3WebIdentityCredentials(const S3WebIdentity& identity,
                                                      std::chrono::milliseconds timeout);

// STS: AWS_ENDPOINT_URL_STS, else https://sts.REGION.amazonaws.com for
// S3StsRegion, else https://sts.amazonaws.com.
std::string S3StsUrl(const EnvLookup& env);
// AWS_REGION, else AWS_DEFAULT_REGION, else "" (the global endpoint).
std::string S3StsRegion(const EnvLookup& env);
// "stfs-<epoch ms>": the RoleSessionName when none is configured.
std::string S3DefaultSessionName();
// A form value, percent-encoded.
std::string S3StsFormEscape(const std::string& value);

// POSTs `form` (Action=ACTION&Version=...) to STS, signed (SigV4 for
// `region`, "" = us-east-1) with `signer` when not null, and returns the
// keys of the <ACTION>Response. Errors are one line: "ORIGIN (HTTP N, STS
// error CODE)", never a key or the answer's text.
StatusOr<S3Credentials> FetchS3StsCredentials(const std::string& origin, const std::string& action,
                                              const std::string& sts_url, const std::string& form,
                                              const S3Credentials* signer, const std::string& region,
                                              std::chrono::milliseconds timeout);

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
