#!/usr/bin/env bash
# The main job on the embedded default: set up, build, then run a canary workload in a native
# sightline sandbox and show what the record says it did.
#   - a harmless program (uname),
#   - a read of a synthetic canary file (random path-stable name, random content),
#   - a TCP connection the policy blocks (port 9; the policy allows only 8080).
# Then the acceptance test of the embedded default's visibility contract (contracts/native.yaml):
# the static check, and `sightline validate` with its table (docs/contract.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
make -s
WORK=$(mktemp -d /tmp/sightline-demo.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK/ws/canary"
token="canary-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "$token" >"$WORK/ws/canary/secret-token.txt"
[ "$(id -u)" = 0 ] && chown -R 65534:65534 "$WORK/ws"
{ cat policies/canary.yaml; echo "workspace: $WORK/ws"; } >"$WORK/policy.yaml"
gaps=()
[ "$(id -u)" = 0 ] || gaps=(--accept-gap cgroup --accept-gap cgroup-memory --accept-gap cgroup-pids)
echo "== running the canary workload in a sandbox (identity: tenant acme, agent coder-1, task demo-1)"
set +e
build/sightline run --tenant acme --agent coder-1 --task demo-1 --version 2026.11 --credential-ref vault:kv/acme/coder-1 \
	--policy "$WORK/policy.yaml" --record-dir "$WORK/records" "${gaps[@]}" -- /bin/bash -c '
		uname -sr
		echo "read canary: $(cat /workspace/canary/secret-token.txt | cut -c1-14)..."
		if exec 3<>/dev/tcp/127.0.0.1/9; then echo "connect to :9 succeeded (should not)"; else echo "connect to :9 refused"; fi'
status=$?
set -e
echo "== workload exit status: $status"
rec=$(ls "$WORK"/records/*.jsonl)
echo "== record: $rec ($(wc -l <"$rec") lines)"
echo "== events (file.open of system libraries omitted; all are in the record):"
jq -r '
	def who: "pid \(.pid // "-")";
	if .class == "record.begin" then "\(.seq)\t\(.class)\truntime \(.manifest.runtime) \(.manifest.runtime_version), landlock ABI \(.manifest.layers.landlock_abi), identity \(.identity|tostring)"
	elif .class == "process.exec" then "\(.seq)\t\(.class)\t\(who) \(.executable) argv=\(.argv|tostring)"
	elif .class == "file.open" then (if .canary or .write or (.result < 0 and .errno != "ENOENT") then "\(.seq)\t\(.class)\t\(who) \(.path) \(.flags) result=\(.result)\(if .canary then "  ** CANARY **" else "" end)" else empty end)
	elif .class == "network.connect" then "\(.seq)\t\(.class)\t\(who) \(.family) \(.address):\(.port // "") result=\(.result) \(.errno // "")"
	elif .class == "policy.deny" then "\(.seq)\t\(.class)\t\(who) layer=\(.layer) \(.syscall) \(.errno) \(.path // "") (\(.reason))"
	elif .class == "lifecycle.exit" then "\(.seq)\t\(.class)\texit_code=\(.exit_code) signal=\(.signal) \(.duration_ns/1e6|floor) ms"
	elif .class == "record.end" then "\(.seq)\t\(.class)\t\(.counts|tostring)"
	else "\(.seq)\t\(.class)\t\(del(.seq,.class,.identity,.sandbox_id,.time,.observer,.prev_hash,.hash,.ocsf)|tostring)" end' "$rec"
echo "== canary token was: ${token:0:14}... (its content is not in the record: $(grep -c "$token" "$rec") matches)"
echo "== verify: $(build/sightline verify "$rec")"
echo
echo "== the visibility contract (contracts/native.yaml), statically: can the native runtime emit it?"
build/sightline contract check contracts/native.yaml --runtime native
if [ "$(id -u)" != 0 ]; then
	echo "== sightline validate needs root (its listener joins the sandbox's network namespace): skipped"
	exit 0
fi
echo
echo "== the acceptance test: sightline validate contracts/native.yaml --runtime native"
set +e
# The acceptance goes to the collector's database (SL_DEMO_DB: another file, for the test of this script).
db=${SL_DEMO_DB:-/var/lib/sightline/collector.db}
build/sightline validate contracts/native.yaml --runtime native --json "$WORK/validate.json" --junit "$WORK/validate.xml" --db "$db"
vstatus=$?
set -e
echo "== reports: $WORK/validate.json ($(jq '.rows | length' "$WORK/validate.json") rows, passed: $(jq .passed "$WORK/validate.json")), $WORK/validate.xml"
echo "== acceptance status for this kernel and sensor:"
build/sightline validate --status --db "$db" || true
exit $vstatus
