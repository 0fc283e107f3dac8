// The credential chain and the refreshing provider (see s3_credential_provider.h).
#include "core/remote/s3_credential_provider.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <vector>

#include "core/remote/s3_assume_role.h"
#include "core/remote/s3_credential_json.h"
#include "core/remote/s3_credential_process.h"
#include "core/remote/s3_metadata_credentials.h"

namespace stfs {
namespace {

using SystemClock = std::chrono::system_clock;
using SteadyClock = std::chrono::steady_clock;

constexpr std::chrono::minutes kRefreshAhead{5};

std::string Section(const std::string& profile) {
  return profile == "default" ? "[default]" : "[profile " + profile + "]";
}

// Providers of temporary keys, by source, while some object uses them.
std::mutex registry_mu;
std::map<std::string, std::weak_ptr<S3CredentialProvider>>& Registry() {
  static auto* registry = new std::map<std::string, std::weak_ptr<S3CredentialProvider>>();
  return *registry;
}

// Returns the provider of `source`, fetching its first keys when there is
// none. The lock is held during that first fetch on purpose: the shards of
// one mount, opened together, wait for one fetch instead of each running one.
StatusOr<std::shared_ptr<S3CredentialProvider>> SharedProvider(const std::string& source,
                                                               const S3CredentialFetch& fetch) {
  std::lock_guard<std::mutex> lock(registry_mu);
  auto& registry = Registry();
  for (auto it = registry.begin(); it != registry.end();) {
    it = it->second.expired() ? registry.erase(it) : std::next(it);
  }
  if (auto found = registry.find(source); found != registry.end()) {
    if (std::shared_ptr<S3CredentialProvider> provider = found->second.lock()) return provider;
  }
  ASSIGN_OR_RETURN(S3Credentials first, fetch(nullptr));
  auto provider = std::make_shared<S3CredentialProvider>(std::move(first), fetch);
  registry[source] = provider;
  return provider;
}

std::shared_ptr<S3CredentialProvider> Fixed(S3Credentials credentials) {
  return std::make_shared<S3CredentialProvider>(std::move(credentials));
}

// The profile's credential_process, or null when the config file names none.
StatusOr<std::shared_ptr<S3CredentialProvider>> FromCredentialProcess(const std::string& config,
                                                                      const std::string& profile,
                                                                      const S3CredentialOptions& options) {
  ASSIGN_OR_RETURN(auto settings, ReadS3ConfigProfile(config, profile));
  auto command = settings.find("credential_process");
  if (command == settings.end() || command->second.empty()) return std::shared_ptr<S3CredentialProvider>();
  std::string origin = "credential_process of " + config + " " + Section(profile);
  std::chrono::milliseconds timeout = options.process_timeout;
  S3CredentialFetch fetch = [command = command->second, origin, timeout](const std::atomic<bool>* cancel) {
    return RunCredentialProcess(command, origin, timeout, cancel);
  };
  return SharedProvider("process\n" + config + "\n" + profile + "\n" + command->second, fetch);
}

// The profile's role (role_arn), or null when it has none.
StatusOr<std::shared_ptr<S3CredentialProvider>> FromAssumeRole(const std::string& file, const std::string& config,
                                                               const std::string& profile,
                                                               const S3CredentialOptions& options,
                                                               const EnvLookup& env) {
  ASSIGN_OR_RETURN(std::optional<S3AssumeRolePlan> plan, PlanS3AssumeRole(profile, file, config, options, env));
  if (!plan) return std::shared_ptr<S3CredentialProvider>();
  return SharedProvider(plan->source_key, plan->fetch);
}

}  // namespace

S3CredentialProvider::S3CredentialProvider(S3Credentials fixed)
    : anonymous_(fixed.anonymous()),
      describe_(fixed.Describe()),
      current_(std::make_shared<const S3Credentials>(std::move(fixed))) {}

S3CredentialProvider::S3CredentialProvider(S3Credentials first, S3CredentialFetch fetch)
    : anonymous_(false),
      describe_(first.Describe() + (first.expiration() ? ", refreshed before it expires" : "")),
      fetch_(std::move(fetch)) {
  const auto now = SystemClock::now();
  if (first.expiration()) {
    auto ahead = std::min<SystemClock::duration>(kRefreshAhead, (*first.expiration() - now) / 2);
    refresh_at_ = *first.expiration() - ahead;
  }
  current_ = std::make_shared<const S3Credentials>(std::move(first));
}

S3CredentialProvider::~S3CredentialProvider() {
  std::thread worker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancel_.store(true);
    worker = std::move(worker_);
  }
  if (worker.joinable()) worker.join();
}

std::string S3CredentialProvider::Describe() const { return describe_; }

