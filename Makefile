# sightline build. `make` builds build/sightline; `make asan` builds build-asan/sightline
# (ASan+UBSan); `make fuzz` builds the libFuzzer targets with clang; `make test` runs every test.
CC      ?= gcc
BUILD   ?= build
WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
HARDEN   = -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
CFLAGS  ?= -O2 -g
ALL_CFLAGS = -std=gnu17 -D_GNU_SOURCE $(WARN) $(HARDEN) $(CFLAGS) -Isrc $(EXTRA_CFLAGS)
LDFLAGS_ALL = -pie -Wl,-z,relro,-z,now $(LDFLAGS) $(EXTRA_LDFLAGS)
LIBS    = -lseccomp -lcrypto -lyaml -ljson-c -lsqlite3 -lpthread

LIB_SRC  := $(sort $(shell find src -name '*.c' ! -path 'src/cli/*'))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
PROBE_SRC := $(sort $(wildcard tests/probe/*.c))
PROBES   := $(PROBE_SRC:tests/probe/%.c=$(BUILD)/probe/%)
UNIT_SRC := $(sort $(wildcard tests/unit/*.c))
UNITS    := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/unit/%)
FUZZ_SRC := $(sort $(wildcard fuzz/*.c))
FUZZERS  := $(FUZZ_SRC:fuzz/%.c=build-fuzz/%)

.PHONY: all asan fuzz test clean format-check
all: $(BUILD)/sightline $(PROBES) $(UNITS)

$(BUILD)/%.o: %.c $(shell find src -name '*.h')
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libsightline.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	ar rcs $@ $^

$(BUILD)/sightline: $(CLI_OBJ) $(BUILD)/libsightline.a
	$(CC) $(ALL_CFLAGS) $(LDFLAGS_ALL) -o $@ $(CLI_OBJ) $(BUILD)/libsightline.a $(LIBS)

# Probes run inside the sandbox: static, so they need nothing from the host's library paths.
$(BUILD)/probe/%: tests/probe/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -static -o $@ $< -lpthread

$(BUILD)/unit/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(BUILD)/libsightline.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libsightline.a $(LIBS)

asan:
	$(MAKE) BUILD=build-asan CC=clang CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" LDFLAGS="-fsanitize=address,undefined"

FUZZ_LIB_SRC := $(filter src/common/% src/policy/% src/record/% src/sensor/paths.c src/sensor/redact.c src/sensor/binfmt.c src/sensor/gvisor_wire.c src/sensor/gvisor_map.c src/contract/parse.c src/collector/detect.c,$(LIB_SRC))
fuzz: $(FUZZERS)
build-fuzz/%: fuzz/%.c $(FUZZ_LIB_SRC) $(shell find src -name '*.h')
	@mkdir -p build-fuzz
	clang -std=gnu17 -D_GNU_SOURCE -g -O1 -Isrc -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_LIB_SRC) $(LIBS)

test: all
	bash tests/run.sh

format-check:
	clang-format --dry-run --Werror $(shell find src tests fuzz bench -name '*.[ch]')

clean:
	rm -rf build build-asan build-fuzz
