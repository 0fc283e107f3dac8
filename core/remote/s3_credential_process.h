// credential_process: keys from a command named in the shared config file
// (aws-vault, SSO exporters, a site's own helper), run as the AWS CLI does.
//
// The command line is split the way the AWS CLI splits it on POSIX
// (shlex.split: whitespace, '...' literal, "..." with \-escapes of \ " $ `,
// a backslash outside quotes escaping the next character) and run without a
// shell, found in PATH. It gets /dev/null as stdin and stderr: what it prints
// there may hold secrets, and no message ever shows it; stdout is read (at
// most 64 KiB) and must be the credential JSON. It runs in its own process
// group, and the whole group is killed when it outlives its deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/remote/s3_credentials.h"
#include "core/status.h"

namespace stfs {

// Splits `command` into argv as shlex.split does. InvalidArgument for an
// unterminated quote or an empty command.
StatusOr<std::vector<std::string>> SplitCommandLine(std::string_view command);

// Runs `command` and parses what it prints (s3_credential_json.h). `origin`
// names the config file and profile in messages ("credential_process of
// FILE [profile P]"). Ends within `timeout`, or sooner once `cancel` (when
// set) becomes true. Every error is one line without the command's output.
StatusOr<S3Credentials> RunCredentialProcess(const std::string& command, const std::string& origin,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<bool>* cancel = nullptr);

}  // namespace stfs