bool S3CredentialProvider::UsableLocked(SystemClock::time_point now) const {
  if (rejected_) return false;
  return !current_->expiration() || now < *current_->expiration();
}

void S3CredentialProvider::StartRefreshLocked() {
  if (refreshing_ || !fetch_ || cancel_.load() || SteadyClock::now() < next_attempt_) return;
  refreshing_ = true;
  // The previous refresh has finished (refreshing_ was false): joining is immediate.
  if (worker_.joinable()) worker_.join();
  worker_ = std::thread([this] { RefreshInBackground(); });
}

void S3CredentialProvider::RefreshInBackground() {
  StatusOr<S3Credentials> fresh = fetch_(&cancel_);
  const auto now = SystemClock::now();
  if (fresh.ok() && fresh->expiration() && *fresh->expiration() <= now) {
    fresh = Status::IOError(fresh->origin() + ": the new keys expired already (at " +
                            FormatIso8601(*fresh->expiration()) + ")");
  }
  std::lock_guard<std::mutex> lock(mu_);
  refreshing_ = false;
  if (fresh.ok()) {
    if (fresh->expiration()) {
      auto ahead = std::min<SystemClock::duration>(kRefreshAhead, (*fresh->expiration() - now) / 2);
      refresh_at_ = *fresh->expiration() - ahead;
    }
    current_ = std::make_shared<const S3Credentials>(std::move(*fresh));
    rejected_ = false;
    if (!last_error_.empty()) std::fprintf(stderr, "stfs: S3 credentials refreshed after a failure\n");
    last_error_.clear();
  } else if (!cancel_.load()) {
    // Retry soon when the keys are unusable, else spread attempts over what is left.
    auto left = current_->expiration() ? *current_->expiration() - now : SystemClock::duration::zero();
    auto backoff = std::clamp<SteadyClock::duration>(std::chrono::duration_cast<SteadyClock::duration>(left / 10),
                                                     std::chrono::seconds(1), std::chrono::seconds(30));
    if (!UsableLocked(now)) backoff = std::chrono::seconds(1);
    next_attempt_ = SteadyClock::now() + backoff;
    if (last_error_.empty()) {
      std::string until = current_->expiration() ? FormatIso8601(*current_->expiration()) : "";
      if (UsableLocked(now)) {
        std::fprintf(stderr, "stfs: refreshing S3 credentials failed: %s; the current keys stay in use until %s\n",
                     fresh.status().message().c_str(), until.c_str());
      } else {
        std::fprintf(stderr, "stfs: refreshing S3 credentials failed: %s; S3 reads fail until it works\n",
                     fresh.status().message().c_str());
      }
    }
    last_error_ = fresh.status().message();
  }
  refreshed_.notify_all();
}

StatusOr<S3CredentialProvider::Keys> S3CredentialProvider::Current(Deadline wait_until) {
  std::unique_lock<std::mutex> lock(mu_);
  if (fetch_ && (rejected_ || (current_->expiration() && SystemClock::now() >= refresh_at_))) {
    StartRefreshLocked();
  }
  if (UsableLocked(SystemClock::now())) return current_;
  // Expired or refused: only a refresh can help; wait for the one in flight.
  while (refreshing_ && refreshed_.wait_until(lock, wait_until) != std::cv_status::timeout) {
  }
  if (UsableLocked(SystemClock::now())) return current_;
  std::string why = rejected_ ? "S3 refused them as expired"
                              : "they expired at " + FormatIso8601(*current_->expiration());
  std::string message = "no valid S3 credentials: the keys from " + current_->origin() + " are unusable (" + why;
  if (refreshing_) {
    message += "; a refresh is still running)";
  } else if (!last_error_.empty()) {
    message += "; refreshing failed: " + last_error_ + ")";
  } else {
    message += ")";
  }
  return Status::IOError(message, EACCES);
}

bool S3CredentialProvider::Rejected(const Keys& used) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!fetch_) return false;
  if (used != current_) return true;  // newer keys are in place already
  rejected_ = true;
  next_attempt_ = {};
  StartRefreshLocked();
  return true;
}

