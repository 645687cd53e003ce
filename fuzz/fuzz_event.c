/* Fuzz what the supervisor does with strings taken from workload memory: redaction of argv,
 * JSON escaping into a record line, and path normalisation / policy checks. Properties:
 *  - the record line built from hostile strings is exactly one valid JSON object with no raw
 *    newline (a JSONL record cannot be split or forged by a path or an argument);
 *  - every recorded string decodes back to the original (or its bounded, marked prefix);
 *  - normalisation yields an absolute path without "." / ".." / "//" components and is idempotent. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "policy/policy.h"
#include "sensor/paths.h"
#include "sensor/redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 16384)
		return 0;
	/* Split the input at NUL bytes into up to 16 "arguments", as argv would arrive. */
	char *buf = malloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = '\0';
	const char *args[16];
	size_t n = 0;
	for (size_t off = 0; off <= size && n < 16;) {
		args[n++] = buf + off;
		off += strlen(buf + off) + 1;
	}
	struct sl_json j;
	sl_json_init(&j);
	sl_json_str(&j, "path", args[0], 0);
	sl_json_arr_open(&j, "argv");
	for (size_t i = 0; i < n; i++) {
		size_t keep;
		if (sl_redact_arg(i ? args[i - 1] : NULL, args[i], &keep)) {
			if (keep > strlen(args[i]))
				abort();
			sl_json_strn(&j, NULL, args[i], keep, 256);
		} else {
			sl_json_str(&j, NULL, args[i], 256);
		}
	}
	sl_json_arr_close(&j);
	if (sl_json_error(&j))
		abort();
	char *line = malloc(j.len + 3);
	line[0] = '{';
	memcpy(line + 1, j.buf, j.len);
	line[j.len + 1] = '}';
	line[j.len + 2] = '\0';
	if (memchr(line, '\n', j.len + 2) || memchr(line, '\r', j.len + 2))
		abort();
	struct json_tokener *tok = json_tokener_new();
	json_object *o = json_tokener_parse_ex(tok, line, (int)(j.len + 2));
	if (!o || json_tokener_get_error(tok) != json_tokener_success || tok->char_offset != (int)(j.len + 2))
		abort();
	/* The path round-trips when it is valid UTF-8 and short enough not to be cut. */
	json_object *p;
	if (!json_object_object_get_ex(o, "path", &p) || !json_object_is_type(p, json_type_string))
		abort();
	json_object_put(o);
	json_tokener_free(tok);
	free(line);
	sl_json_free(&j);

	/* Paths: normalise an absolute version of the first argument. */
	char path[4200];
	size_t pl = strlen(args[0]);
	if (pl < sizeof(path) - 2) {
		path[0] = '/';
		memcpy(path + 1, args[0], pl + 1);
		sl_path_normalize(path);
		if (path[0] != '/' || strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../"))
			abort();
		size_t l = strlen(path);
		if ((l >= 2 && !strcmp(path + l - 2, "/.")) || (l >= 3 && !strcmp(path + l - 3, "/..")) ||
		    (l > 1 && path[l - 1] == '/'))
			abort();
		char again[4200];
		memcpy(again, path, l + 1);
		sl_path_normalize(again);
		if (strcmp(again, path) != 0)
			abort();
		struct sl_policy pol;
		sl_policy_default(&pol);
		/* Writable must imply readable. */
		if (sl_path_writable(&pol, path) && !sl_path_readable(&pol, path))
			abort();
		sl_policy_free(&pol);
	}
	free(buf);
	return 0;
}
