#!/usr/bin/env python3
"""A fake of the two AWS metadata services stfs takes keys from, for
tests/remote (stdlib only; no real service is reachable from a test).

  EC2 instance metadata, IMDSv2:
    PUT /latest/api/token (needs X-aws-ec2-metadata-token-ttl-seconds)
        -> a session token;
    GET /latest/meta-data/iam/security-credentials/       -> "test-role"
    GET /latest/meta-data/iam/security-credentials/test-role -> keys JSON
    Both GETs answer 401 without a valid X-aws-ec2-metadata-token.
  Container endpoint (ECS / EKS Pod Identity):
    GET /container/... -> keys JSON; 401 unless Authorization is the token
    given on the command line.
  STS, for web identity (EKS IRSA):
    POST /sts/ with Action=AssumeRoleWithWebIdentity, Version=2011-06-15,
    RoleArn=ROLE_ARN, RoleSessionName and WebIdentityToken (the same token)
    -> AssumeRoleWithWebIdentityResponse XML; else 400 (or 403 for a wrong
    token) with an ErrorResponse.
  STS, for profiles with role_arn:
    POST /sts/ with Action=AssumeRole, Version=2011-06-15, RoleArn
    (arn:aws:iam::...; one holding "denied" gets 403 AccessDenied) and
    RoleSessionName, SigV4-signed for service sts (the signature is
    recomputed, s3_sigv4_check.py) with SOURCE_KEY / SOURCE_SECRET or a key
    this server handed out (with its session token) -> AssumeRoleResponse
    XML; a request unsigned or signed with another key or badly gets 403
    InvalidClientTokenId / SignatureDoesNotMatch. Each AssumeRole is recorded
    in stats "assumed": role, the key it was signed with, session name,
    ExternalId, DurationSeconds.

Keys: with key=ID&secret=S (control), always that pair; otherwise a new pair
on each fetch: AccessKeyId "ASIAFAKE<n>E<expiry epoch>", SecretAccessKey
"secret-for-<id>", Token "token-for-<id>" (s3_sigv4_check.py's derive mode
checks exactly these, and answers ExpiredToken after the epoch in the id).

Control (never faulted):
  GET /__control__/set?expires_in=N&real_expires_in=R&mode=M&status=S&seconds=T&key=ID&secret=S
      expires_in: the Expiration sent, in seconds from now (default 3600);
      real_expires_in: when the key really stops working (default expires_in);
      mode: ok, hang (answer nothing for `seconds`), status (answer `status`
      to credential requests), garbage (200 with a body that is not JSON).
  GET /__control__/stats -> {"fetches": N, "tokens": M, "unauthorized": K, "assumed": [...]}

Usage: fake_metadata_server.py CONTAINER_TOKEN PORT_FILE
"""
import datetime
import http.server
import json
import secrets
import sys
import threading
import time
import urllib.parse

import fault_proxy  # next to this file (sys.path[0]): its threaded server
import s3_sigv4_check  # its signature check

LOCK = threading.Lock()
STATE = {"expires_in": 3600.0, "real_expires_in": None, "mode": "ok", "status": 500, "seconds": 30.0,
         "key": "", "secret": "", "fetches": 0, "tokens": 0, "unauthorized": 0, "serial": 0}
