#include "sensor/binfmt.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

static int copy_path(const unsigned char *s, size_t n, char *out, size_t outlen)
{
	if (n == 0 || outlen == 0)
		return 0;
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, s, n);
	out[n] = '\0';
	return 1;
}

int sl_binfmt_interpreter(const unsigned char *buf, size_t len, char *out, size_t outlen)
{
	if (len >= 2 && buf[0] == '#' && buf[1] == '!') {
		/* The kernel reads at most 256 bytes of the line; the first word is the interpreter. */
		size_t i = 2, lim = len < 256 ? len : 256;
		while (i < lim && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		size_t start = i;
		while (i < lim && buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\0')
			i++;
		return copy_path(buf + start, i - start, out, outlen);
	}
	if (len < sizeof(Elf64_Ehdr) || memcmp(buf, ELFMAG, SELFMAG) != 0 || buf[EI_CLASS] != ELFCLASS64)
		return 0;
	Elf64_Ehdr eh;
	memcpy(&eh, buf, sizeof(eh));
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 1024)
		return -EINVAL;
	for (size_t k = 0; k < eh.e_phnum; k++) {
		uint64_t off = eh.e_phoff + k * (uint64_t)sizeof(Elf64_Phdr);
		if (eh.e_phoff > len || off > len || len - off < sizeof(Elf64_Phdr))
			return 0; /* headers beyond what we read: we cannot tell */
		Elf64_Phdr ph;
		memcpy(&ph, buf + off, sizeof(ph));
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz < 2 || ph.p_filesz > 4096)
			return -EINVAL;
		if (ph.p_offset > len || len - ph.p_offset < ph.p_filesz)
			return 0;
		const unsigned char *s = buf + ph.p_offset;
		size_t n = strnlen((const char *)s, ph.p_filesz);
		return copy_path(s, n, out, outlen);
	}
	return 0;
}