StatusOr<std::shared_ptr<S3CredentialProvider>> ResolveS3Credentials(const S3CredentialOptions& options,
                                                                     const EnvLookup& env) {
  if (options.no_sign) return Fixed(S3Credentials::Anonymous());
  const std::string file = S3CredentialsFilePath(env);
  const std::string config = S3ConfigFilePath(env);
  const std::string profile = S3ProfileName(options.profile, env);
  auto from_file = [&]() -> StatusOr<S3Credentials> { return ReadS3CredentialsFile(file, profile); };

  if (!options.profile.empty()) {
    // A profile the user named: its role, its keys or its credential_process, nothing else.
    ASSIGN_OR_RETURN(std::shared_ptr<S3CredentialProvider> role, FromAssumeRole(file, config, profile, options, env));
    if (role) return role;
    StatusOr<S3Credentials> keys = from_file();
    if (keys.ok()) return Fixed(std::move(*keys));
    if (keys.status().code() != StatusCode::kNotFound) return keys.status();
    ASSIGN_OR_RETURN(std::shared_ptr<S3CredentialProvider> process, FromCredentialProcess(config, profile, options));
    if (process) return process;
    std::ifstream readable(file);
    return Status::NotFound((readable ? "no profile [" + profile + "] in " + file : file + " cannot be read") +
                            ", and " + config + " has no credential_process in " + Section(profile));
  }

  std::vector<std::string> tried;
  std::string key_id = env("AWS_ACCESS_KEY_ID").value_or("");
  std::string secret = env("AWS_SECRET_ACCESS_KEY").value_or("");
  if (!key_id.empty() || !secret.empty()) {
    if (key_id.empty() || secret.empty()) {
      return Status::InvalidArgument("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
    }
    return Fixed(S3Credentials::Keys(std::move(key_id), std::move(secret),
                                     env("AWS_SESSION_TOKEN").value_or(""), "environment"));
  }
  tried.push_back("environment (AWS_ACCESS_KEY_ID not set)");

  // Web identity (EKS IRSA) comes before the files in the SDKs: the pod's
  // role, not whatever a mounted home directory holds.
  ASSIGN_OR_RETURN(std::optional<S3WebIdentity> web_identity, S3WebIdentityFromEnv(env));
  if (web_identity) {
    std::chrono::milliseconds timeout = options.web_identity_timeout;
    return SharedProvider("web identity\n" + web_identity->role_arn + "\n" + web_identity->token_file + "\n" +
                              web_identity->sts_url,
                          [identity = *web_identity, timeout](const std::atomic<bool>*) {
                            return FetchS3WebIdentityCredentials(identity, timeout);
                          });
  }

  // A role_arn comes before the profile's own keys, as in the AWS CLI.
  ASSIGN_OR_RETURN(std::shared_ptr<S3CredentialProvider> role, FromAssumeRole(file, config, profile, options, env));
  if (role) return role;
  StatusOr<S3Credentials> keys = from_file();
  if (keys.ok()) return Fixed(std::move(*keys));
  if (keys.status().code() != StatusCode::kNotFound) return keys.status();
  std::ifstream readable(file);
  tried.push_back(file + " [" + profile + "] (" + (readable ? "no such profile" : "cannot be read") + ")");

  ASSIGN_OR_RETURN(std::shared_ptr<S3CredentialProvider> process, FromCredentialProcess(config, profile, options));
  if (process) return process;
  tried.push_back("credential_process (none in " + config + " " + Section(profile) + ")");

  ASSIGN_OR_RETURN(std::optional<S3ContainerEndpoint> container, S3ContainerEndpointFromEnv(env));
  if (container) {
    std::chrono::milliseconds timeout = options.container_timeout;
    return SharedProvider("container\n" + container->url + "\n" + container->token_file,
                          [endpoint = *container, timeout](const std::atomic<bool>*) {
                            return FetchS3ContainerCredentials(endpoint, timeout);
                          });
  }
  tried.push_back("container (AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI not set)");

  std::optional<std::string> metadata = S3InstanceMetadataEndpoint(env);
  if (!metadata) {
    tried.push_back("instance metadata (AWS_EC2_METADATA_DISABLED=true)");
  } else {
    std::chrono::milliseconds timeout = options.instance_metadata_timeout;
    StatusOr<std::shared_ptr<S3CredentialProvider>> instance =
        SharedProvider("imds\n" + *metadata, [endpoint = *metadata, timeout](const std::atomic<bool>*) {
          return FetchS3InstanceCredentials(endpoint, timeout);
        });
    if (instance.ok()) return instance;
    tried.push_back(instance.status().message());
  }
  std::string text = "no S3 credentials: tried ";
  for (size_t i = 0; i < tried.size(); ++i) text += (i ? ", " : "") + tried[i];
  return Status::NotFound(text + "; use -o no_sign for public buckets");
}

StatusOr<S3Credentials> LoadS3Credentials(const S3CredentialOptions& options, const EnvLookup& env) {
  ASSIGN_OR_RETURN(std::shared_ptr<S3CredentialProvider> provider, ResolveS3Credentials(options, env));
  ASSIGN_OR_RETURN(S3CredentialProvider::Keys keys, provider->Current(SteadyClock::now()));
  return *keys;
}

}  // namespace stfs
