/* A bounded, table-driven protobuf decoder for the gVisor runtime-monitoring points sightline
 * uses (see gvisor_wire.h for the rules and the threat model). */
#include <stddef.h>
#include <string.h>

#include "sensor/gvisor_wire.h"

const char *sl_gv_reject_name(enum sl_gv_reject r)
{
	static const char *const names[SL_GV_R_COUNT] = {
	    [SL_GV_OK] = "ok",
	    [SL_GV_R_SHORT_HEADER] = "short-header",
	    [SL_GV_R_HEADER_SIZE] = "bad-header-size",
	    [SL_GV_R_UNKNOWN_TYPE] = "unknown-type",
	    [SL_GV_R_BAD_VARINT] = "bad-varint",
	    [SL_GV_R_TRUNCATED] = "truncated",
	    [SL_GV_R_WIRE_TYPE] = "wrong-wire-type",
	    [SL_GV_R_GROUP] = "group",
	    [SL_GV_R_BAD_FIELD] = "bad-field-number",
	    [SL_GV_R_OVERSIZED] = "oversized",
	    [SL_GV_R_DUPLICATE] = "duplicate-field",
	    [SL_GV_R_TOO_MANY] = "too-many-elements",
	    [SL_GV_R_NESTING] = "too-deep",
	    [SL_GV_R_BAD_HANDSHAKE] = "bad-handshake",
	    [SL_GV_R_TOO_BIG] = "too-big",
	};
	return (unsigned)r < SL_GV_R_COUNT && names[r] ? names[r] : "?";
}

enum kind {
	K_I64,	 /* varint, int64 */
	K_I32,	 /* varint, low 32 bits as int32 (proto int32 is sign-extended to 64 on the wire) */
	K_U32,	 /* varint, low 32 bits */
	K_BOOL,	 /* varint */
	K_IGN,	 /* varint we do not keep (start times) */
	K_STR,	 /* length-delimited, kept, at most max bytes */
	K_SKIP,	 /* length-delimited, bounded by max, not kept (sha256) */
	K_RSTR,	 /* repeated string, each at most max, the first SL_GV_ARGV_KEEP kept */
	K_RSKIP, /* repeated string not kept (env, envv: metadata over content) */
	K_SUB,	 /* embedded message described by sub */
};

struct spec {
	uint32_t num;
	enum kind kind;
	size_t off; /* offset in struct sl_gv_msg of the value (K_SUB: of its "present" bool) */
	size_t max;
	const struct spec *sub;
	size_t nsub;
};

#define M(f) offsetof(struct sl_gv_msg, f)
#define N(a) (sizeof(a) / sizeof((a)[0]))

static const struct spec cred_spec[] = {
    {1, K_U32, M(ctx.cred.ruid), 0, NULL, 0}, {2, K_U32, M(ctx.cred.euid), 0, NULL, 0},
    {3, K_U32, M(ctx.cred.suid), 0, NULL, 0}, {4, K_U32, M(ctx.cred.rgid), 0, NULL, 0},
    {5, K_U32, M(ctx.cred.egid), 0, NULL, 0}, {6, K_U32, M(ctx.cred.sgid), 0, NULL, 0},
};
static const struct spec ctx_spec[] = {
    {1, K_I64, M(ctx.time_ns), 0, NULL, 0},
    {2, K_I32, M(ctx.tid), 0, NULL, 0},
    {3, K_IGN, 0, 0, NULL, 0},
    {4, K_I32, M(ctx.tgid), 0, NULL, 0},
    {5, K_IGN, 0, 0, NULL, 0},
    {6, K_STR, M(ctx.container_id), SL_GV_ID_MAX, NULL, 0},
    {7, K_SUB, M(ctx.cred.present), 0, cred_spec, N(cred_spec)},
    {8, K_STR, M(ctx.cwd), SL_GV_PATH_MAX, NULL, 0},
    {9, K_STR, M(ctx.process_name), SL_GV_NAME_MAX, NULL, 0},
};
static const struct spec exit_spec[] = {
    {1, K_I64, M(result), 0, NULL, 0},
    {2, K_I64, M(errorno), 0, NULL, 0},
};
#define CTX                                                                                                  \
	{                                                                                                    \
		1, K_SUB, M(ctx.present), 0, ctx_spec, N(ctx_spec)                                           \
	}
