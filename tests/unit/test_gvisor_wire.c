/* Unit tests for the gVisor wire decoder: real datagrams captured from this machine's runsc
 * decode to the expected fields, and every kind of hostile datagram is rejected with its reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sensor/gvisor_wire.h"

#define CHECK_COUNTS
#include "check.h"
#include "gv_build.h"

/* Captured from `runsc --pod-init-config ... do /bin/sh -c ...` (release 0.0~20221219.0):
 * m000 is the container start, m001 the first openat exit (/etc/ld.so.cache). */
static const uint8_t real_m000[] = {
    0x08, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x2e, 0x08, 0xb7, 0x87, 0xc5, 0xf1, 0x9a, 0xe0,
    0xc3, 0xf6, 0x18, 0x10, 0x01, 0x20, 0x01, 0x32, 0x0c, 0x72, 0x75, 0x6e, 0x73, 0x63, 0x2d, 0x37, 0x32,
    0x34, 0x35, 0x32, 0x36, 0x3a, 0x00, 0x42, 0x0a, 0x2f, 0x74, 0x6d, 0x70, 0x2f, 0x67, 0x76, 0x63, 0x61,
    0x70, 0x4a, 0x02, 0x73, 0x68, 0x12, 0x0c, 0x72, 0x75, 0x6e, 0x73, 0x63, 0x2d, 0x37, 0x32, 0x34, 0x35,
    0x32, 0x36, 0x1a, 0x0a, 0x2f, 0x74, 0x6d, 0x70, 0x2f, 0x67, 0x76, 0x63, 0x61, 0x70, 0x22, 0x07, 0x2f,
    0x62, 0x69, 0x6e, 0x2f, 0x73, 0x68, 0x22, 0x02, 0x2d, 0x63, 0x22, 0xa3, 0x01, 0x63, 0x61, 0x74, 0x20,
    0x2f, 0x65, 0x74, 0x63, 0x2f, 0x68, 0x6f, 0x73, 0x74, 0x6e, 0x61, 0x6d, 0x65, 0x3b, 0x20, 0x70, 0x79,
    0x74, 0x68, 0x6f, 0x6e, 0x33, 0x20, 0x2d, 0x63, 0x20, 0x22, 0x69, 0x6d, 0x70, 0x6f, 0x72, 0x74, 0x20,
    0x73, 0x6f, 0x63, 0x6b, 0x65, 0x74, 0x3b, 0x73, 0x3d, 0x73, 0x6f, 0x63, 0x6b, 0x65, 0x74, 0x2e, 0x73,
    0x6f, 0x63, 0x6b, 0x65, 0x74, 0x28, 0x29, 0x3b, 0x70, 0x72, 0x69, 0x6e, 0x74, 0x28, 0x73, 0x2e, 0x63,
    0x6f, 0x6e, 0x6e, 0x65, 0x63, 0x74, 0x5f, 0x65, 0x78, 0x28, 0x28, 0x5c, 0x22, 0x31, 0x32, 0x37, 0x2e,
    0x30, 0x2e, 0x30, 0x2e, 0x31, 0x5c, 0x22, 0x2c, 0x38, 0x30, 0x29, 0x29, 0x29, 0x3b, 0x75, 0x3d, 0x73,
    0x6f, 0x63, 0x6b, 0x65, 0x74, 0x2e, 0x73, 0x6f, 0x63, 0x6b, 0x65, 0x74, 0x28, 0x73, 0x6f, 0x63, 0x6b,
    0x65, 0x74, 0x2e, 0x41, 0x46, 0x5f, 0x55, 0x4e, 0x49, 0x58, 0x29, 0x3b, 0x75, 0x2e, 0x62, 0x69, 0x6e,
    0x64, 0x28, 0x5c, 0x22, 0x2f, 0x74, 0x6d, 0x70, 0x2f, 0x75, 0x5c, 0x22, 0x29, 0x22, 0x20, 0x3b, 0x20,
    0x65, 0x78, 0x69, 0x74, 0x20, 0x33};
