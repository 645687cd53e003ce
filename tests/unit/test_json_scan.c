/* Unit test of the record line scanner (record/json_scan.h): real record lines are accepted with
 * their members; each hostile shape is refused with its own reason; and a differential check against
 * json-c over ~300,000 deterministic mutations of real lines: whatever the scanner accepts, json-c
 * (strict, UTF-8 validating) accepts too, with the same top-level members (the scanner may only be
 * stricter). The mutations must produce both verdicts, so the comparison cannot pass vacuously. */
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/json_scan.h"
#include "check.h"

/* Two lines as the record writer produces them. */
static const char *const lines[] = {
    "{\"seq\":3,\"sandbox_id\":\"689717d020e9ce736d5c1e0355fac599\",\"time\":1796108311174677373,\"class\":"
    "\"process.exec\",\"observer\":\"supervisor\",\"identity\":{\"tenant\":\"bench\",\"agent\":\"a "
    "\\\"q\\\"\\n\","
    "\"task\":\"t1\",\"version\":\"1\",\"credential_ref\":\"none\"},\"pid\":1,\"argv\":[\"/workspace/h\","
    "\"\xc3\xa9\\u00e9\\ud83d\\ude00\"],\"argc\":4,\"exact\":true,\"x\":null,\"f\":-1.5e-3,\"ocsf\":{\"class_"
    "uid\":"
    "1007,\"activity_id\":1},\"prev_hash\":"
    "\"8ed9a12891c86e1d7578e55d3befce2a881bab76423c6bb2a5b065faaecdd910\","
    "\"hash\":\"a8195049f7a1c0d7c3fde15eddcd12662643468ec160362a55b7e0ab90b81f9a\"}",
    "{\"seq\":250005,\"sandbox_id\":\"689717d020e9ce736d5c1e0355fac599\",\"time\":1796108332882263299,"
    "\"class\":"
    "\"record.end\",\"observer\":\"supervisor\",\"identity\":{},\"counts\":{\"events\":250005,\"file.open\":"
    "250000,\"canary\":0},\"empty\":[],\"prev_hash\":"
    "\"a0fda487112c3e5ac77715ef163f954c8a6d6e491d03d1eecd18ddfbcb3"
    "0220a\",\"hash\":\"fb78298e0ef6a464827a125aa8d382f7f9f50128cca9e4909e1e0f6493ba9a54\"}",
};

static struct sl_jscan sc;

static void test_lines(void)
{
	const char *why;
	CHECK(sl_jscan_object(lines[0], strlen(lines[0]), &sc, &why) == 0 && why == NULL);
	const struct sl_jscan_member *m = sl_jscan_get(&sc, "seq", 3);
	CHECK(m && m->type == SL_JSCAN_INT && m->val_len == 1 && m->val[0] == '3' && m == &sc.m[0]);
	m = sl_jscan_get(&sc, "class", 5);
	CHECK(m && m->type == SL_JSCAN_STRING && m->val_len == 12 && !memcmp(m->val, "process.exec", 12) &&
	      !m->escaped);
	m = sl_jscan_get(&sc, "identity", 8);
	CHECK(m && m->type == SL_JSCAN_OBJECT && m->val[0] == '{' && m->val[m->val_len - 1] == '}');
	m = sl_jscan_get(&sc, "argv", 4);
	CHECK(m && m->type == SL_JSCAN_ARRAY && m->val[m->val_len - 1] == ']');
	CHECK(sl_jscan_get(&sc, "exact", 5)->type == SL_JSCAN_TRUE);
	CHECK(sl_jscan_get(&sc, "x", 1)->type == SL_JSCAN_NULL);
	CHECK(sl_jscan_get(&sc, "f", 1)->type == SL_JSCAN_NUMBER);
	CHECK(sl_jscan_get(&sc, "hash", 4) == &sc.m[sc.n - 1] && sc.m[sc.n - 1].val_len == 64);
	CHECK(sl_jscan_get(&sc, "nope", 4) == NULL);
	CHECK(sl_jscan_object(lines[1], strlen(lines[1]), &sc, &why) == 0);
	CHECK(sl_jscan_get(&sc, "empty", 5)->type == SL_JSCAN_ARRAY &&
	      sl_jscan_get(&sc, "empty", 5)->val_len == 2);
	CHECK(sl_jscan_object("{}", 2, &sc, &why) == 0 && sc.n == 0);
	CHECK(sl_jscan_object("{ \"a\" : [ 1 , { } ] }", 21, &sc, &why) == 0 && sc.n == 1 &&
	      sc.m[0].val_len == 11);
}

