#!/usr/bin/env python3
"""A hostile (and, when asked, well-behaved) supervisor for the collector's export protocol.

Implements docs/protocol.md from scratch with the standard library only (no code shared with the C
codec, so a bug there is not mirrored here): the CHALLENGE, the per-sandbox key
K = HMAC-SHA256(master, b"sightline/v1/sandbox-key/" + sandbox_id), frames with little-endian
headers and tag = HMAC-SHA256(K, challenge || header || payload), and record lines built as
docs/record.md says (hash = sha256 of the line up to, not including, ',"hash":"').

Usage: hostile_client.py SOCKET SECRET STATE CASE
  STATE is a JSON file holding the valid stream of sandbox A (its id, the next seq, the head hash
  and every line stored so far), so that the cases, each its own process and connection, continue
  one record. CASE is one of:
    init                 new sandbox ids, empty stream
    valid N [end]        a valid session: HELLO, EVENTS with N new lines (the first ever one is
                         record.begin; with "end" the last one is record.end), HEARTBEAT, ACKs checked
    expected             print every line of the valid stream (what the collector must hold)
    bind_b               a valid HELLO for sandbox B only (so B's key id is known)
    bad_magic truncated oversize replay skip wrong_key other_key tampered other_sandbox bad_line
    out_of_order duplicate
                         one hostile case each (see the functions below)
Prints one JSON object with what was observed ("frames": what the collector sent after the
hostile bytes, "eof": whether it then closed the connection; the test judges these) and exits 0;
exits 1 with a message when the collector misbehaved in a way no case allows (a valid session
refused or acknowledged wrongly, a frame of the collector's that does not verify, a timeout...).
"""
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time

MAGIC = 0x32464C53  # b"SLF2" little-endian (protocol version 2)
T_CHALLENGE, T_HELLO, T_EVENTS, T_HEARTBEAT, T_ACK, T_ERROR = 1, 2, 3, 4, 5, 6
TYPE_NAMES = {1: "challenge", 2: "hello", 3: "events", 4: "heartbeat", 5: "ack", 6: "error"}
MAX_PAYLOAD = 1 << 20
HDR = struct.Struct("<IBBHII")  # magic, type, flags, reserved, payload_len, frame_seq
ZERO_HASH = "0" * 64
TIMEOUT = 5.0
BASE_TIME = 1_700_000_000_000_000_000

IDENTITY = {"tenant": "acme", "agent": "agent-7", "task": "task-hostile", "version": "v1.2.3",
            "credential_ref": "cred-ref-42"}


class Fatal(Exception):
    pass


def derive_key(master, sandbox_id):
    return hmac.new(master, b"sightline/v1/sandbox-key/" + sandbox_id.encode(), hashlib.sha256).digest()


def key_id(key):
    """The key's public fingerprint carried in the HELLO: 8 bytes of HMAC(K, "sightline key id v1")."""
    return hmac.new(key, b"sightline key id v1", hashlib.sha256).digest()[:8].hex()


def frame(key, challenge, ftype, seq, payload, flags=0, reserved=0, length=None):
    hdr = HDR.pack(MAGIC, ftype, flags, reserved, len(payload) if length is None else length, seq)
    if ftype == T_CHALLENGE:
        return hdr + payload
    return hdr + payload + hmac.new(key, challenge + hdr + payload, hashlib.sha256).digest()


def events_payload(lines):
    out = [struct.pack("<I", len(lines))]
    for ln in lines:
        b = ln.encode()
        assert b and b"\n" not in b
        out.append(struct.pack("<I", len(b)) + b)
    return b"".join(out)


def hello_payload(sandbox_id, resume, key):
    return json.dumps({"sandbox_id": sandbox_id, "key_id": key_id(key), "identity": IDENTITY, "risk_class": "low",
                       "control": "/run/sightline/hostile-test.sock", "resume": resume},
                      separators=(",", ":")).encode()


DROPPED = 5  # what the valid sessions' heartbeats report as dropped (the collector's /metrics sums it)


def heartbeat_payload(n):
    return json.dumps({"emitted": n, "recorded": n, "exported": n, "acked": n, "dropped": DROPPED, "backlog": 0},
                      separators=(",", ":")).encode()


