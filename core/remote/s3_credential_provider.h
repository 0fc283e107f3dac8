// The credentials s3:// requests are signed with, for the whole life of a
// mount: found once along the AWS SDKs' chain, and, when they are temporary
// keys, refreshed before they expire without stopping readers.
//
// The chain, first match wins: -o no_sign (anonymous); -o profile=NAME (the
// role of a config file [profile NAME] with role_arn (s3_assume_role.h), else
// the shared credentials file's [NAME], else the config file's
// credential_process of [profile NAME]; nothing further); AWS_ACCESS_KEY_ID +
// AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); web identity
// (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, EKS IRSA); the role of
// [AWS_PROFILE or default] when it has role_arn; the credentials file's
// [AWS_PROFILE or default]; that profile's credential_process; the container
// endpoint (AWS_CONTAINER_CREDENTIALS_*_URI); the EC2 instance metadata
// service (IMDSv2). A source that is configured but fails is an error (as in
// the SDKs): the chain does not go on to a source the user did not choose.

// When nothing matches, one line lists what was tried and why each gave
// nothing.
//
// Refresh: keys with an Expiration are fetched again, in a background
// thread, once less than min(5 min, half their lifetime) is left, and at
// once when S3 answers ExpiredToken (Rejected). Readers keep signing with
// the current keys meanwhile (an atomically swapped shared_ptr); only once
// they have expired does a reader wait, for at most its own deadline, for
// the refresh in flight. A failed refresh is logged in one line and the old
// keys stay in use until they expire; then requests fail with EACCES.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/remote/s3_credentials.h"
#include "core/status.h"

namespace stfs {

// Fetches fresh keys from the source that gave the first ones; ends within
// that source's deadline, sooner once `cancel` is true.
using S3CredentialFetch = std::function<StatusOr<S3Credentials>(const std::atomic<bool>* cancel)>;

class S3CredentialProvider {
 public:
  using Keys = std::shared_ptr<const S3Credentials>;
  using Deadline = std::chrono::steady_clock::time_point;

  // Keys that are never refreshed (static keys, anonymous).
  explicit S3CredentialProvider(S3Credentials fixed);
  // Keys `fetch` gave; refreshed with it while they have an expiration.
  S3CredentialProvider(S3Credentials first, S3CredentialFetch fetch);
  ~S3CredentialProvider();
  S3CredentialProvider(const S3CredentialProvider&) = delete;
  S3CredentialProvider& operator=(const S3CredentialProvider&) = delete;

  // The keys to sign a request with now. Starts a refresh when one is due;
  // when the keys have expired (or were rejected), waits for the refresh
  // until `wait_until`. IOError with EACCES, one line naming where the keys
  // came from and why no valid ones are left, when there are none.
  StatusOr<Keys> Current(Deadline wait_until);

  // S3 refused a request signed with `used` as expired: unless newer keys
  // are already in place, they are fetched again now. The caller then asks
  // Current() again. Returns false when that cannot help (fixed keys).
  bool Rejected(const Keys& used);

  // "access key AKIA... from ORIGIN (secret hidden)", with ", refreshed
  // before it expires" for temporary keys. Never a secret.
  std::string Describe() const;
  bool anonymous() const { return anonymous_; }

 private:
  void StartRefreshLocked();
  void RefreshInBackground();
  bool UsableLocked(std::chrono::system_clock::time_point now) const;

  const bool anonymous_;
  const std::string describe_;
  const S3CredentialFetch fetch_;

  mutable std::mutex mu_;
  std::condition_variable refreshed_;
  Keys current_;                                     // guarded by mu_
  std::chrono::system_clock::time_point refresh_at_;  // guarded by mu_
  bool rejected_ = false;                             // guarded by mu_: current_ refused by S3
  bool refreshing_ = false;                           // guarded by mu_
  std::chrono::steady_clock::time_point next_attempt_{};  // guarded by mu_: after a failure
  std::string last_error_;                            // guarded by mu_: of the last failed refresh
  std::thread worker_;                                // guarded by mu_
  std::atomic<bool> cancel_{false};
};

// Walks the chain (see above) and returns the provider of what it found.
// Providers of temporary keys are shared by every object of the process
// with the same source, so a mount of many shards runs credential_process
// (or asks the metadata service) once, not once per shard.
StatusOr<std::shared_ptr<S3CredentialProvider>> ResolveS3Credentials(const S3CredentialOptions& options,
                                                                     const EnvLookup& env = ProcessEnv);

}  // namespace stfs