struct bad_case {
	const char *text;
	const char *why;
};

static void test_hostile(void)
{
	char deep[256] = "{\"a\":";
	for (int i = 0; i < 31; i++)
		strcat(deep, "[");
	strcat(deep, "1");
	for (int i = 0; i < 31; i++)
		strcat(deep, "]");
	strcat(deep, "}");
	const char *why;
	CHECK(sl_jscan_object(deep, strlen(deep), &sc, &why) == 0); /* 32 deep: the limit */
	char deeper[256];
	snprintf(deeper, sizeof(deeper), "{\"a\":[%.*s}", (int)strlen(deep) - 5, deep + 5);
	/* deeper = {"a":[ + 31 '[' 1 31 ']' } : unbalanced anyway; make a balanced 33-deep one */
	snprintf(deeper, sizeof(deeper), "{\"a\":[%.*s]}", (int)strlen(deep) - 6, deep + 5);
	const struct bad_case cases[] = {
	    {"", "not a JSON object"},
	    {" {}", "not a JSON object"},
	    {"[1]", "not a JSON object"},
	    {"{} ", "bytes after the object"},
	    {"{}{}", "bytes after the object"},
	    {"{\"a\":1,\"a\":2}", "a top-level member is given twice"},
	    {"{\"hash\":\"x\",\"h\\u0061sh\":\"y\"}", "a top-level member name is escaped"},
	    {"{\"a\":NaN}", "expected a value"},
	    {"{\"a\":Infinity}", "expected a value"},
	    {"{\"a\":-Infinity}", "invalid number"},
	    {"{\"a\":01}", "expected ',' or the end of an object or array"},
	    {"{\"a\":1.}", "invalid number"},
	    {"{\"a\":.5}", "expected a value"},
	    {"{\"a\":1e}", "invalid number"},
	    {"{\"a\":+1}", "expected a value"},
	    {"{\"a\":tru}", "invalid literal"},
	    {"{\"a\":True}", "expected a value"},
	    {"{'a':1}", "expected a member name"},
	    {"{\"a\":'x'}", "expected a value"},
	    {"{\"a\" 1}", "expected ':' after a member name"},
	    {"{\"a\":1,}", "expected a member name"},
	    {"{\"a\":[1,]}", "expected a value"},
	    {"{\"a\":[1}", "expected ',' or the end of an object or array"},
	    {"{\"a\":1", "unterminated object or array"},
	    {"{\"a\":\"x", "unterminated string"},
	    {"{\"a\":\"x\\", "unterminated string"},
	    {"{\"a\":\"\t\"}", "control byte in a string"},
	    {"{\"a\":\"\\x\"}", "invalid escape in a string"},
	    {"{\"a\":\"\\u12g4\"}", "invalid \\u escape in a string"},
	    {"{\"a\":\"\\ud800\"}", "lone high surrogate escape in a string"},
	    {"{\"a\":\"\\ud800\\u0041\"}", "lone high surrogate escape in a string"},
	    {"{\"a\":\"\\udc00\"}", "lone low surrogate escape in a string"},
	    {"{\"a\":\"\xc0\xaf\"}", "invalid UTF-8 in a string"},	   /* overlong '/' */
	    {"{\"a\":\"\xed\xa0\x80\"}", "invalid UTF-8 in a string"},	   /* a surrogate */
	    {"{\"a\":\"\xf4\x90\x80\x80\"}", "invalid UTF-8 in a string"}, /* above U+10FFFF */
	    {"{\"a\":\"\xe2\x82\"}", "invalid UTF-8 in a string"},	   /* cut short */
	    {"{\"a\":\"\xff\"}", "invalid UTF-8 in a string"},
	    {deeper, "nested too deep"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why = NULL;
		int r = sl_jscan_object(cases[i].text, strlen(cases[i].text), &sc, &why);
		if (r != -EBADMSG || !why || strcmp(why, cases[i].why) != 0 || sc.n != 0)
			die("case %zu '%s': got %d '%s', want -EBADMSG '%s'", i, cases[i].text, r,
			    why ? why : "(null)", cases[i].why);
	}
	/* A NUL byte inside a string is a control byte; the length, not a terminator, bounds the scan. */
	CHECK(sl_jscan_object("{\"a\":\"\0\"}", 9, &sc, &why) == -EBADMSG);
	CHECK(sl_jscan_object("{\"a\":1}", 6, &sc, &why) == -EBADMSG); /* cut before the '}' */
	/* Too many top-level members. */
	static char many[8192];
	size_t n = 0;
	many[n++] = '{';
	for (int i = 0; i <= SL_JSCAN_MAX_MEMBERS; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "%s\"k%d\":%d", i ? "," : "", i, i);
	many[n++] = '}';
	CHECK(sl_jscan_object(many, n, &sc, &why) == -EBADMSG && !strcmp(why, "too many top-level members"));
}

/* json-c's view must agree with everything the scanner accepted. Returns 1 if json-c accepts. */
static int jsonc_accepts(const char *p, size_t len, const struct sl_jscan *s, bool compare)
{
	struct json_tokener *tok = json_tokener_new_ex(64);
	CHECK(tok);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	struct json_object *o = json_tokener_parse_ex(tok, p, (int)len);
	int ok = o && json_tokener_get_error(tok) == json_tokener_success &&
		 json_tokener_get_parse_end(tok) == len && json_object_is_type(o, json_type_object);
	if (ok && compare) {
		CHECK((size_t)json_object_object_length(o) == s->n);
		size_t i = 0;
		json_object_object_foreach(o, key, val)
		{
			const struct sl_jscan_member *m = &s->m[i++];
			CHECK(strlen(key) == m->key_len && !memcmp(key, m->key, m->key_len));
			if (m->type == SL_JSCAN_STRING) {
				CHECK(json_object_is_type(val, json_type_string));
				if (!m->escaped)
					CHECK((size_t)json_object_get_string_len(val) == m->val_len &&
					      !memcmp(json_object_get_string(val), m->val, m->val_len));
			}
			if (m->type == SL_JSCAN_INT)
				CHECK(json_object_is_type(val, json_type_int));
			if (m->type == SL_JSCAN_OBJECT)
				CHECK(json_object_is_type(val, json_type_object));
			if (m->type == SL_JSCAN_ARRAY)
				CHECK(json_object_is_type(val, json_type_array));
		}
	}
	json_object_put(o);
	json_tokener_free(tok);
	return ok;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void test_differential(void)
{
	/* Bytes worth trying: structure, escapes, digits, UTF-8 lead and continuation bytes. */
	static const char alphabet[] =
	    "{}[]\":,\\/ \t\n0123456789-+.eEtrufalsn\x01\x7f\x80\xbf\xc0\xc3\xe2\xed\xf0\xf4\xff"
	    "uUabcdefAF'";
	static char buf[4096];
	size_t both = 0, scan_only_rejects = 0, both_reject = 0;
	for (int iter = 0; iter < 300000; iter++) {
		const char *src = lines[iter & 1];
		size_t len = strlen(src);
		memcpy(buf, src, len);
		int edits = 1 + (int)(next_rand() % 3);
		for (int e = 0; e < edits; e++) {
			size_t pos = (size_t)(next_rand() % len);
			char c = alphabet[next_rand() % (sizeof(alphabet) - 1)];
			switch (next_rand() % 4) {
			case 0: /* replace */
				buf[pos] = c;
				break;
			case 1: /* insert */
				if (len + 1 < sizeof(buf)) {
					memmove(buf + pos + 1, buf + pos, len - pos);
					buf[pos] = c;
					len++;
				}
				break;
			case 2: /* delete */
				if (len > 1) {
					memmove(buf + pos, buf + pos + 1, len - pos - 1);
					len--;
				}
				break;
			default: /* truncate */
				len = pos + 1;
			}
		}
		const char *why;
		bool ok = sl_jscan_object(buf, len, &sc, &why) == 0;
		int jc = jsonc_accepts(buf, len, &sc, ok);
		if (ok && !jc)
			die("the scanner accepts what json-c refuses: '%.*s'", (int)len, buf);
		both += ok;
		scan_only_rejects += !ok && jc;
		both_reject += !ok && !jc;
	}
	printf("differential: %zu accepted by both, %zu refused by both, %zu refused only by the scanner\n",
	       both, both_reject, scan_only_rejects);
	CHECK(both > 1000 && both_reject > 1000);
}

int main(void)
{
	test_lines();
	test_hostile();
	test_differential();
	printf("test_json_scan: all passed\n");
	return 0;
}
