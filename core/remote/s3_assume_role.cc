// Role chains of config file profiles (see s3_assume_role.h).
#include "core/remote/s3_assume_role.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "core/remote/s3_credential_process.h"
#include "core/remote/s3_metadata_credentials.h"

namespace stfs {
namespace {

// One AssumeRole, as a profile configures it.
struct RoleStep {
  std::string origin;  // "role ARN of [profile NAME] in CONFIG"
  std::string role_arn;
  std::string session_name;
  std::string external_id;
  std::string duration_seconds;
};

using Settings = std::map<std::string, std::string>;

std::string Setting(const Settings& settings, const char* key) {
  auto it = settings.find(key);
  return it == settings.end() ? "" : it->second;
}

std::string SectionName(const std::string& profile) {
  return profile == "default" ? "[default]" : "[profile " + profile + "]";
}

// The static keys of `profile`: the credentials file's, else the config file's.
StatusOr<S3Credentials> StaticKeys(const std::string& profile, const Settings& settings,
                                   const std::string& credentials_file, const std::string& config,
                                   const std::string& wanted_by) {
  StatusOr<S3Credentials> keys = ReadS3CredentialsFile(credentials_file, profile);
  if (keys.ok() || keys.status().code() != StatusCode::kNotFound) return keys;
  std::string id = Setting(settings, "aws_access_key_id");
  std::string secret = Setting(settings, "aws_secret_access_key");
  if (id.empty() || secret.empty()) {
    return Status::NotFound(wanted_by + ": source_profile " + profile + " has no keys in " + credentials_file +
                            " nor in " + config);
  }
  return S3Credentials::Keys(std::move(id), std::move(secret), Setting(settings, "aws_session_token"),
                             config + " " + SectionName(profile));
}

// The fetch of a credential_source (the AWS CLI's three names).
StatusOr<S3CredentialFetch> CredentialSource(const std::string& name, const std::string& wanted_by,
                                             const S3CredentialOptions& options, const EnvLookup& env) {
  const std::string what = wanted_by + ": credential_source " + name;
  if (name == "Environment") {
    std::string id = env("AWS_ACCESS_KEY_ID").value_or("");
    std::string secret = env("AWS_SECRET_ACCESS_KEY").value_or("");
    if (id.empty() || secret.empty()) {
      return Status::InvalidArgument(what + " needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    }
    S3Credentials keys = S3Credentials::Keys(std::move(id), std::move(secret),
                                             env("AWS_SESSION_TOKEN").value_or(""), "environment");
    return S3CredentialFetch([keys](const std::atomic<bool>*) -> StatusOr<S3Credentials> { return keys; });
  }
  if (name == "Ec2InstanceMetadata") {
    std::optional<std::string> endpoint = S3InstanceMetadataEndpoint(env);
    if (!endpoint) return Status::InvalidArgument(what + ", but AWS_EC2_METADATA_DISABLED=true");
    return S3CredentialFetch([endpoint = *endpoint, timeout = options.instance_metadata_timeout](
                                 const std::atomic<bool>*) { return FetchS3InstanceCredentials(endpoint, timeout); });
  }
  if (name == "EcsContainer") {
    ASSIGN_OR_RETURN(std::optional<S3ContainerEndpoint> endpoint, S3ContainerEndpointFromEnv(env));
    if (!endpoint) {
      return Status::InvalidArgument(what + ", but AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI is not set");
    }
    return S3CredentialFetch([endpoint = *endpoint, timeout = options.container_timeout](const std::atomic<bool>*) {
      return FetchS3ContainerCredentials(endpoint, timeout);
    });
  }
  return Status::InvalidArgument(what + " is none of Environment, Ec2InstanceMetadata, EcsContainer");
}

StatusOr<RoleStep> StepOf(const std::string& profile, const Settings& settings, const std::string& config) {
  RoleStep step;
  step.role_arn = Setting(settings, "role_arn");
  step.origin = "role " + step.role_arn + " of " + SectionName(profile) + " in " + config;
  step.session_name = Setting(settings, "role_session_name");
  if (step.session_name.empty()) step.session_name = S3DefaultSessionName();
  step.external_id = Setting(settings, "external_id");
  step.duration_seconds = Setting(settings, "duration_seconds");
  if (!std::all_of(step.duration_seconds.begin(), step.duration_seconds.end(),
                   [](unsigned char c) { return std::isdigit(c); }) ||
      step.duration_seconds.size() > 6) {
    return Status::InvalidArgument(step.origin + ": duration_seconds is not a number of seconds");
  }
  const bool has_profile = !Setting(settings, "source_profile").empty();
  const bool has_source = !Setting(settings, "credential_source").empty();
  if (has_profile == has_source) {
    return Status::InvalidArgument(step.origin + ": needs exactly one of source_profile and credential_source");
  }
  return step;
}

StatusOr<S3Credentials> AssumeRole(const RoleStep& step, const S3Credentials& source, const std::string& sts_url,
                                   const std::string& region, std::chrono::milliseconds timeout) {
  std::string form = "Action=AssumeRole&Version=2011-06-15&RoleArn=" + S3StsFormEscape(step.role_arn) +
                     "&RoleSessionName=" + S3StsFormEscape(step.session_name);
  if (!step.external_id.empty()) form += "&ExternalId=" + S3StsFormEscape(step.external_id);
  if (!step.duration_seconds.empty()) form += "&DurationSeconds=" + step.duration_seconds;
  return FetchS3StsCredentials(step.origin, "AssumeRole", sts_url, form, &source, region, timeout);
}

}  // namespace

StatusOr<std::optional<S3AssumeRolePlan>> PlanS3AssumeRole(const std::string& profile,
                                                           const std::string& credentials_file,
                                                           const std::string& config,
                                                           const S3CredentialOptions& options,
                                                           const EnvLookup& env) {
  ASSIGN_OR_RETURN(Settings settings, ReadS3ConfigProfile(config, profile));
  if (Setting(settings, "role_arn").empty()) return std::optional<S3AssumeRolePlan>();

  std::vector<RoleStep> steps;  // the selected profile's role first
  std::vector<std::string> visited;
  std::string current = profile;
  S3CredentialFetch source;
  while (!source) {
    ASSIGN_OR_RETURN(RoleStep step, StepOf(current, settings, config));
    const std::string wanted_by = step.origin;
    steps.push_back(std::move(step));
    visited.push_back(current);
    if (std::string name = Setting(settings, "credential_source"); !name.empty()) {
      ASSIGN_OR_RETURN(source, CredentialSource(name, wanted_by, options, env));
      break;
    }
    const std::string next = Setting(settings, "source_profile");
    Settings next_settings = settings;
    if (next != current) {
      if (std::find(visited.begin(), visited.end(), next) != visited.end()) {
        std::string loop;
        for (const std::string& p : visited) loop += p + " -> ";
        return Status::InvalidArgument("the source_profile chain of " + SectionName(profile) + " in " + config +
                                       " loops: " + loop + next);
      }
      ASSIGN_OR_RETURN(next_settings, ReadS3ConfigProfile(config, next));
      if (!Setting(next_settings, "role_arn").empty()) {
        if (static_cast<int>(steps.size()) >= kMaxS3RoleChain) {
          return Status::InvalidArgument("the source_profile chain of " + SectionName(profile) + " in " + config +
                                         " is longer than " + std::to_string(kMaxS3RoleChain) + " roles");
        }
        current = next;
        settings = std::move(next_settings);
        continue;
      }
    }
    // A profile of static keys (or the role's own profile, as its own
    // source), else of a credential_process: the AWS CLI's order.
    StatusOr<S3Credentials> keys = StaticKeys(next, next_settings, credentials_file, config, wanted_by);
    const std::string command = Setting(next_settings, "credential_process");
    if (!keys.ok() && keys.status().code() == StatusCode::kNotFound && !command.empty()) {
      // Run again at every fetch: its keys may be temporary too.
      source = [command, origin = "credential_process of " + config + " " + SectionName(next),
                timeout = options.process_timeout](const std::atomic<bool>* cancel) {
        return RunCredentialProcess(command, origin, timeout, cancel);
      };
      break;
    }
    if (!keys.ok()) return keys.status();
    source = [keys = *keys](const std::atomic<bool>*) -> StatusOr<S3Credentials> { return keys; };
  }

  const std::string sts_url = S3StsUrl(env);
  const std::string region = S3StsRegion(env);
  const std::chrono::milliseconds timeout = options.assume_role_timeout;
  S3AssumeRolePlan plan;
  plan.source_key = "assume role\n" + config + "\n" + profile + "\n" + credentials_file + "\n" + sts_url;
  plan.fetch = [steps, source, sts_url, region, timeout](const std::atomic<bool>* cancel) -> StatusOr<S3Credentials> {
    StatusOr<S3Credentials> source_keys = source(cancel);
    if (!source_keys.ok()) {
      return Status::IOError(steps.back().origin + ": no source keys: " + source_keys.status().message(),
                             source_keys.status().sys_errno());
    }
    S3Credentials keys = std::move(*source_keys);
    // From the role nearest the source out to the selected profile's.
    for (auto step = steps.rbegin(); step != steps.rend(); ++step) {
      if (cancel && cancel->load()) return Status::IOError(step->origin + ": cancelled");
      ASSIGN_OR_RETURN(keys, AssumeRole(*step, keys, sts_url, region, timeout));
    }
    return keys;
  };
  return std::optional<S3AssumeRolePlan>(std::move(plan));
}

}  // namespace stfs