def make_line(sandbox_id, seq, cls, body, prev_hash):
    """One record line (no newline), exactly in the writer's shape."""
    ident = json.dumps(IDENTITY, separators=(",", ":"))
    b = json.dumps(body, separators=(",", ":"))
    assert b.startswith("{") and b.endswith("}") and len(b) > 2
    prefix = (f'{{"seq":{seq},"sandbox_id":"{sandbox_id}","time":{BASE_TIME + seq * 1000},'
              f'"class":"{cls}","observer":"supervisor","identity":{ident},{b[1:-1]},'
              f'"prev_hash":"{prev_hash}"')
    h = hashlib.sha256(prefix.encode()).hexdigest()
    return prefix + f',"hash":"{h}"}}', h


def chain(sandbox_id, first_seq, prev_hash, n, end=False):
    """n lines continuing a chain at first_seq after prev_hash. Returns (lines, head hash)."""
    lines = []
    for i in range(n):
        seq = first_seq + i
        if seq == 1:
            cls, body = "record.begin", {"manifest": {"command": ["/bin/true"], "workspace": "/workspace"}}
        elif end and i == n - 1:
            cls, body = "record.end", {"counts": {"events": seq}}
        else:
            cls, body = "file.open", {"path": f"/workspace/f{seq}", "flags": "O_RDONLY", "result": 3}
        ln, prev_hash = make_line(sandbox_id, seq, cls, body, prev_hash)
        lines.append(ln)
    return lines, prev_hash


class Conn:
    """One connection as a supervisor: reads the CHALLENGE, then frames with our own frame_seq."""

    def __init__(self, path, master, sandbox_id):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(TIMEOUT)
        self.s.connect(path)
        self.buf = b""
        self.key = derive_key(master, sandbox_id)  # the true key, to check the collector's tags
        self.send_seq = 0
        self.recv_seq = 0
        self.eof = False
        f = self.read_frame()
        if f is None or f["type"] != T_CHALLENGE or f["seq"] != 0 or len(f["payload"]) != 16:
            raise Fatal(f"expected a CHALLENGE (seq 0, 16 bytes), got {describe(f)}")
        self.challenge = f["payload"]

    def _need(self, n):
        while len(self.buf) < n:
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                raise Fatal(f"timed out after {self.s.gettimeout()}s waiting for the collector")
            except ConnectionResetError:
                d = b""
            if not d:
                self.eof = True
                return False
            self.buf += d
        return True

    def read_frame(self):
        """The next frame from the collector, checked as a supervisor's decoder would; None on EOF."""
        if not self._need(16):
            if self.buf:
                raise Fatal(f"the collector's stream ended inside a frame header ({len(self.buf)} bytes)")
            return None
        magic, ftype, flags, res, plen, seq = HDR.unpack(self.buf[:16])
        if magic != MAGIC or flags or res or plen > MAX_PAYLOAD or ftype not in (T_CHALLENGE, T_ACK, T_ERROR):
            raise Fatal(f"the collector sent a malformed header {self.buf[:16].hex()}")
        total = 16 + plen + (0 if ftype == T_CHALLENGE else 32)
        if not self._need(total):
            raise Fatal("the collector's stream ended inside a frame")
        raw, self.buf = self.buf[:total], self.buf[total:]
        payload = raw[16:16 + plen]
        f = {"type": ftype, "seq": seq, "payload": payload}
        if ftype != T_CHALLENGE:
            tag = hmac.new(self.key, self.challenge + raw[:16] + payload, hashlib.sha256).digest()
            if not hmac.compare_digest(tag, raw[16 + plen:]):
                raise Fatal(f"the collector's {TYPE_NAMES[ftype]} frame does not carry a valid tag")
            if seq != self.recv_seq + 1:
                raise Fatal(f"the collector's frame_seq {seq} does not follow {self.recv_seq}")
            self.recv_seq = seq
            if ftype == T_ACK:
                if plen != 8:
                    raise Fatal(f"ACK payload of {plen} bytes")
                f["ack"] = struct.unpack("<Q", payload)[0]
            else:
                if plen < 2:
                    raise Fatal("ERROR payload shorter than 2 bytes")
                f["code"] = struct.unpack("<H", payload[:2])[0]
                f["msg"] = payload[2:].decode("utf-8")
        return f

    def build(self, ftype, payload, key=None, seq=None):
        """A correctly framed and tagged frame (with our key unless key is given); advances send_seq
        unless seq is given."""
        if seq is None:
            self.send_seq += 1
            seq = self.send_seq
        return frame(self.key if key is None else key, self.challenge, ftype, seq, payload)

    def send(self, data):
        self.s.sendall(data)

    def expect_ack(self, want, what):
        f = self.read_frame()
        # Keep-alive ACKs of an older head (the collector re-acknowledges an idle connection every
        # 250 ms) may come first; an ACK that never reaches want still fails (timeout).
        while f is not None and f["type"] == T_ACK and f["ack"] < want:
            f = self.read_frame()
        if f is None or f["type"] != T_ACK:
            raise Fatal(f"{what}: expected ACK {want}, got {describe(f)}")
        if f["ack"] != want:
            raise Fatal(f"{what}: ACK {f['ack']}, expected {want}")

    def drain(self, quiet=0.0, until_ack=False):
        """Every frame the collector sends until it closes, or, with quiet > 0, until it has been
        silent that long with the connection still open. With until_ack, first wait (the full
        timeout) for an ACK or the end: the collector ACKs an EVENTS frame after it has dealt with
        it (and counted any reject), so what may follow is then quick to come. Returns (frames, eof)."""
        frames = []
        while until_ack:
            f = self.read_frame()
            if f is None:
                return frames, True
            frames.append(f)
            until_ack = f["type"] != T_ACK
        if quiet:
            self.s.settimeout(quiet)
        try:
            while True:
                f = self.read_frame()
                if f is None:
                    return frames, True
                frames.append(f)
        except Fatal as e:
            if quiet and "timed out" in str(e):
                return frames, False
            raise
        finally:
            self.s.settimeout(TIMEOUT)

    def close(self):
        self.s.close()


