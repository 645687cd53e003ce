/* The supervisor's path policy: which sandbox paths the workload may open, and for writing.
 * Pure functions over strings the workload chose (hostile): no allocation, bounded by the
 * caller's buffers. Fuzzed by fuzz/fuzz_event.c. */
#include "sensor/paths.h"

#include <string.h>

#include "common/util.h"

bool sl_path_under(const char *path, const char *root)
{
	size_t n = strlen(root);
	if (n == 1 && root[0] == '/')
		return true;
	return !strncmp(path, root, n) && (path[n] == '\0' || path[n] == '/');
}

/* Lexical normalisation (".", "..", "//") of an absolute path, in place. Used for the policy's
 * pre-check only; the open itself resolves the original string as the kernel would. */
void sl_path_normalize(char *p)
{
	char *out = p, *in = p;
	while (*in) {
		while (*in == '/')
			in++;
		char *seg = in;
		while (*in && *in != '/')
			in++;
		size_t len = (size_t)(in - seg);
		if (len == 0 || (len == 1 && seg[0] == '.'))
			continue;
		if (len == 2 && seg[0] == '.' && seg[1] == '.') {
			while (out > p && *--out != '/')
				;
			continue;
		}
		*out++ = '/';
		memmove(out, seg, len);
		out += len;
	}
	if (out == p)
		*out++ = '/';
	*out = '\0';
}

bool sl_path_readable(const struct sl_policy *p, const char *path)
{
	if (!strcmp(path, "/"))
		return true;
	if (sl_path_under(path, p->workspace_mount) || sl_path_under(path, "/dev") || sl_path_under(path, "/proc") ||
	    (p->tmp && sl_path_under(path, "/tmp")))
		return true;
	for (size_t i = 0; i < p->n_ro; i++)
		if (sl_path_under(path, p->ro_paths[i]))
			return true;
	return false;
}

bool sl_path_writable(const struct sl_policy *p, const char *path)
{
	if (sl_path_under(path, p->workspace_mount) || (p->tmp && sl_path_under(path, "/tmp")) || sl_path_under(path, "/dev/shm"))
		return true;
	static const char *const devs[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
					   "/dev/urandom"};
	for (size_t i = 0; i < SL_ARRAY_LEN(devs); i++)
		if (!strcmp(path, devs[i]))
			return true;
	return false;
}

bool sl_path_is_canary(const struct sl_policy *p, const char *path)
{
	for (size_t i = 0; i < p->n_canaries; i++)
		if (!strcmp(path, p->canaries[i]))
			return true;
	return false;
}