static const uint8_t real_m001[] = {
    0x08, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x2e, 0x08, 0xeb, 0xa6, 0xe8, 0xf4, 0x9a,
    0xe0, 0xc3, 0xf6, 0x18, 0x10, 0x01, 0x20, 0x01, 0x32, 0x0c, 0x72, 0x75, 0x6e, 0x73, 0x63, 0x2d,
    0x37, 0x32, 0x34, 0x35, 0x32, 0x36, 0x3a, 0x00, 0x42, 0x0a, 0x2f, 0x74, 0x6d, 0x70, 0x2f, 0x67,
    0x76, 0x63, 0x61, 0x70, 0x4a, 0x02, 0x73, 0x68, 0x12, 0x02, 0x08, 0x03, 0x18, 0x81, 0x02, 0x20,
    0x9c, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x32, 0x10, 0x2f, 0x65, 0x74, 0x63,
    0x2f, 0x6c, 0x64, 0x2e, 0x73, 0x6f, 0x2e, 0x63, 0x61, 0x63, 0x68, 0x65, 0x38, 0x80, 0x80, 0x20};

static bool streq(struct sl_gv_str s, const char *want)
{
	return s.p && s.n == strlen(want) && !memcmp(s.p, want, s.n);
}

static enum sl_gv_reject dec(struct buf *b, struct sl_gv_msg *m)
{
	return sl_gv_decode(b->b, b->n, m);
}