#define EXIT                                                                                                 \
	{                                                                                                    \
		2, K_SUB, M(has_exit), 0, exit_spec, N(exit_spec)                                            \
	}

static const struct spec start_spec[] = {
    CTX,
    {2, K_STR, M(id), SL_GV_ID_MAX, NULL, 0},
    {3, K_STR, M(cwd), SL_GV_PATH_MAX, NULL, 0},
    {4, K_RSTR, M(argv), SL_GV_ARG_MAX, NULL, 0},
    {5, K_RSKIP, 0, SL_GV_ARG_MAX, NULL, 0},
    {6, K_BOOL, M(terminal), 0, NULL, 0},
};
static const struct spec clone_spec[] = {
    CTX,
    {3, K_I64, M(created_tid), 0, NULL, 0},
    {4, K_I64, M(created_tgid), 0, NULL, 0},
    {5, K_IGN, 0, 0, NULL, 0},
    {6, K_I64, M(clone_flags), 0, NULL, 0},
};
static const struct spec exec_spec[] = {
    CTX,
    {2, K_STR, M(binary_path), SL_GV_PATH_MAX, NULL, 0},
    {3, K_RSTR, M(argv), SL_GV_ARG_MAX, NULL, 0},
    {4, K_RSKIP, 0, SL_GV_ARG_MAX, NULL, 0},
    {5, K_U32, M(binary_mode), 0, NULL, 0},
    {6, K_U32, M(binary_uid), 0, NULL, 0},
    {7, K_U32, M(binary_gid), 0, NULL, 0},
    {8, K_SKIP, 0, 64, NULL, 0},
};
static const struct spec exit_task_spec[] = {
    CTX,
    {2, K_I32, M(exit_status), 0, NULL, 0},
};
static const struct spec open_spec[] = {
    CTX,
    EXIT,
    {3, K_I64, M(sysno), 0, NULL, 0},
    {4, K_I64, M(fd), 0, NULL, 0},
    {5, K_STR, M(fd_path), SL_GV_PATH_MAX, NULL, 0},
    {6, K_STR, M(pathname), SL_GV_PATH_MAX, NULL, 0},
    {7, K_I64, M(flags), 0, NULL, 0},
    {8, K_I64, M(mode), 0, NULL, 0},
};
static const struct spec connect_spec[] = {
    CTX,
    EXIT,
    {3, K_I64, M(sysno), 0, NULL, 0},
    {4, K_I64, M(fd), 0, NULL, 0},
    {5, K_STR, M(fd_path), SL_GV_PATH_MAX, NULL, 0},
    {6, K_STR, M(address), SL_GV_ADDR_MAX, NULL, 0},
};
static const struct spec execve_spec[] = {
    CTX,
    EXIT,
    {3, K_I64, M(sysno), 0, NULL, 0},
    {4, K_I64, M(fd), 0, NULL, 0},
    {5, K_STR, M(fd_path), SL_GV_PATH_MAX, NULL, 0},
    {6, K_STR, M(pathname), SL_GV_PATH_MAX, NULL, 0},
    {7, K_RSTR, M(argv), SL_GV_ARG_MAX, NULL, 0},
    {8, K_RSKIP, 0, SL_GV_ARG_MAX, NULL, 0},
    {9, K_I64, M(flags), 0, NULL, 0},
};
static const struct spec socket_spec[] = {
    CTX,
    EXIT,
    {3, K_I64, M(sysno), 0, NULL, 0},
    {4, K_I64, M(domain), 0, NULL, 0},
    {5, K_I64, M(sock_type), 0, NULL, 0},
    {6, K_I64, M(protocol), 0, NULL, 0},
};

struct rd {
	const uint8_t *p, *end;
};

