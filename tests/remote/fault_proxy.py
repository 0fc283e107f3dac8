#!/usr/bin/env python3
"""A fault-injecting HTTP proxy for the remote-source tests (stdlib only).

It forwards GET requests to an upstream server (the test's nginx) and, when
told to, breaks them the ways real servers and networks do: an error status
on every k-th request, a reset connection (before or in the middle of the
body), a stall, a 200 that ignores Range, a wrong Content-Range, a short
body, a rewritten ETag, dropped preconditions, expiring signed redirects and
redirects to another origin. In front of a server that checks neither
(s3rver), it can also enforce If-Match and check SigV4 signatures as S3 does.

Control (never counted, never faulted):
  GET /__control__/set?fault=NAME&every=K&limit=L&status=S&seconds=T&etag=E&target=URL&secret=K&region=R
      sets the fault (fault=none clears it) and resets the request counter;
  GET /__control__/bump    makes earlier signed redirect targets expire;
  GET /__control__/stats   returns {"requests": N, "faulted": M, "paths": [...],
                           "statuses": [...]} (status sent for each request).

Faults: status (answer `status`, default 503), reset (RST before any byte),
reset_mid (RST halfway through the body), stall (headers and half the body,
then silence for `seconds`), ignore_range (forward without Range: 200 + the
whole object), wrong_range (Content-Range start and end shifted by one),
drop_range (a 206 without Content-Range), gzip_label (Content-Encoding: gzip
on the unchanged bytes),
short_body (half the body, then close), etag (replace the ETag with `etag`),
drop_etag (remove the ETag), drop_validators (remove ETag and Last-Modified),
strip_preconditions (drop If-Match and If-Unmodified-Since), hang (read the
request, then answer nothing for `seconds`), trickle (the right headers, then
the body one byte a second), endless_error (answer `status` with a body that
never ends), redirect_loop (302 to the same URL, for ever), if_match (S3's
answer to a GET whose If-Match is not the object's ETag: 412
PreconditionFailed instead of the upstream's bytes), sigv4 (S3's 403
SignatureDoesNotMatch for a request whose AWS SigV4 signature is not the one
`secret` gives; checked by s3_sigv4_check.py's code, Host as the client sent
it), wrong_region (S3's answer to a request signed for a region other than
`region`: status=301 (the default) is 301 PermanentRedirect with
x-amz-bucket-region and an XML body naming the regional <Endpoint>;
status=400 is 400 AuthorizationHeaderMalformed naming only <Region> in its
body). `every=K` applies the fault to requests K, 2K, 3K, ... (default 1: all);
`limit=L` to at most L requests (default: no limit).

Paths: /signed/PATH answers 302 to /PATH?sig=G (G the current generation);
a request with a sig other than G gets 403. /xredirect/PATH answers 302 to
TARGET/PATH (another origin). Everything else is forwarded as it is, query
included (an S3 listing's).

Usage: fault_proxy.py UPSTREAM_URL PORT_FILE  (binds 127.0.0.1 on a free
port and writes the port to PORT_FILE once listening).
"""

import http.client
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse

import s3_sigv4_check  # next to this file (sys.path[0])

UPSTREAM = None
STATE_LOCK = threading.Lock()
STATE = {"fault": "none", "every": 1, "limit": -1, "status": 503, "seconds": 5.0, "etag": "",
         "target": "", "secret": "", "region": "", "requests": 0, "faulted": 0, "generation": 1, "paths": [],
         "statuses": []}
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
              "trailer", "upgrade"}


