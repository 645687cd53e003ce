/* What an exec will really run first: the interpreter named by a "#!" line or by an ELF
 * PT_INTERP header. Parses the first bytes of a file the workload chose (hostile): pure,
 * bounded, never reads beyond len. Fuzzed by fuzz/fuzz_binfmt.c. */
#ifndef SL_BINFMT_H
#define SL_BINFMT_H
#include <stddef.h>

/* Returns 1 and writes the interpreter path (NUL-terminated, at most outlen-1 bytes) when buf
 * starts with "#!" or is a 64-bit ELF with a PT_INTERP inside buf; 0 when there is none;
 * -EINVAL when buf is malformed in a way the kernel would also reject (the exec fails). */
int sl_binfmt_interpreter(const unsigned char *buf, size_t len, char *out, size_t outlen);
#endif