def describe(f):
    if f is None:
        return "end of stream"
    d = {"type": TYPE_NAMES.get(f["type"], f["type"]), "seq": f["seq"]}
    if "ack" in f:
        d["ack"] = f["ack"]
    if "code" in f:
        d["code"], d["msg"] = f["code"], f["msg"]
    return d


class State:
    def __init__(self, path):
        self.path = path
        with open(path) as fh:
            self.d = json.load(fh)

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.d, fh)
        os.replace(tmp, self.path)

    @property
    def last(self):
        return self.d["next_seq"] - 1

    def stored(self, lines, head):
        self.d["lines"].extend(lines)
        self.d["next_seq"] += len(lines)
        self.d["head"] = head


def hello(conn, st, resume=None):
    """A valid HELLO for sandbox A; the collector must ACK the stored head."""
    r = st.last > 0 if resume is None else resume
    conn.send(conn.build(T_HELLO, hello_payload(st.d["sid_a"], r, conn.key)))
    conn.expect_ack(st.last, "HELLO")


def result(frames, eof, **kw):
    out = {"frames": [describe(f) for f in frames], "eof": eof}
    out.update(kw)
    return out


# ---- the cases ----

def case_valid(sock, master, st, args):
    n = int(args[0])
    end = len(args) > 1 and args[1] == "end"
    c = Conn(sock, master, st.d["sid_a"])
    hello(c, st)
    lines, head = chain(st.d["sid_a"], st.d["next_seq"], st.d["head"], n, end)
    c.send(c.build(T_EVENTS, events_payload(lines)))
    c.expect_ack(st.last + n, "EVENTS")
    st.stored(lines, head)
    st.save()
    c.send(c.build(T_HEARTBEAT, heartbeat_payload(st.last)))
    # The collector answers a HEARTBEAT with an ACK of the head (src/collector/server.c; the
    # protocol doc does not say either way, so none is accepted too); nothing else may come back.
    frames, eof = [], False
    try:
        c.s.settimeout(1.0)
        f = c.read_frame()
        frames, eof = ([f], False) if f else ([], True)
    except Fatal as e:
        if "timed out" not in str(e):
            raise
    if not eof:
        more, eof = c.drain(quiet=0.1)
        frames += more
    c.close()
    # The collector also re-acknowledges the head of an idle connection (a keep-alive, at most every
    # 250 ms), so more than one ACK may come; each must be the head.
    if eof or any(f["type"] != T_ACK or f["ack"] != st.last for f in frames):
        raise Fatal(f"valid session: after the HEARTBEAT the collector sent {[describe(f) for f in frames]}"
                    f"{' and closed the connection' if eof else ''} (expected at most ACK {st.last})")
    return {"stored": n, "last": st.last, "heartbeat_acked": len(frames) >= 1}