def reset_socket(sock):
    """Closes `sock` with an RST instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep test output quiet
        pass

    def send_response(self, code, message=None):
        if not urllib.parse.urlsplit(self.path).path.startswith("/__control__/"):
            with STATE_LOCK:
                STATE["statuses"].append(code)
        super().send_response(code, message)

    def send_plain(self, status, body=b"", headers=None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_s3_error(self, status, code, message, extra_xml="", headers=None):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message>%s</Error>"
                % (code, message.replace("&", "&amp;").replace("<", "&lt;"), extra_xml)).encode()
        self.send_plain(status, body, dict(headers or {}, **{"Content-Type": "application/xml"}))

    def handle_control(self, parsed):
        query = urllib.parse.parse_qs(parsed.query)
        with STATE_LOCK:
            if parsed.path == "/__control__/set":
                STATE["fault"] = query.get("fault", ["none"])[0]
                STATE["every"] = max(1, int(query.get("every", ["1"])[0]))
                STATE["limit"] = int(query.get("limit", ["-1"])[0])
                STATE["status"] = int(query.get("status", ["503"])[0])
                STATE["seconds"] = float(query.get("seconds", ["5"])[0])
                STATE["etag"] = query.get("etag", [""])[0]
                STATE["target"] = query.get("target", [""])[0]
                STATE["secret"] = query.get("secret", [""])[0]
                STATE["region"] = query.get("region", [""])[0]
                STATE["requests"] = 0
                STATE["faulted"] = 0
                STATE["paths"] = []
                STATE["statuses"] = []
            elif parsed.path == "/__control__/bump":
                STATE["generation"] += 1
            body = json.dumps({"requests": STATE["requests"], "faulted": STATE["faulted"],
                               "generation": STATE["generation"],
                               "paths": STATE["paths"],
                               "statuses": STATE["statuses"]}).encode()
        self.send_plain(200, body, {"Content-Type": "application/json"})

    def do_GET(self):
        parsed = urllib.parse.urlsplit(self.path)
        if parsed.path.startswith("/__control__/"):
            self.handle_control(parsed)
            return
        with STATE_LOCK:
            STATE["requests"] += 1
            STATE["paths"].append(self.path)
            fault = STATE["fault"]
            hit = fault != "none" and STATE["requests"] % STATE["every"] == 0
            if STATE["limit"] >= 0 and STATE["faulted"] >= STATE["limit"]:
                hit = False
            if hit:
                STATE["faulted"] += 1
            config = dict(STATE)

        if parsed.path.startswith("/signed/"):
            location = parsed.path[len("/signed"):] + "?sig=%d" % config["generation"]
            self.send_plain(302, b"", {"Location": location})
            return
        if parsed.path.startswith("/xredirect/"):
            self.send_plain(302, b"", {"Location": config["target"] + parsed.path[len("/xredirect"):]})
            return
        sig = urllib.parse.parse_qs(parsed.query).get("sig")
        if sig and int(sig[0]) != config["generation"]:
            self.send_plain(403, b"expired")
            return

        if hit and fault == "status":
            self.send_plain(config["status"], b"injected")
            return
        if hit and fault == "hang":
            time.sleep(config["seconds"])
            self.close_connection = True
            return
        if hit and fault == "redirect_loop":
            self.send_plain(302, b"", {"Location": self.path})
            return
        if hit and fault == "endless_error":
            self.send_response(config["status"])
            self.send_header("Content-Type", "text/html")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b"<p>error</p>\n" * 512
            self.close_connection = True
            try:
                while True:
                    self.wfile.write(chunk)
            except OSError:
                return
        if hit and fault == "reset":
            reset_socket(self.connection)
            self.close_connection = True
            return
        if hit and fault == "wrong_region":
            fields = s3_sigv4_check.authorization_fields(self.headers)
            signed_for = fields["Credential"].split("/")[2] if fields else None
            if signed_for is not None and signed_for != config["region"]:
                bucket = parsed.path.split("/")[1]
                if config["status"] == 400:
                    self.send_s3_error(400, "AuthorizationHeaderMalformed",
                                       "the region '%s' is wrong; expecting '%s'" % (signed_for, config["region"]),
                                       "<Region>%s</Region>" % config["region"])
                else:
                    self.send_s3_error(301, "PermanentRedirect",
                                       "The bucket you are attempting to access must be addressed using the "
                                       "specified endpoint.",
                                       "<Endpoint>%s.s3.%s.amazonaws.com</Endpoint><Bucket>%s</Bucket>"
                                       % (bucket, config["region"], bucket),
                                       {"x-amz-bucket-region": config["region"]})
                return
        if hit and fault == "sigv4":
            problem = s3_sigv4_check.signature_problem(self.path, self.headers, None, config["secret"])
            if problem:
                self.send_s3_error(403, "SignatureDoesNotMatch", problem.splitlines()[0])
                return

        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers.pop("Host", None)
        if hit and fault == "ignore_range":
            headers.pop("Range", None)
        if hit and fault == "strip_preconditions":
            headers.pop("If-Match", None)
            headers.pop("If-Unmodified-Since", None)
        upstream = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port, timeout=30)
        try:
            # The query goes on (S3 listings need it), except the proxy's own sig.
            upstream.request("GET", parsed.path if sig else self.path, headers=headers)
            response = upstream.getresponse()
            body = response.read()
        except OSError as e:
            self.send_plain(502, str(e).encode())
            return
        finally:
            upstream.close()
        out_headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
        if hit and fault == "if_match" and response.status in (200, 206):
            wanted = self.headers.get("If-Match")
            if wanted is not None and wanted not in ("*", response.getheader("ETag")):
                self.send_s3_error(412, "PreconditionFailed", "a precondition did not hold")
                return

        if hit and fault == "wrong_range":
            fixed = []
            for k, v in out_headers:
                if k.lower() == "content-range" and v.startswith("bytes "):
                    span, total = v[6:].split("/")
                    first, last = (int(x) for x in span.split("-"))
                    v = "bytes %d-%d/%s" % (first + 1, last + 1, total)
                fixed.append((k, v))
            out_headers = fixed
        if hit and fault == "drop_range":
            out_headers = [(k, v) for k, v in out_headers if k.lower() != "content-range"]
        if hit and fault == "gzip_label":
            out_headers = [(k, v) for k, v in out_headers if k.lower() != "content-encoding"]
            out_headers.append(("Content-Encoding", "gzip"))
        if hit and fault == "etag":
            out_headers = [(k, config["etag"] if k.lower() == "etag" else v) for k, v in out_headers]
        if hit and fault == "drop_etag":
            out_headers = [(k, v) for k, v in out_headers if k.lower() != "etag"]
        if hit and fault == "drop_validators":
            out_headers = [(k, v) for k, v in out_headers
                           if k.lower() not in ("etag", "last-modified")]

        self.send_response(response.status)
        for k, v in out_headers:
            if k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        half = len(body) // 2
        try:
            if hit and fault == "reset_mid":
                self.wfile.write(body[:half])
                self.wfile.flush()
                reset_socket(self.connection)
                self.close_connection = True
                return
            if hit and fault == "stall":
                self.wfile.write(body[:half])
                self.wfile.flush()
                time.sleep(config["seconds"])
                self.close_connection = True
                return
            if hit and fault == "trickle":
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1.0)
                return
            if hit and fault == "short_body":
                self.wfile.write(body[:half])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)
        except OSError:
            self.close_connection = True


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # resets and aborted transfers are expected here


def serve(handler, port_file):
    """Serves `handler` on a free port of 127.0.0.1, written to `port_file`
    (atomically) once listening; also used by fake_metadata_server.py."""
    server = Server(("127.0.0.1", 0), handler)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, port_file)
    server.serve_forever()


def main():
    global UPSTREAM
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    UPSTREAM = urllib.parse.urlsplit(sys.argv[1])
    serve(Handler, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
