#include "sensor/redact.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* Words that make a key or flag name secret-bearing (matched case-insensitively, anywhere). */
static const char *const secret_words[] = {"password", "passwd", "pwd",	       "secret",  "token",
					   "apikey",   "api_key", "api-key",   "auth",	  "credential",
					   "private",  "access_key", "accesskey", "session", "cookie"};

static bool has_secret_word(const char *s, size_t n)
{
	for (size_t w = 0; w < sizeof(secret_words) / sizeof(secret_words[0]); w++) {
		size_t wl = strlen(secret_words[w]);
		for (size_t i = 0; i + wl <= n; i++)
			if (!strncasecmp(s + i, secret_words[w], wl))
				return true;
	}
	return false;
}

/* Known credential shapes. */
static bool looks_like_secret(const char *v)
{
	static const char *const prefixes[] = {"ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "glpat-", "sk-",
					       "xoxb-", "xoxp-", "xoxa-", "AKIA", "ASIA", "AIza", "-----BEGIN",
					       "Bearer ", "Basic "};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(v, prefixes[i], strlen(prefixes[i])) && strlen(v) >= strlen(prefixes[i]) + 8)
			return true;
	size_t n = strlen(v);
	/* JWT: three base64url parts starting with eyJ. */
	if (n > 30 && !strncmp(v, "eyJ", 3) && strchr(v, '.') && strchr(strchr(v, '.') + 1, '.'))
		return true;
	/* A long token mixing lower, upper and digits (a hex digest, having no upper case, is
	 * spared: git hashes are not secrets). */
	if (n >= 32) {
		bool lo = false, up = false, dig = false;
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)v[i];
			if (islower(c))
				lo = true;
			else if (isupper(c))
				up = true;
			else if (isdigit(c))
				dig = true;
			else if (!strchr("+/=_-.", c))
				return false;
		}
		return lo && up && dig;
	}
	return false;
}

bool sl_redact_arg(const char *prev, const char *arg, size_t *keep)
{
	*keep = 0;
	/* "--token X", "--password X", "-H 'Authorization: ...'" handled through prev. */
	if (prev && prev[0] == '-' && !strchr(prev, '=') && has_secret_word(prev, strlen(prev)))
		return true;
	/* user:password@host in URLs */
	const char *scheme = strstr(arg, "://");
	if (scheme) {
		const char *at = strchr(scheme + 3, '@');
		const char *colon = strchr(scheme + 3, ':');
		const char *slash = strchr(scheme + 3, '/');
		if (at && colon && colon < at && (!slash || at < slash)) {
			*keep = (size_t)(colon - arg) + 1;
			return true;
		}
	}
	const char *sep = strpbrk(arg, "=:");
	if (sep && sep != arg && has_secret_word(arg, (size_t)(sep - arg))) {
		*keep = (size_t)(sep - arg) + 1;
		return true;
	}
	return looks_like_secret(arg) || (sep && looks_like_secret(sep + 1) && (*keep = (size_t)(sep - arg) + 1));
}