def case_idle(sock, master, st, args):
    """HELLO, then send nothing for args[0] seconds and note every frame: the collector's keep-alive
    ACKs of the head. Returns their count, the longest gap between two (from the HELLO's ACK on)
    and whether each was the head."""
    secs = float(args[0])
    c = Conn(sock, master, st.d["sid_a"])
    hello(c, st)
    t_end = time.monotonic() + secs
    last, gaps, acks, all_head = time.monotonic(), [], 0, True
    while time.monotonic() < t_end:
        c.s.settimeout(max(0.01, t_end - time.monotonic()))
        try:
            f = c.read_frame()
        except Fatal as e:
            if "timed out" in str(e):
                break
            raise
        if f is None:
            raise Fatal("the collector closed an idle, authenticated connection")
        now = time.monotonic()
        gaps.append(now - last)
        last = now
        acks += 1
        all_head = all_head and f["type"] == T_ACK and f["ack"] == st.last
    gaps.append(time.monotonic() - last)
    c.close()
    return {"acks": acks, "max_gap_ms": round(max(gaps) * 1000), "all_head": all_head}


def case_bad_magic(sock, master, st, args):
    c = Conn(sock, master, st.d["sid_a"])
    # A whole plausible HELLO, but with version 1's "SLF1" instead of "SLF2".
    good = c.build(T_HELLO, hello_payload(st.d["sid_a"], True, c.key))
    c.send(b"SLF1" + good[4:])
    frames, eof = c.drain()
    return result(frames, eof)


