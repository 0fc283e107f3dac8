#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (committed; rerun to
regenerate). Seeds are the cases the unit tests use: valid and broken
headers (every format.md rule, deep nesting), numpy index texts, tensor
names that need escaping, and Content-Range values."""
import hashlib, json, os, struct, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, data):
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def raw(header, data=b""):
    if isinstance(header, str):
        header = header.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(header)) + header + data


def entry(name, dtype, shape, offsets):
    return json.dumps(name) + ':{"dtype":"%s","shape":%s,"data_offsets":%s}' % (dtype, shape, offsets)


def header_seeds():
    valid = "{" + ",".join([entry("a", "F16", "[3,4]", "[0,24]"), entry("b/c", "F4", "[2,2]", "[24,26]"),
                            entry("", "U8", "[0]", "[26,26]"), entry("s", "I64", "[]", "[26,34]")]) + "}"
    yield raw('{"__metadata__":{"format":"pt"},' + valid[1:], b"x" * 34)
    yield raw(valid + "   ", b"x" * 34)
    yield raw("{}")
    yield raw(' \n\t{}\r\n     ')
    yield raw('{"__metadata__":null}')
    yield raw("{" + entry("z", "F32", "[18446744073709551615,0]", "[0,0]") + "}")
    for dtype, bits in [("F4", 4), ("F6_E2M3", 6), ("F8_E4M3", 8), ("BF16", 16), ("C64", 64), ("BOOL", 8)]:
        yield raw("{" + entry("t", dtype, "[8]", "[0,%d]" % bits) + "}", b"x" * bits)
    broken = ["", "        ", "{}\0\0\0\0\0\0", "{}{}", "[]", '"str"', '{"a":1', '{"a":1,}',
              '{"w":{"shape":[1],"data_offsets":[0,1]}}', '{"w":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}',
              '{"w":{"dtype":"f16","shape":[1],"data_offsets":[0,2]}}', '{"w":{"dtype":16,"shape":[1],"data_offsets":[0,2]}}',
              "{" + entry("w", "U8", "[-1]", "[0,0]") + "}", "{" + entry("w", "U8", "[1.0]", "[0,1]") + "}",
              "{" + entry("w", "U8", "[4e0]", "[0,4]") + "}", "{" + entry("w", "U8", "[18446744073709551616]", "[0,1]") + "}",
              "{" + entry("w", "U8", "[1]", "[0,1,2]") + "}", "{" + entry("w", "U8", "[1]", "[0.0,1]") + "}",
              '{"__metadata__":{"a":1}}', '{"__metadata__":{"a":{"b":"c"}}}', '{"__metadata__":["a"]}',
              '{"__metadata__":{},"__metadata__":{}}', "{" + entry("w", "U8", "[4294967296,4294967296]", "[0,0]") + "}",
              "{" + entry("w", "F4", "[3]", "[0,1]") + "}", "{" + entry("w", "F16", "[2]", "[0,3]") + "}",
              "{" + entry("a", "U8", "[2]", "[0,2]") + "," + entry("b", "U8", "[2]", "[1,3]") + "}",
              "{" + entry("a", "U8", "[0]", "[2,1]") + "}",
              "{" + entry("w", "U8", "[1]", "[0,1]") + "," + entry("w", "U8", "[1]", "[1,2]") + "}",
              '{"__metadata__":{"k":"\xff"}}', '{"__metadata__":{"k":"\xed\xa0\x80"}}',
              '{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":{"a":1,"a":2}}}']
    for b in broken:
        yield raw(b.encode("latin-1") if any(ord(c) > 127 for c in b) else b, b"xx")
    # Deep nesting: in a metadata value, in an unknown field (at and past 128), at the top.
    yield raw('{"__metadata__":{"k":' + "[" * 1000 + "]" * 1000 + "}}")
    ok = '{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":'
    yield raw(ok + "[" * 126 + "]" * 126 + "}}", b"x")
    yield raw(ok + "[" * 127 + "]" * 127 + "}}", b"x")
    yield raw("[" * 2000)
    yield raw('{"w":' + '{"a":' * 500)
    # Rules 1-3: short file, huge N, N past the end.
    yield b"\x01\x02"
    yield struct.pack("<Q", 100_000_001)
    yield struct.pack("<Q", 50) + b"{}"


def slice_seeds():
    specs = ["3", "-1", "+2", "0:10", "::2", "1:", ":", "::", ":-3:4", "...", "1:3, ..., 0", " 1 : 3 : 2 ,\t-4 ",
             "5,", "::0", "-9223372036854775808:9223372036854775807", "", "  \t", "a", "1:2:3:4", "1 2", "1:x",
             "....", "--1", "+-1", ",", "0x10", "1.5", "99999999999999999999", "1:-9223372036854775809",
             "0, 1:3", "..., ::2", "1,2,3,4,5"]
    shapes = [(0, [4, 6]), (13, [2, 3, 4]), (1, [16]), (3, [5, 0, 3]), (2, []), (7, [8, 8, 8, 8])]
    for i, spec in enumerate(specs):
        dtype, shape = shapes[i % len(shapes)]
        yield bytes([dtype, len(shape)] + shape) + spec.encode()


def name_seeds():
    names = ["", "a", "a/b", "a\0b", "%", "%25", "%2E", ".", "..", "...", "\n", "\x7f", "model.layers.0.weight",
             "\u6743\u91cd", "x" * 300, "/" * 100, "%" * 90, "\u00e9" * 130, "a" * 199 + "\u6743" * 30]
    for a in names:
        yield a.encode() + b"\xff" + names[(names.index(a) + 1) % len(names)].encode()
    yield b"a\xffa"


def http_seeds():
    for v in ["bytes 0-99/100", "bytes */100", "bytes 0-0/*", "BYTES 5-9/10", " bytes 1-2/3 ", "bytes 9-5/10",
              "bytes 0-100/100", "bytes 0-18446744073709551615/*", "bytes 0-18446744073709551616/*", "bytes */*",
              "bytes 1-/2", "items 0-1/2", "bytes=0-1", "bytes 0-1/2/3", ""]:
        yield v


if __name__ == "__main__":
    for target, seeds in [("header", header_seeds), ("slice_plan", slice_seeds), ("name_encoding", name_seeds),
                          ("http_response", http_seeds)]:
        for s in seeds():
            write(target, s)
    print("seeds written under", ROOT, file=sys.stderr)
