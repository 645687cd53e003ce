#include "common/util.h"

#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

int64_t sl_now_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t sl_now_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int sl_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t sl_read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int sl_read_file(const char *path, size_t max, char **out, size_t *out_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	_cleanup_free_ char *buf = malloc(max + 2);
	if (!buf)
		return -ENOMEM;
	ssize_t n = sl_read_full(fd, buf, max + 1);
	if (n < 0)
		return (int)n;
	if ((size_t)n > max)
		return -EFBIG;
	buf[n] = '\0';
	if (out_len)
		*out_len = (size_t)n;
	*out = sl_steal_ptr(&buf);
	return 0;
}

int sl_write_file_durable(const char *path, const void *buf, size_t len, mode_t mode)
{
	char tmp[4096], dir[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	int r = sl_write_all(fd, buf, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	close(fd);
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int sl_mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

void sl_hex(const unsigned char *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
}

int sl_random_id(char out[33])
{
	unsigned char raw[16];
	size_t got = 0;
	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	sl_hex(raw, sizeof(raw), out);
	return 0;
}

void sl_timing(const char *phase)
{
	static int on = -1;
	static int64_t t0;
	if (on < 0) {
		const char *e = getenv("SIGHTLINE_TIMING");
		on = e && e[0] == '1';
		t0 = sl_now_monotonic_ns();
	}
	if (on)
		fprintf(stderr, "timing: %-28s +%6lld us\n", phase, (long long)((sl_now_monotonic_ns() - t0) / 1000));
}
