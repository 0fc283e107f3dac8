#!/usr/bin/env python3
"""A deliberately slow HTTP range server for the mount lifecycle tests.

Serves one file with HEAD and ranged GET. Every answer waits --delay
seconds first; a GET whose range starts at or after --stall-from is
accepted and never answered (the connection stays open until the client
gives up). Prints the port on stdout once listening.

usage: slow_http_server.py FILE [--delay SECONDS] [--stall-from OFFSET]
                            [--tls CERT KEY]
"""
import argparse
import http.server
import os
import re
import ssl
import sys
import threading
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--stall-from", type=int, default=-1)
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    args = parser.parse_args()
    data = open(args.file, "rb").read()
    forever = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *unused):
            pass

        def _headers(self, status, length, extra=()):
            self.send_response(status)
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", '"slow-1"')
            self.send_header("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")
            for name, value in extra:
                self.send_header(name, value)
            self.end_headers()

        def do_HEAD(self):
            time.sleep(args.delay)
            self._headers(200, len(data))

        def do_GET(self):
            time.sleep(args.delay)
            match = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
            if not match:
                self._headers(200, len(data))
                self.wfile.write(data)
                return
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else len(data) - 1
            end = min(end, len(data) - 1)
            if 0 <= args.stall_from <= start:
                forever.wait()  # accepted, never answered
                return
            if start >= len(data):
                self._headers(416, 0, [("Content-Range", "bytes */%d" % len(data))])
                return
            self._headers(206, end - start + 1, [("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))])
            self.wfile.write(data[start:end + 1])

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if args.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls[0], args.tls[1])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
