# Shared helpers for integration tests (sourced; tests run under set -eu).
skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || skip "needs root"; }
# Fresh scratch dir per test, removed on exit.
SL_TMP=$(mktemp -d /tmp/sltest.XXXXXX)
chmod 755 "$SL_TMP"
trap 'rm -rf "$SL_TMP" 2>/dev/null || true' EXIT
# The unprivileged user the tests run sandboxes as (created by scripts/setup.sh).
SL_USER=${SL_USER:-sightline-test}
assert_eq() { [ "$1" = "$2" ] || fail "${3:-values differ}: expected '$2', got '$1'"; }
# jq over a record file: rec_q FILE FILTER
rec_q() { jq -c "$2" "$1"; }
