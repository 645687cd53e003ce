#!/usr/bin/env python3
"""Rewrite the frame fuzzer's seeds (fuzz/corpus/frame/) for protocol version 2: magic "SLF2", a
key_id in every HELLO, and tags recomputed with fuzz_frame.c's fixed key and challenge. Run once
when the wire changes: python3 fuzz/frame_corpus_v2.py fuzz/corpus/frame"""
import hashlib, hmac, json, os, struct, sys

MASTER = bytes(0x40 + i for i in range(32))
KEY = hmac.new(MASTER, b"sightline/v1/sandbox-key/00112233445566778899aabbccddeeff", hashlib.sha256).digest()
CHALLENGE = bytes([0x5a] + list(range(1, 16)))
KID = hmac.new(KEY, b"sightline key id v1", hashlib.sha256).digest()[:8].hex()


def hello_v2(p):
    """Insert "key_id" right after "sandbox_id" (textually, so odd seeds keep their oddities)."""
    if b'"key_id"' in p:
        return p
    i = p.find(b'"sandbox_id":"')
    if i < 0:
        return p
    j = p.find(b'"', i + 14)
    return p[: j + 1] + b',"key_id":"' + KID.encode() + b'"' + p[j + 1:] if j > 0 else p


def stream_v2(b):
    out, off = b"", 0
    while off + 16 <= len(b):
        magic, t, fl, rs, plen, seq = struct.unpack_from("<IBBHII", b, off)
        if magic != 0x31464C53:
            break
        body = b[off + 16: off + 16 + plen]
        if len(body) < plen:  # a truncated frame: keep it cut
            out += struct.pack("<IBBHII", 0x32464C53, t, fl, rs, plen, seq) + b[off + 16:]
            return out
        if t == 2:
            body = hello_v2(body)
            plen = len(body)
        hdr = struct.pack("<IBBHII", 0x32464C53, t, fl, rs, plen, seq)
        out += hdr + body
        off += 16 + len(b[off + 16: off + 16 + struct.unpack_from("<I", b, off + 8)[0]])
        if t != 1:
            out += hmac.new(KEY, CHALLENGE + hdr + body, hashlib.sha256).digest()
            off += 32
    return out + b[off:]


def main(d):
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        data = open(path, "rb").read()
        mode, body = data[0], data[1:]
        if mode == 2:
            body = hello_v2(body)
        elif mode == 4 and body[:1] and 1 + body[0] % 6 == 2:  # the round trip of a HELLO
            body = body[:1] + hello_v2(body[1:])
        elif mode in (0, 1):
            body = stream_v2(body)
        new = bytes([mode]) + body
        if new != data:
            open(path, "wb").write(new)
            print("rewrote", name)


main(sys.argv[1])