def case_truncated(sock, master, st, args):
    c = Conn(sock, master, st.d["sid_a"])
    hello(c, st)
    lines, _ = chain(st.d["sid_a"], st.d["next_seq"], st.d["head"], 3)
    f = c.build(T_EVENTS, events_payload(lines))
    c.send(f[: len(f) // 2])  # header and part of the payload, then the end of the stream
    c.s.shutdown(socket.SHUT_WR)
    frames, eof = c.drain()
    return result(frames, eof)


def case_oversize(sock, master, st, args):
    c = Conn(sock, master, st.d["sid_a"])
    # Only the 16-byte header of a HELLO claiming 1 MiB + 1 bytes of payload: the collector must
    # refuse it at 12 bytes, without waiting for (or buffering) the body.
    c.send(HDR.pack(MAGIC, T_HELLO, 0, 0, MAX_PAYLOAD + 1, 1))
    t0 = time.monotonic()
    frames, eof = c.drain()
    return result(frames, eof, seconds=round(time.monotonic() - t0, 3))


def case_replay(sock, master, st, args):
    c = Conn(sock, master, st.d["sid_a"])
    hello(c, st)
    lines, head = chain(st.d["sid_a"], st.d["next_seq"], st.d["head"], 2)
    f = c.build(T_EVENTS, events_payload(lines))
    c.send(f)
    c.expect_ack(st.last + 2, "first copy of the EVENTS frame")
    st.stored(lines, head)  # the first copy is valid and stored
    st.save()
    c.send(f)  # the very same bytes again: frame_seq 2 repeated
    frames, eof = c.drain()
    return result(frames, eof)


def case_skip(sock, master, st, args):
    c = Conn(sock, master, st.d["sid_a"])
    hello(c, st)  # frame_seq 1
    lines, _ = chain(st.d["sid_a"], st.d["next_seq"], st.d["head"], 2)
    # Valid lines, a valid tag, but frame_seq 3 where 2 is due (frame 2 "lost").
    c.send(c.build(T_EVENTS, events_payload(lines), seq=3))
    frames, eof = c.drain()
    return result(frames, eof)


def case_wrong_key(sock, master, st, args):
    c = Conn(sock, master, st.d["sid_a"])
    other_master = os.urandom(32)
    key = derive_key(other_master, st.d["sid_a"])  # a key no sandbox of this collector has
    c.send(c.build(T_HELLO, hello_payload(st.d["sid_a"], True, key), key=key))
    frames, eof = c.drain()
    return result(frames, eof)


def case_other_key(sock, master, st, args):
    c = Conn(sock, master, st.d["sid_a"])
    key_b = derive_key(master, st.d["sid_b"])  # a real key, of the collector's master, for sandbox B
    c.send(c.build(T_HELLO, hello_payload(st.d["sid_a"], True, key_b), key=key_b))
    frames, eof = c.drain()
    return result(frames, eof)


def case_tampered(sock, master, st, args):
    # A's HELLO with A's own key and key id, one byte of the payload changed after tagging.
    c = Conn(sock, master, st.d["sid_a"])
    f = bytearray(c.build(T_HELLO, hello_payload(st.d["sid_a"], True, c.key)))
    i = f.index(b"hostile-test.sock")
    f[i] = ord("H")  # still a valid HELLO, of the same length; the tag no longer matches
    c.send(bytes(f))
    frames, eof = c.drain()
    return result(frames, eof)


def case_bind_b(sock, master, st, args):
    # A valid HELLO for sandbox B and nothing else: B is bound (the collector knows its key id).
    c = Conn(sock, master, st.d["sid_b"])
    c.send(c.build(T_HELLO, hello_payload(st.d["sid_b"], False, c.key)))
    c.expect_ack(0, "HELLO of B")
    c.close()
    return {"bound": st.d["sid_b"]}


def line_case(sock, master, st, lines):
    """A valid HELLO, then one EVENTS frame (valid framing and tag) with these lines. The collector
    must store none of them and acknowledge the unchanged head."""
    c = Conn(sock, master, st.d["sid_a"])
    hello(c, st)
    c.send(c.build(T_EVENTS, events_payload(lines)))
    frames, eof = c.drain(quiet=0.2, until_ack=True)
    return result(frames, eof)


def case_other_sandbox(sock, master, st, args):
    # A perfectly valid first line of sandbox B's record, sent on A's authenticated connection.
    lines, _ = chain(st.d["sid_b"], 1, ZERO_HASH, 1)
    return line_case(sock, master, st, lines)


def case_bad_line(sock, master, st, args):
    lines, _ = chain(st.d["sid_a"], st.d["next_seq"], st.d["head"], 1)
    # Change one body byte after hashing: "result":3 -> "result":4.
    bad = lines[0].replace('"result":3', '"result":4', 1)
    assert bad != lines[0]
    return line_case(sock, master, st, [bad])


def case_out_of_order(sock, master, st, args):
    # seq last+2 and last+3, correctly chained to each other, but last+1 is missing.
    lines, _ = chain(st.d["sid_a"], st.d["next_seq"], st.d["head"], 3)
    return line_case(sock, master, st, lines[1:])


def case_duplicate(sock, master, st, args):
    # After a "resume", the supervisor resends the last 3 lines the collector already holds, byte for
    # byte. Not stored again; the ACK stays at the head.
    c = Conn(sock, master, st.d["sid_a"])
    hello(c, st, resume=True)
    c.send(c.build(T_EVENTS, events_payload(st.d["lines"][-3:])))
    frames, eof = c.drain(quiet=0.2, until_ack=True)
    return result(frames, eof)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    sock, secret, state_path, case = sys.argv[1:5]
    args = sys.argv[5:]
    if case == "init":
        with open(state_path, "w") as fh:
            json.dump({"sid_a": os.urandom(16).hex(), "sid_b": os.urandom(16).hex(), "next_seq": 1,
                       "head": ZERO_HASH, "lines": []}, fh)
        return 0
    st = State(state_path)
    if case == "expected":
        for ln in st.d["lines"]:
            print(ln)
        return 0
    if case == "sid":
        print(st.d["sid_a"])
        return 0
    with open(secret, "rb") as fh:
        master = fh.read()
    if len(master) != 32:
        print(f"the secret file holds {len(master)} bytes, not 32", file=sys.stderr)
        return 1
    try:
        out = CASES[case](sock, master, st, args)
    except Fatal as e:
        print(f"{case}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