int main(void)
{
	static struct sl_gv_msg m;
	static struct buf b, sub;
	uint32_t ver = 0;

	/* Real datagrams. */
	CHECK(sl_gv_decode(real_m000, sizeof(real_m000), &m) == SL_GV_OK);
	CHECK(m.type == SL_GV_CONTAINER_START && m.dropped == 0);
	CHECK(streq(m.id, "runsc-724526") && m.argv.n >= 1 && streq(m.argv.v[0], "/bin/sh"));
	CHECK(sl_gv_decode(real_m001, sizeof(real_m001), &m) == SL_GV_OK);
	CHECK(m.type == SL_GV_SYSCALL_OPEN && m.has_exit && m.result == 3 && m.errorno == 0);
	CHECK(m.fd == -100 && m.sysno == 257 && streq(m.pathname, "/etc/ld.so.cache"));
	CHECK(m.ctx.present && m.ctx.tid == 1 && m.ctx.tgid == 1 &&
	      streq(m.ctx.container_id, "runsc-724526"));
	CHECK(streq(m.ctx.process_name, "sh") && streq(m.ctx.cwd, "/tmp/gvcap"));
	CHECK(m.flags == 0x80000); /* O_CLOEXEC */
	/* Every cut of a real datagram is rejected or decodes; never read past the end (ASan). */
	for (size_t n = 0; n < sizeof(real_m001); n++) {
		uint8_t *cp = malloc(n ? n : 1);
		memcpy(cp, real_m001, n);
		enum sl_gv_reject r = sl_gv_decode(cp, n, &m);
		CHECK((unsigned)r < SL_GV_R_COUNT && (n >= 8 || r == SL_GV_R_SHORT_HEADER));
		free(cp);
	}
	/* Cutting inside the ContextData (byte 20) must be "truncated". */
	CHECK(sl_gv_decode(real_m001, 20, &m) == SL_GV_R_TRUNCATED);

	/* Handshake. */
	CHECK(sl_gv_handshake((const uint8_t *)"\x08\x01", 2, &ver) == SL_GV_OK && ver == 1);
	CHECK(sl_gv_handshake((const uint8_t *)"\x08\x05", 2, &ver) == SL_GV_OK && ver == 5);
	CHECK(sl_gv_handshake((const uint8_t *)"\x08\x00", 2, &ver) == SL_GV_R_BAD_HANDSHAKE);
	CHECK(sl_gv_handshake((const uint8_t *)"", 0, &ver) == SL_GV_R_BAD_HANDSHAKE);
	CHECK(sl_gv_handshake((const uint8_t *)"\x10\x01", 2, &ver) == SL_GV_R_BAD_HANDSHAKE);
	CHECK(sl_gv_handshake((const uint8_t *)"\x08\x01\x08\x01", 4, &ver) == SL_GV_R_BAD_HANDSHAKE);
	CHECK(sl_gv_handshake((const uint8_t *)"\x08\xff\xff\xff\xff\x10", 6, &ver) == SL_GV_R_BAD_HANDSHAKE);
	CHECK(sl_gv_handshake((const uint8_t *)"\x08\x81", 2, &ver) == SL_GV_R_TRUNCATED);

	/* Header. */
	CHECK(sl_gv_decode((const uint8_t *)"\x08\x00\x07", 3, &m) == SL_GV_R_SHORT_HEADER);
	header(&b, 7, 0);
	b.b[0] = 4;
	CHECK(dec(&b, &m) == SL_GV_R_HEADER_SIZE);
	b.b[0] = 9; /* beyond the datagram */
	CHECK(dec(&b, &m) == SL_GV_R_HEADER_SIZE);
	header(&b, 7, 42);
	CHECK(dec(&b, &m) == SL_GV_OK && m.dropped == 42 && !m.has_exit); /* empty payload: defaults */
	/* A bigger header is skipped. */
	header(&b, 7, 0);
	b.b[0] = 12;
	put(&b, "\xff\xff\xff\xff", 4);
	vfield(&b, 3, 2);
	CHECK(dec(&b, &m) == SL_GV_OK && m.sysno == 2);
	header(&b, 9, 0); /* READ: not subscribed */
	CHECK(dec(&b, &m) == SL_GV_R_UNKNOWN_TYPE);
	header(&b, 0, 0);
	CHECK(dec(&b, &m) == SL_GV_R_UNKNOWN_TYPE);

	/* Varints: 10-byte -100 decodes; 11 bytes or overflow do not. */
	header(&b, 7, 0);
	vfield(&b, 4, (uint64_t)-100);
	CHECK(dec(&b, &m) == SL_GV_OK && m.fd == -100);
	header(&b, 7, 0);
	key(&b, 4, 0);
	put(&b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10);
	CHECK(dec(&b, &m) == SL_GV_R_BAD_VARINT);
	header(&b, 7, 0);
	key(&b, 4, 0);
	put(&b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x81\x00", 11);
	CHECK(dec(&b, &m) == SL_GV_R_BAD_VARINT);
	header(&b, 7, 0);
	key(&b, 4, 0);
	put(&b, "\xff\xff", 2);
	CHECK(dec(&b, &m) == SL_GV_R_TRUNCATED);
	/* A length beyond the message, and a huge length. */
	header(&b, 7, 0);
	key(&b, 6, 2);
	varint(&b, 10);
	put(&b, "abc", 3);
	CHECK(dec(&b, &m) == SL_GV_R_TRUNCATED);
	header(&b, 7, 0);
	key(&b, 6, 2);
	varint(&b, UINT64_MAX);
	CHECK(dec(&b, &m) == SL_GV_R_TRUNCATED);
	/* fixed64 cut short. */
	header(&b, 7, 0);
	key(&b, 99, 1);
	put(&b, "1234", 4);
	CHECK(dec(&b, &m) == SL_GV_R_TRUNCATED);
	/* Wrong wire types. */
	header(&b, 7, 0);
	vfield(&b, 6, 5); /* pathname as a varint */
	CHECK(dec(&b, &m) == SL_GV_R_WIRE_TYPE);
	header(&b, 7, 0);
	sfield(&b, 3, "x", 1); /* sysno as bytes */
	CHECK(dec(&b, &m) == SL_GV_R_WIRE_TYPE);
	header(&b, 7, 0);
	vfield(&b, 1, 1); /* ContextData as a varint */
	CHECK(dec(&b, &m) == SL_GV_R_WIRE_TYPE);
	header(&b, 7, 0);
	key(&b, 3, 5); /* sysno as fixed32 */
	put(&b, "1234", 4);
	CHECK(dec(&b, &m) == SL_GV_R_WIRE_TYPE);
	header(&b, 7, 0);
	key(&b, 3, 7);
	CHECK(dec(&b, &m) == SL_GV_R_WIRE_TYPE);
	/* Groups, and deep nesting through the schema's only nested chain. */
	header(&b, 7, 0);
	for (int i = 0; i < 1000; i++)
		key(&b, 1, 3);
	CHECK(dec(&b, &m) == SL_GV_R_GROUP);
	header(&b, 7, 0);
	sub.n = 0;
	sfield(&sub, 1, "\x0a\x00", 2); /* Credentials{1: <message>}: too deep for uid */
	{
		struct buf c = {.n = 0};
		sfield(&c, 7, sub.b, sub.n);
		sfield(&b, 1, c.b, c.n);
	}
	CHECK(dec(&b, &m) == SL_GV_R_WIRE_TYPE);
	/* 200 levels of nesting inside an unknown field are skipped, not walked. */
	{
		static struct buf in, out;
		in.n = 0;
		for (int i = 0; i < 200; i++) {
			out.n = 0;
			sfield(&out, 50, in.b, in.n);
			in = out;
		}
		header(&b, 7, 0);
		put(&b, in.b, in.n);
		CHECK(dec(&b, &m) == SL_GV_OK && m.unknown_fields == 1);
	}
	/* Field number 0 and beyond 2^29-1. */
	header(&b, 7, 0);
	vfield(&b, 0, 1);
	CHECK(dec(&b, &m) == SL_GV_R_BAD_FIELD);
	header(&b, 7, 0);
	varint(&b, ((uint64_t)1 << 32) << 3);
	varint(&b, 1);
	CHECK(dec(&b, &m) == SL_GV_R_BAD_FIELD);
	/* Oversized strings. */
	{
		static char big[SL_GV_PATH_MAX + 1];
		memset(big, 'a', sizeof(big));
		header(&b, 7, 0);
		ctx(&b);
		sfield(&b, 6, big, SL_GV_PATH_MAX);
		CHECK(dec(&b, &m) == SL_GV_OK && m.pathname.n == SL_GV_PATH_MAX &&
		      streq(m.ctx.container_id, "c1"));
		header(&b, 7, 0);
		sfield(&b, 6, big, SL_GV_PATH_MAX + 1);
		CHECK(dec(&b, &m) == SL_GV_R_OVERSIZED);
		header(&b, 10, 0);
		sfield(&b, 6, big, SL_GV_ADDR_MAX + 1);
		CHECK(dec(&b, &m) == SL_GV_R_OVERSIZED);
		header(&b, 7, 0);
		sub.n = 0;
		sfield(&sub, 6, big, SL_GV_ID_MAX + 1);
		sfield(&b, 1, sub.b, sub.n);
		CHECK(dec(&b, &m) == SL_GV_R_OVERSIZED);
	}
	/* Duplicates of a scalar field and of a sub-message. */
	header(&b, 7, 0);
	vfield(&b, 3, 2);
	vfield(&b, 3, 257);
	CHECK(dec(&b, &m) == SL_GV_R_DUPLICATE);
	header(&b, 7, 0);
	ctx(&b);
	ctx(&b);
	CHECK(dec(&b, &m) == SL_GV_R_DUPLICATE);
	/* Repeated argv: the first 64 kept, all counted, more than 65536 refused. */
	header(&b, 11, 0);
	for (int i = 0; i < 100; i++)
		sfield(&b, 7, "x", 1);
	CHECK(dec(&b, &m) == SL_GV_OK && m.argv.n == 100 && streq(m.argv.v[63], "x"));
	header(&b, 11, 0);
	for (int i = 0; i < SL_GV_MAX_REPEATED + 1; i++)
		sfield(&b, 7, "", 0);
	CHECK(dec(&b, &m) == SL_GV_R_TOO_MANY);
	/* env/envv are dropped, never kept. */
	header(&b, 11, 0);
	sfield(&b, 8, "SECRET=1", 8);
	CHECK(dec(&b, &m) == SL_GV_OK && m.skipped_elems == 1 && m.argv.n == 0);
	/* Exit sub-message: presence tells exit from enter. */
	header(&b, 10, 0);
	sub.n = 0;
	vfield(&sub, 1, (uint64_t)-1);
	vfield(&sub, 2, 101);
	sfield(&b, 2, sub.b, sub.n);
	sfield(&b, 6, "\x02\x00\x00\x50\x7f\x00\x00\x01", 8);
	CHECK(dec(&b, &m) == SL_GV_OK && m.has_exit && m.result == -1 && m.errorno == 101 &&
	      m.address.n == 8);
	/* Every reason has a name. */
	for (int r = 0; r < SL_GV_R_COUNT; r++)
		CHECK(strcmp(sl_gv_reject_name((enum sl_gv_reject)r), "?") != 0);

	if (failures)
		fprintf(stderr, "test_gvisor_wire: %d failures\n", failures);
	else
		printf("test_gvisor_wire: ok\n");
	return failures ? 1 : 0;
}
