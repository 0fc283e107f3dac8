#!/usr/bin/env python3
"""Test server that checks AWS SigV4 signatures, for tests/remote/s3_*.

s3rver accepts any secret, so it cannot show that a signature is right. This
server recomputes the signature of every GET the way S3 does (canonical URI
as sent, query re-encoded and sorted, the signed headers, the payload hash
header) with the stdlib's hmac, for one key pair given on the command line,
and answers 200 "signature ok REGION SERVICE PATH?QUERY key ACCESS_KEY_ID" or
403 with what differed. Test use only.

    s3_sigv4_check.py PORT ACCESS_KEY_ID SECRET_ACCESS_KEY

With ACCESS_KEY_ID "-" and SECRET_ACCESS_KEY "derive:PREFIX", any key id is
taken, its secret is PREFIX + the id and its session token must be
"token-for-" + the id (the keys fake_metadata_server.py hands out); an id
ending in E<epoch> is answered as S3 answers expired keys (400 ExpiredToken)
from that second on.
"""
import hashlib
import hmac
import http.server
import re
import sys
import time
import urllib.parse



def aws_encode(text):
    return urllib.parse.quote(text, safe="~")  # quote keeps A-Za-z0-9-._ and what safe adds


def canonical_query(raw):
    if not raw:
        return ""
    pairs = []
    for part in raw.split("&"):
        name, _, value = part.partition("=")
        pairs.append((aws_encode(urllib.parse.unquote(name)), aws_encode(urllib.parse.unquote(value))))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def hmac_sha256(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def authorization_fields(headers):
    auth = headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return None
    return dict(f.strip().split("=", 1) for f in auth[len("AWS4-HMAC-SHA256 "):].split(","))


def signature_problem(raw_path, headers, key_id, secret, method="GET", body=None):
    """What is wrong with the SigV4 signature of a GET (or `method` with
    `body`) of `raw_path` (as sent) with `headers`, for `key_id` (None: any)
    and `secret`; None when it is the one S3 computes. Also used by
    fault_proxy.py's sigv4 fault and fake_metadata_server.py's STS."""
    fields = authorization_fields(headers)
    if fields is None:
        return "no SigV4 Authorization header"
    cred_key_id, date, region, service, _ = fields["Credential"].split("/")
    if key_id is not None and cred_key_id != key_id:
        return "unknown access key"
    signed = fields["SignedHeaders"].split(";")
    if signed != sorted(signed) or "host" not in signed or "x-amz-date" not in signed:
        return "SignedHeaders not sorted or lacks host / x-amz-date"
    for name in signed:
        if headers.get(name) is None:
            return f"signed header {name} was not sent"
    path, _, query = raw_path.partition("?")
    canonical_headers = "".join(f"{n}:{' '.join(headers.get(n).split())}\n" for n in signed)
    payload = headers.get("x-amz-content-sha256")
    if payload is None and body is not None:
        payload = hashlib.sha256(body).hexdigest()
    if payload is None:
        return "no x-amz-content-sha256"
    request = "\n".join([method, path, canonical_query(query), canonical_headers, ";".join(signed), payload])
    amz_date = headers.get("x-amz-date")
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(request.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac_sha256(key, part)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields["Signature"]):
        return "signature mismatch; canonical request was:\n" + request
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def s3_error(self, status, code):
        self.answer(status, f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>"
                            f"<Message>{code}</Message></Error>")

    def do_GET(self):
        key_id, secret = self.server.key_id, self.server.secret
        fields = authorization_fields(self.headers)
        if secret.startswith("derive:") and fields is not None:
            key_id = fields["Credential"].split("/")[0]
            secret = secret[len("derive:"):] + key_id
            expiry = re.search(r"E(\d+)$", key_id)
            if expiry and time.time() >= int(expiry.group(1)):
                return self.s3_error(400, "ExpiredToken")
            if self.headers.get("x-amz-security-token") != "token-for-" + key_id:
                return self.s3_error(403, "InvalidToken")
        problem = signature_problem(self.path, self.headers, None if key_id == "-" else key_id, secret)
        if problem:
            return self.answer(403, problem)
        cred_key_id, _, region, service, _ = fields["Credential"].split("/")
        path, _, query = self.path.partition("?")
        self.answer(200, f"signature ok {region} {service} {path}?{query} key {cred_key_id}")

    def log_message(self, *args):
        pass


def main():
    port, key_id, secret = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.key_id, server.secret = key_id, secret
    server.serve_forever()


if __name__ == "__main__":
    main()
