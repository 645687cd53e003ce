#!/usr/bin/env python3
"""A hostile "Sentry" for the gVisor sink test: connects to a sandbox's sink socket as runsc
would and sends malformed datagrams, then valid ones.

usage: gvisor_hostile.py SOCKET OWN_CONTAINER_ID OTHER_CONTAINER_ID
Prints one line per step; exits 0 when every send went through."""
import socket
import struct
import sys
import time

sock_path, own, other = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()


def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def key(num, wt):
    return varint(num << 3 | wt)


def vfield(num, v):
    return key(num, 0) + varint(v)


def sfield(num, data):
    return key(num, 2) + varint(len(data)) + data


def header(mtype, dropped=0):
    return struct.pack("<HHI", 8, mtype, dropped)


def ctx(cid):
    return sfield(1, vfield(1, time.time_ns()) + vfield(2, 1) + vfield(4, 1) + sfield(6, cid) + sfield(8, b"/workspace"))


def open_exit(cid, path, result=3):
    return header(7) + ctx(cid) + sfield(2, vfield(1, result)) + vfield(3, 257) + vfield(4, -100) + sfield(6, path)


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sock_path)
    return s


# 1. A wrong handshake: the sink must refuse it and close this connection.
s = connect()
s.send(b"\x10\x07")  # field 2, not a Handshake
s.settimeout(2)
try:
    got = s.recv(16)
except (ConnectionResetError, socket.timeout):
    got = b""
print("wrong-handshake reply:", got.hex() or "(closed)")
s.close()

# 2. A proper handshake, then garbage, then valid points.
s = connect()
s.send(b"\x08\x01")
s.settimeout(2)
reply = s.recv(16)
print("handshake reply:", reply.hex())
assert reply and reply[0] == 0x08, "no handshake reply"
bad = {
    "short-header": b"\x08\x00\x07",
    "truncated": header(7) + key(6, 2) + varint(100) + b"abc",
    "oversized": header(7) + ctx(own) + sfield(6, b"/" + b"a" * 5000),
    "wrong-wire-type": header(7) + vfield(1, 5),
    "bad-varint": header(7) + key(4, 0) + b"\xff" * 10 + b"\x01",
    "group": header(7) + key(1, 3) * 5000,
    "nested": header(7) + sfield(1, sfield(7, sfield(1, sfield(1, b"\x0a\x00")))),
    "unknown-type": header(9) + ctx(own),
    "bad-header-size": struct.pack("<HHI", 2000, 7, 0),
}
for name, data in bad.items():
    s.send(data)
    print("sent", name, len(data))
# A point claiming another container id: never this sandbox's, never the other's.
s.send(open_exit(other, b"/hostile/foreign-claim"))
print("sent foreign")
s.send(open_exit(b"", b"/hostile/no-container-id"))
print("sent missing container id")
# Later valid points are still recorded.
s.send(open_exit(own, b"/hostile/valid-after"))
print("sent valid")
time.sleep(0.3)
s.close()