/* At most 10 bytes; the 10th may only carry the top bit of a 64-bit value. */
static enum sl_gv_reject rd_varint(struct rd *r, uint64_t *out)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < 10; i++) {
		if (r->p >= r->end)
			return SL_GV_R_TRUNCATED;
		uint8_t b = *r->p++;
		if (i == 9 && b > 1)
			return SL_GV_R_BAD_VARINT; /* overflow past 2^64 (or an 11th byte follows) */
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*out = v;
			return SL_GV_OK;
		}
	}
	return SL_GV_R_BAD_VARINT;
}

static void *at(struct sl_gv_msg *m, size_t off)
{
	return (char *)m + off;
}

/* Parse one (sub)message p[0..n) against its field table. depth counts levels of nesting. */
static enum sl_gv_reject parse(const uint8_t *p, size_t n, const struct spec *s, size_t ns,
			       struct sl_gv_msg *m, unsigned depth)
{
	if (depth > SL_GV_MAX_DEPTH)
		return SL_GV_R_NESTING;
	struct rd r = {p, p + n};
	uint32_t seen = 0; /* one bit per table entry: non-repeated fields appear once */
	while (r.p < r.end) {
		uint64_t key;
		enum sl_gv_reject e = rd_varint(&r, &key);
		if (e)
			return e;
		uint64_t num = key >> 3;
		unsigned wt = key & 7;
		if (num == 0 || num > 0x1fffffff)
			return SL_GV_R_BAD_FIELD;
		if (wt == 3 || wt == 4)
			return SL_GV_R_GROUP; /* groups nest without a length: never accepted */
		if (wt == 6 || wt == 7)
			return SL_GV_R_WIRE_TYPE;
		const struct spec *f = NULL;
		size_t idx = 0;
		for (size_t i = 0; i < ns; i++)
			if (s[i].num == num) {
				f = &s[i];
				idx = i;
				break;
			}
		uint64_t v = 0;
		const uint8_t *data = NULL;
		size_t dlen = 0;
		switch (wt) {
		case 0:
			if ((e = rd_varint(&r, &v)))
				return e;
			break;
		case 1:
		case 5: {
			size_t w = wt == 1 ? 8 : 4;
			if ((size_t)(r.end - r.p) < w)
				return SL_GV_R_TRUNCATED;
			r.p += w;
			break;
		}
		case 2:
			if ((e = rd_varint(&r, &v)))
				return e;
			/* No trust in the length: it must fit in what is left of this message. */
			if (v > (uint64_t)(r.end - r.p))
				return SL_GV_R_TRUNCATED;
			data = r.p;
			dlen = (size_t)v;
			r.p += dlen;
			break;
		}
		if (!f) {
			m->unknown_fields++; /* forward compatible: a newer Sentry may add fields */
			continue;
		}
		bool repeated = f->kind == K_RSTR || f->kind == K_RSKIP;
		if (!repeated) {
			if (seen & (1u << idx))
				return SL_GV_R_DUPLICATE;
			seen |= 1u << idx;
		}
		bool want_len = f->kind == K_STR || f->kind == K_SKIP || repeated || f->kind == K_SUB;
		if (want_len != (wt == 2) || (!want_len && wt != 0))
			return SL_GV_R_WIRE_TYPE;
		switch (f->kind) {
		case K_I64:
			*(int64_t *)at(m, f->off) = (int64_t)v;
			break;
		case K_I32:
			*(int32_t *)at(m, f->off) = (int32_t)(uint32_t)v;
			break;
		case K_U32:
			*(uint32_t *)at(m, f->off) = (uint32_t)v;
			break;
		case K_BOOL:
			*(bool *)at(m, f->off) = v != 0;
			break;
		case K_IGN:
			break;
		case K_STR:
		case K_SKIP:
			if (dlen > f->max)
				return SL_GV_R_OVERSIZED;
			if (f->kind == K_STR) {
				struct sl_gv_str *str = at(m, f->off);
				str->p = (const char *)data;
				str->n = dlen;
			}
			break;
		case K_RSTR:
		case K_RSKIP: {
			if (dlen > f->max)
				return SL_GV_R_OVERSIZED;
			if (f->kind == K_RSKIP) {
				/* env/envv are never asked for; if they come anyway they are counted
				 * against the same bound and dropped (metadata over content). */
				if (++m->skipped_elems > SL_GV_MAX_REPEATED)
					return SL_GV_R_TOO_MANY;
				break;
			}
			struct sl_gv_strv *sv = at(m, f->off);
			if (sv->n >= SL_GV_MAX_REPEATED)
				return SL_GV_R_TOO_MANY;
			if (sv->n < SL_GV_ARGV_KEEP) {
				sv->v[sv->n].p = (const char *)data;
				sv->v[sv->n].n = dlen;
			}
			sv->n++;
			break;
		}
		case K_SUB:
			*(bool *)at(m, f->off) = true;
			if ((e = parse(data, dlen, f->sub, f->nsub, m, depth + 1)))
				return e;
			break;
		}
	}
	return SL_GV_OK;
}

