/* libFuzzer target for the record line scanner (record/json_scan.h), differential against json-c:
 * any bytes must give a verdict without a crash or an out-of-bounds read, and whatever the scanner
 * accepts json-c (strict, UTF-8 validating) must accept too, as one object with the same top-level
 * members, of the same types, in the same order (the scanner may only ever be stricter). */
#include <errno.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record/json_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_type want_type(enum sl_jscan_type t)
{
	switch (t) {
	case SL_JSCAN_STRING:
		return json_type_string;
	case SL_JSCAN_INT:
		return json_type_int;
	case SL_JSCAN_NUMBER:
		return json_type_double;
	case SL_JSCAN_OBJECT:
		return json_type_object;
	case SL_JSCAN_ARRAY:
		return json_type_array;
	case SL_JSCAN_TRUE:
	case SL_JSCAN_FALSE:
		return json_type_boolean;
	case SL_JSCAN_NULL:
		return json_type_null;
	}
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sl_jscan sc;
	const char *why = NULL;
	int r = sl_jscan_object((const char *)data, size, &sc, &why);
	if (r != 0) {
		if (r != -EBADMSG || !why || sc.n != 0)
			abort();
		return 0;
	}
	if (why)
		abort();
	struct json_tokener *tok = json_tokener_new_ex(64);
	if (!tok)
		abort();
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	struct json_object *o = json_tokener_parse_ex(tok, (const char *)data, (int)size);
	if (!o || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != size || !json_object_is_type(o, json_type_object) ||
	    (size_t)json_object_object_length(o) != sc.n)
		abort(); /* the scanner accepted what json-c refuses */
	size_t i = 0;
	json_object_object_foreach(o, key, val)
	{
		const struct sl_jscan_member *m = &sc.m[i++];
		if (strlen(key) != m->key_len || memcmp(key, m->key, m->key_len))
			abort();
		json_type t = json_object_get_type(val);
		/* json-c types an integer too large for int64/uint64 as... int still; a number with an
		 * exponent or fraction as double. */
		if (t != want_type(m->type))
			abort();
		if (m->type == SL_JSCAN_STRING && !m->escaped &&
		    ((size_t)json_object_get_string_len(val) != m->val_len ||
		     memcmp(json_object_get_string(val), m->val, m->val_len)))
			abort();
		if ((m->type == SL_JSCAN_TRUE) != (t == json_type_boolean && json_object_get_boolean(val)))
			abort();
	}
	json_object_put(o);
	json_tokener_free(tok);
	return 0;
}
