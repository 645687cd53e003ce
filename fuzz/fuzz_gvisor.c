/* Fuzz the gVisor wire decoder (handshake, header, payloads) and the mapping of a decoded point
 * to a record body. Properties: no read outside the datagram (ASan), every rejection has a known
 * reason, every decoded string lies inside the datagram and within its bound, and a mapped body
 * is valid JSON text. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "sensor/gvisor_map.h"
#include "sensor/gvisor_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const uint8_t *buf, size_t len, struct sl_gv_str s, size_t max)
{
	if (!s.p)
		return;
	if ((const uint8_t *)s.p < buf || (const uint8_t *)s.p + s.n > buf + len || s.n > max)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);
	memcpy(buf, data, size);
	uint32_t ver;
	enum sl_gv_reject r = sl_gv_handshake(buf, size, &ver);
	if ((unsigned)r >= SL_GV_R_COUNT || (r == SL_GV_OK && ver < 1))
		abort();
	static struct sl_gv_msg m;
	r = sl_gv_decode(buf, size, &m);
	if ((unsigned)r >= SL_GV_R_COUNT)
		abort();
	if (r == SL_GV_OK) {
		inside(buf, size, m.ctx.container_id, SL_GV_ID_MAX);
		inside(buf, size, m.ctx.cwd, SL_GV_PATH_MAX);
		inside(buf, size, m.ctx.process_name, SL_GV_NAME_MAX);
		inside(buf, size, m.pathname, SL_GV_PATH_MAX);
		inside(buf, size, m.fd_path, SL_GV_PATH_MAX);
		inside(buf, size, m.address, SL_GV_ADDR_MAX);
		inside(buf, size, m.binary_path, SL_GV_PATH_MAX);
		for (uint32_t i = 0; i < m.argv.n && i < SL_GV_ARGV_KEEP; i++)
			inside(buf, size, m.argv.v[i], SL_GV_ARG_MAX);
		struct sl_json j;
		sl_json_init(&j);
		const char *cls = NULL;
		struct sl_gv_map_cfg cfg = {.container_id = "runsc-724526", .policy = NULL};
		struct sl_json deny;
		sl_json_init(&deny);
		int mr = sl_gv_map(&m, &cfg, &j, &cls, &deny);
		sl_json_free(&deny);
		if (mr > 0 && !sl_json_error(&j)) {
			/* The body is "k":v,...: wrap it and parse it strictly. */
			size_t n = j.len + 2;
			char *obj = malloc(n + 1);
			obj[0] = '{';
			memcpy(obj + 1, j.buf, j.len);
			obj[n - 1] = '}';
			obj[n] = '\0';
			struct json_tokener *tok = json_tokener_new();
			json_object *o = json_tokener_parse_ex(tok, obj, (int)n);
			if (!o || json_tokener_get_error(tok) != json_tokener_success || memchr(obj, '\n', n))
				abort();
			json_object_put(o);
			json_tokener_free(tok);
			free(obj);
			if (!cls)
				abort();
		}
		sl_json_free(&j);
	}
	free(buf);
	return 0;
}
