/* A small JSON text builder for events. It writes into a growable buffer, escapes every string
 * (control bytes, quotes, invalid UTF-8 as \ufffd), and bounds string lengths so a hostile value
 * cannot bloat the record. Errors are sticky: check sl_json_error() once at the end. */
#ifndef SL_JSON_H
#define SL_JSON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_json {
	char *buf;
	size_t len, cap;
	int err;	 /* first -errno, sticky */
	bool need_comma; /* a value was written at this nesting level */
};

void sl_json_init(struct sl_json *j);
void sl_json_free(struct sl_json *j);
void sl_json_reset(struct sl_json *j);
int sl_json_error(const struct sl_json *j);

/* Raw text, no escaping: only for text this program produced itself. */
void sl_json_raw(struct sl_json *j, const char *s, size_t n);
/* Object/array punctuation. key may be NULL inside arrays. */
void sl_json_obj_open(struct sl_json *j, const char *key);
void sl_json_obj_close(struct sl_json *j);
void sl_json_arr_open(struct sl_json *j, const char *key);
void sl_json_arr_close(struct sl_json *j);
/* Members (key NULL inside arrays). Strings longer than max bytes are cut and end with "…[+N]".
 * max 0 means SL_JSON_STR_MAX. */
#define SL_JSON_STR_MAX 4096
void sl_json_str(struct sl_json *j, const char *key, const char *s, size_t max);
void sl_json_strn(struct sl_json *j, const char *key, const char *s, size_t n, size_t max);
void sl_json_int(struct sl_json *j, const char *key, int64_t v);
void sl_json_uint(struct sl_json *j, const char *key, uint64_t v);
void sl_json_bool(struct sl_json *j, const char *key, bool v);
void sl_json_null(struct sl_json *j, const char *key);
#endif
