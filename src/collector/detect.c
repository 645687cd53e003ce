/* Built-in detections. They look only at lines that were already validated and stored (the
 * evidence), and only at what the supervisor wrote: the "canary" flag comes from the launcher's
 * policy, never from the workload. */
#include "collector/detect.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

static const char *str_member(struct json_object *o, const char *k)
{
	struct json_object *v;
	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
		   ? json_object_get_string(v)
		   : NULL;
}

int sl_detect_line(const char *line, size_t len, struct sl_detection *d)
{
	/* Cheap pre-filter on the raw text: almost every line is neither. "class" is the fourth member
	 * (after seq, sandbox_id and time: docs/events.md), so it lies within the first 160 bytes. */
	size_t head = len < 160 ? len : 160;
	bool open =
	    memmem(line, head, "\"class\":\"file.open\"", 19) && memmem(line, len, "\"canary\":true", 13);
	bool deny = !open && memmem(line, head, "\"class\":\"policy.deny\"", 21) &&
		    memmem(line, len, "\"syscall\":\"connect\"", 19);
	if (!open && !deny)
		return 0;
	struct json_tokener *tok = json_tokener_new();
	if (!tok)
		return 0;
	struct json_object *o = json_tokener_parse_ex(tok, line, (int)len);
	json_tokener_free(tok);
	if (!o)
		return 0;
	int r = 0;
	const char *cls = str_member(o, "class");
	struct json_object *v;
	if (open && cls && !strcmp(cls, "file.open") && json_object_object_get_ex(o, "canary", &v) &&
	    json_object_get_boolean(v)) {
		const char *p = str_member(o, "path");
		d->kind = "canary-read";
		snprintf(d->path, sizeof(d->path), "%s", p ? p : "?");
		snprintf(d->detail, sizeof(d->detail), "canary %.256s opened", d->path);
		r = 1;
	} else if (deny && cls && !strcmp(cls, "policy.deny")) {
		const char *sc = str_member(o, "syscall"), *p = str_member(o, "path");
		if (sc && !strcmp(sc, "connect")) {
			d->kind = "blocked-connect";
			snprintf(d->path, sizeof(d->path), "%s", p ? p : "?");
			snprintf(d->detail, sizeof(d->detail), "connection to %.256s blocked by policy",
				 d->path);
			r = 1;
		}
	}
	json_object_put(o);
	return r;
}
