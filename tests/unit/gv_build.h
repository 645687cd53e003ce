/* Builders of gVisor runtime-monitoring datagrams for the unit tests (test_gvisor_wire.c,
 * test_gvisor_map.c): the 8-byte header, then protobuf fields written by hand, so the decoder is
 * checked against bytes it did not produce. */
#ifndef SL_TESTS_UNIT_GV_BUILD_H
#define SL_TESTS_UNIT_GV_BUILD_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct buf {
	uint8_t b[200000];
	size_t n;
};

static inline void put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > sizeof(b->b))
		abort();
	memcpy(b->b + b->n, p, n);
	b->n += n;
}
static inline void varint(struct buf *b, uint64_t v)
{
	do {
		uint8_t c = v & 0x7f;
		v >>= 7;
		if (v)
			c |= 0x80;
		put(b, &c, 1);
	} while (v);
}
static inline void key(struct buf *b, unsigned num, unsigned wt)
{
	varint(b, (uint64_t)num << 3 | wt);
}
static inline void vfield(struct buf *b, unsigned num, uint64_t v)
{
	key(b, num, 0);
	varint(b, v);
}
static inline void sfield(struct buf *b, unsigned num, const void *p, size_t n)
{
	key(b, num, 2);
	varint(b, n);
	put(b, p, n);
}
static inline void header(struct buf *b, uint16_t type, uint32_t dropped)
{
	uint8_t h[8] = {8,
			0,
			(uint8_t)type,
			(uint8_t)(type >> 8),
			(uint8_t)dropped,
			(uint8_t)(dropped >> 8),
			(uint8_t)(dropped >> 16),
			(uint8_t)(dropped >> 24)};
	b->n = 0;
	put(b, h, 8);
}
/* A valid ContextData for container "c1". */
static inline void ctx(struct buf *b)
{
	struct buf c = {.n = 0};
	vfield(&c, 1, 1700000000000000000ull);
	vfield(&c, 2, 7);
	vfield(&c, 4, 7);
	sfield(&c, 6, "c1", 2);
	sfield(&c, 8, "/w", 2);
	sfield(&b[0], 1, c.b, c.n);
}
#endif
