#!/usr/bin/env bash
# One-time set-up of a fresh Debian 12 machine (idempotent): the build and test dependencies
# from Debian's archive, and the unprivileged user the tests run sandboxes as.
set -euo pipefail
PKGS=(build-essential clang libclang-rt-14-dev pkg-config libseccomp-dev libssl-dev libyaml-dev
      libjson-c-dev libsqlite3-dev sqlite3 jq bubblewrap python3 clang-format runsc)
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "setup: missing packages ${missing[*]}; run this script as root once" >&2
		exit 1
	fi
	echo "setup: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The unprivileged user for the "runs as an unprivileged user" tests.
if [ "$(id -u)" = 0 ] && ! id sightline-test >/dev/null 2>&1; then
	useradd --system --create-home --shell /usr/sbin/nologin sightline-test
fi
