#!/usr/bin/env bash
# The sandbox and attack tests, and `airlock doctor`, as a non-root user made for the purpose,
# against the test binaries the suite already built (no second build). Run as root (CI is);
# anyone else is already unprivileged and runs the tests directly with cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
    echo "not root: the suite already runs unprivileged here (cargo test)"
    exit 0
fi
user=airlock-ci
if ! id -u "$user" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/bash "$user"
fi
home=$(getent passwd "$user" | cut -d: -f6)

# The test binaries of the sandbox and the attack suites, as cargo built them.
mapfile -t bins < <(
    cargo test --locked --no-run --message-format=json -p airlock-sandbox -p airlock 2>/dev/null |
        python3 -c '
import json, sys
wanted = {"core", "attacks", "degraded", "landlock_tier", "attacks_cold", "attacks_warm",
          "attacks_landlock", "doctor", "net_loopback"}
for line in sys.stdin:
    m = json.loads(line)
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and m.get("executable") and \
            t.get("kind") == ["test"] and t.get("name") in wanted:
        print(t["name"], m["executable"], m["manifest_path"].rsplit("/", 1)[0])
'
)
[ "${#bins[@]}" -gt 0 ] || { echo "no test binaries found" >&2; exit 1; }

# The user must reach the binaries, the airlock binary the attack suites run, and the crates'
# directories (each test runs in its own, as cargo runs it): open the path to them for
# reading and traversal, nothing more.
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
open_path() {
    local p=$1
    while [ "$p" != / ]; do chmod o+x "$p" 2>/dev/null || true; p=$(dirname "$p"); done
}
open_path "$target/debug/deps"
chmod o+rx "$target" "$target/debug" "$target/debug/deps"
chmod o+rx "$target/debug/airlock"
open_path "$PWD/crates/airlock"
chmod -R o+rX "$PWD/crates"

run_as() {
    runuser -u "$user" -- env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin \
        LANG=C.UTF-8 RUST_BACKTRACE=1 "$@"
}
echo "== airlock doctor as $user ($(id -u "$user"))"
run_as "$target/debug/airlock" --workspace "$home" doctor || true
status=0
for entry in "${bins[@]}"; do
    read -r name exe dir <<<"$entry"
    chmod o+rx "$exe"
    echo "== $name as $user"
    # Without a user namespace or a control group (the Landlock tier of an unprivileged user
    # here), the process ceiling is RLIMIT_NPROC, which counts every process of the user, not
    # of one run: a fork bomb starves the user's other processes until its timeout kills it
    # (a documented limit of that tier), so the fork-bomb attacks are not run there.
    skip=()
    [ "$name" = attacks_landlock ] && skip=(--skip a_fork_bomb)
    if ! (cd "$dir" && run_as "$exe" --test-threads=2 "${skip[@]}" "$@"); then
        status=1
    fi
done
exit $status