/* The message types decoded, each with its field table. */
static const struct {
	uint16_t type;
	const struct spec *s;
	size_t ns;
} msg_types[] = {
    {SL_GV_CONTAINER_START, start_spec, N(start_spec)},
    {SL_GV_SENTRY_CLONE, clone_spec, N(clone_spec)},
    {SL_GV_SENTRY_EXEC, exec_spec, N(exec_spec)},
    {SL_GV_SENTRY_EXIT_NOTIFY_PARENT, exit_task_spec, N(exit_task_spec)},
    {SL_GV_SENTRY_TASK_EXIT, exit_task_spec, N(exit_task_spec)},
    {SL_GV_SYSCALL_OPEN, open_spec, N(open_spec)},
    {SL_GV_SYSCALL_CONNECT, connect_spec, N(connect_spec)},
    /* Bind has Connect's shape: fd, fd_path, bytes address */
    {SL_GV_SYSCALL_BIND, connect_spec, N(connect_spec)},
    {SL_GV_SYSCALL_EXECVE, execve_spec, N(execve_spec)},
    {SL_GV_SYSCALL_SOCKET, socket_spec, N(socket_spec)},
};

enum sl_gv_reject sl_gv_decode(const uint8_t *buf, size_t len, struct sl_gv_msg *m)
{
	memset(m, 0, sizeof(*m));
	if (len < SL_GV_HEADER_MIN)
		return SL_GV_R_SHORT_HEADER;
	/* Little-endian: uint16 header_size | uint16 message_type | uint32 dropped_count. */
	size_t hsize = (size_t)buf[0] | (size_t)buf[1] << 8;
	m->type = (uint16_t)(buf[2] | buf[3] << 8);
	m->dropped =
	    (uint32_t)buf[4] | (uint32_t)buf[5] << 8 | (uint32_t)buf[6] << 16 | (uint32_t)buf[7] << 24;
	if (hsize < SL_GV_HEADER_MIN || hsize > SL_GV_HEADER_MAX || hsize > len)
		return SL_GV_R_HEADER_SIZE;
	for (size_t i = 0; i < N(msg_types); i++)
		if (msg_types[i].type == m->type)
			return parse(buf + hsize, len - hsize, msg_types[i].s, msg_types[i].ns, m, 1);
	return SL_GV_R_UNKNOWN_TYPE;
}

enum sl_gv_reject sl_gv_handshake(const uint8_t *buf, size_t len, uint32_t *version)
{
	struct rd r = {buf, buf + len};
	bool have = false;
	uint64_t ver = 0;
	while (r.p < r.end) {
		uint64_t key, v;
		enum sl_gv_reject e = rd_varint(&r, &key);
		if (e)
			return e;
		/* Only field 1 (varint) is known; anything else here is not a handshake. */
		if (key != ((1u << 3) | 0) || have)
			return SL_GV_R_BAD_HANDSHAKE;
		if ((e = rd_varint(&r, &v)))
			return e;
		ver = v;
		have = true;
	}
	if (!have || ver < 1 || ver > UINT32_MAX)
		return SL_GV_R_BAD_HANDSHAKE;
	*version = (uint32_t)ver;
	return SL_GV_OK;
}