IMDS_TOKENS = set()
CONTAINER_TOKEN = ""
ROLE = "test-role"
ROLE_ARN = "arn:aws:iam::123456789012:role/test-role"
ROLE_PATH = "/latest/meta-data/iam/security-credentials/"
SOURCE_KEY = "AKIASOURCEKEY"  # the static keys AssumeRole may be signed with
SOURCE_SECRET = "source-secret"
ISSUED = set()  # key ids handed out: they may sign an AssumeRole too (role chains)
ASSUMED = []


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body, content_type="text/plain"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def keys(self, render):
        """Answers a credential request as the knobs say; `render` makes the
        body of a good answer from the key fields."""
        with LOCK:
            STATE["fetches"] += 1
            STATE["serial"] += 1
            config = dict(STATE)
        if config["mode"] == "hang":
            time.sleep(config["seconds"])
            self.close_connection = True
            return
        if config["mode"] == "status":
            return self.send(config["status"], "injected")
        if config["mode"] == "garbage":
            return self.send(200, "<html>not json, AKIASECRETLOOKING</html>")
        now = time.time()
        expiry = now + config["expires_in"]
        real = now + (config["real_expires_in"] if config["real_expires_in"] is not None else config["expires_in"])
        if config["key"]:
            key_id, secret = config["key"], config["secret"]
        else:
            key_id = "ASIAFAKE%04dE%d" % (config["serial"], int(real))
            secret = "secret-for-" + key_id
        with LOCK:
            ISSUED.add(key_id)
        fields = {"AccessKeyId": key_id, "SecretAccessKey": secret, "Token": "token-for-" + key_id,
                  "Expiration": datetime.datetime.fromtimestamp(expiry, datetime.timezone.utc)
                  .strftime("%Y-%m-%dT%H:%M:%SZ")}
        self.send(200, *render(fields))

    @staticmethod
    def json_keys(fields, metadata_fields=False):
        body = dict(fields)
        if metadata_fields:
            body.update({"Code": "Success", "Type": "AWS-HMAC",
                         "LastUpdated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})
        return json.dumps(body), "application/json"

    @staticmethod
    def sts_keys(fields):
        return ("<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                "<AssumeRoleWithWebIdentityResult><Credentials>"
                "<AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey>"
                "<SessionToken>%s</SessionToken><Expiration>%s</Expiration>"
                "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
                % (fields["AccessKeyId"], fields["SecretAccessKey"], fields["Token"], fields["Expiration"]),
                "text/xml")

    @staticmethod
    def assume_role_keys(fields):
        return ("<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                "<AssumeRoleResult><Credentials>"
                "<AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey>"
                "<SessionToken>%s</SessionToken><Expiration>%s</Expiration>"
                "</Credentials><AssumedRoleUser><Arn>x</Arn></AssumedRoleUser></AssumeRoleResult>"
                "</AssumeRoleResponse>"
                % (fields["AccessKeyId"], fields["SecretAccessKey"], fields["Token"], fields["Expiration"]),
                "text/xml")

    def assume_role(self, field, body):
        fields = s3_sigv4_check.authorization_fields(self.headers)
        if fields is None:
            return self.sts_error(403, "MissingAuthenticationToken")
        key_id, _, _, service, _ = fields["Credential"].split("/")
        with LOCK:
            issued = key_id in ISSUED
        if key_id == SOURCE_KEY:
            secret = SOURCE_SECRET
        elif issued:
            secret = "secret-for-" + key_id
            if self.headers.get("x-amz-security-token") != "token-for-" + key_id:
                return self.sts_error(403, "InvalidClientTokenId")
        else:
            return self.sts_error(403, "InvalidClientTokenId")
        if service != "sts" or s3_sigv4_check.signature_problem(self.path, self.headers, key_id, secret,
                                                                "POST", body):
            return self.sts_error(403, "SignatureDoesNotMatch")
        role = field("RoleArn")
        if not role.startswith("arn:aws:iam::") or not field("RoleSessionName"):
            return self.sts_error(400, "ValidationError")
        if "denied" in role:
            return self.sts_error(403, "AccessDenied")
        with LOCK:
            ASSUMED.append({"role": role, "key": key_id, "session": field("RoleSessionName"),
                            "external_id": field("ExternalId"), "duration": field("DurationSeconds")})
        return self.keys(self.assume_role_keys)

    def sts_error(self, status, code):
        self.send(status, "<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>refused</Message>"
                          "</Error></ErrorResponse>" % code, "text/xml")

    def unauthorized(self):
        with LOCK:
            STATE["unauthorized"] += 1
        self.send(401, "unauthorized")

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(length)
        form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True)
        if self.path.rstrip("/") != "/sts":
            return self.send(404, "not found")
        field = lambda name: form.get(name, [""])[0]
        if field("Action") == "AssumeRole" and field("Version") == "2011-06-15":
            return self.assume_role(field, body)
        if (field("Action") != "AssumeRoleWithWebIdentity" or field("Version") != "2011-06-15"
                or field("RoleArn") != ROLE_ARN or not field("RoleSessionName")):
            return self.sts_error(400, "ValidationError")
        if field("WebIdentityToken") != CONTAINER_TOKEN:
            with LOCK:
                STATE["unauthorized"] += 1
            return self.sts_error(403, "InvalidIdentityToken")
        return self.keys(self.sts_keys)

    def do_PUT(self):
        length = int(self.headers.get("Content-Length", "0") or 0)
        if length:
            self.rfile.read(length)
        if self.path != "/latest/api/token":
            return self.send(404, "not found")
        if self.headers.get("X-aws-ec2-metadata-token-ttl-seconds") is None:
            return self.send(400, "missing ttl")
        token = secrets.token_urlsafe(24)
        with LOCK:
            IMDS_TOKENS.add(token)
            STATE["tokens"] += 1
        self.send(200, token)

    def do_GET(self):
        parsed = urllib.parse.urlsplit(self.path)
        if parsed.path.startswith("/__control__/"):
            return self.control(parsed)
        if parsed.path.startswith("/container/"):
            if self.headers.get("Authorization") != CONTAINER_TOKEN:
                return self.unauthorized()
            return self.keys(self.json_keys)
        if parsed.path.startswith(ROLE_PATH):
            with LOCK:
                known = self.headers.get("X-aws-ec2-metadata-token") in IMDS_TOKENS
            if not known:
                return self.unauthorized()
            if parsed.path == ROLE_PATH:
                with LOCK:
                    hang = STATE["mode"] == "hang"
                    seconds = STATE["seconds"]
                if hang:
                    time.sleep(seconds)
                    self.close_connection = True
                    return
                return self.send(200, ROLE)
            if parsed.path == ROLE_PATH + ROLE:
                return self.keys(lambda fields: self.json_keys(fields, metadata_fields=True))
        self.send(404, "not found")

    def control(self, parsed):
        query = urllib.parse.parse_qs(parsed.query)
        with LOCK:
            if parsed.path == "/__control__/set":
                STATE["expires_in"] = float(query.get("expires_in", ["3600"])[0])
                real = query.get("real_expires_in")
                STATE["real_expires_in"] = float(real[0]) if real else None
                STATE["mode"] = query.get("mode", ["ok"])[0]
                STATE["status"] = int(query.get("status", ["500"])[0])
                STATE["seconds"] = float(query.get("seconds", ["30"])[0])
                STATE["key"] = query.get("key", [""])[0]
                STATE["secret"] = query.get("secret", [""])[0]
            stats = {k: STATE[k] for k in ("fetches", "tokens", "unauthorized")}
            stats["assumed"] = ASSUMED
            body = json.dumps(stats)
        self.send(200, body, "application/json")


def main():
    global CONTAINER_TOKEN
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    CONTAINER_TOKEN = sys.argv[1]
    fault_proxy.serve(Handler, sys.argv[2])  # quiet about clients that give up on a hang
    return 0


if __name__ == "__main__":
    sys.exit(main())
