#!/usr/bin/env bash
# `airlock doctor` inside a real container (rootful podman), on an image built here from the
# host's own files (the airlock binary, a shell and the libraries they need): once with the
# engine's defaults, once with the settings that give the full tier. Needs root and podman
# (apt-get install podman; on a cgroup v1/hybrid host also runc, which crun refuses to run on).
# Usage: scripts/doctor-container.sh [path/to/airlock]   (default: target/debug/airlock)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/airlock}
command -v podman >/dev/null || { echo "podman is not installed: nothing to run" >&2; exit 0; }
root=$(mktemp -d /tmp/airlock-rootfs-XXXXXX)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/usr/bin "$root"/usr/lib "$root"/usr/lib64 "$root"/etc "$root"/tmp "$root"/root "$root"/proc "$root"/sys "$root"/dev
ln -s usr/bin "$root/bin"; ln -s usr/lib "$root/lib"; ln -s usr/lib64 "$root/lib64"
cp "$bin" "$root/usr/bin/airlock"
for b in sh dash cat true; do cp -L "$(command -v "$b")" "$root/usr/bin/" 2>/dev/null || true; done
# The libraries the copied programs load, at their own paths.
for f in "$root"/usr/bin/*; do
    ldd "$f" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
        mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"
    done
done
chmod 1777 "$root/tmp"
grep '^root:' /etc/passwd >"$root/etc/passwd"; grep '^root:' /etc/group >"$root/etc/group"
cp -L /etc/os-release "$root/etc/os-release"
tar -C "$root" -cf "$root.tar" . && podman import -q "$root.tar" localhost/airlock-doctor:local >/dev/null
rm -f "$root.tar"
run=(podman)
# crun refuses cgroup v1 hybrid hosts; runc runs there.
[ -d /sys/fs/cgroup/unified ] && [ -x /usr/sbin/runc ] && run+=(--runtime /usr/sbin/runc)
run+=(run --rm)
# Rootful podman asks for rlimits above a host's own hard limits; ask for the host's.
run+=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
echo "== a default container: ${run[*]} IMAGE airlock doctor"
"${run[@]}" localhost/airlock-doctor:local /usr/bin/airlock --workspace /tmp doctor || true
echo
full=(--security-opt seccomp=unconfined --security-opt 'unmask=/proc/*' --tmpfs /tmp)
echo "== with ${full[*]}"
"${run[@]}" "${full[@]}" localhost/airlock-doctor:local /usr/bin/airlock --workspace /tmp doctor || true
podman rmi -f localhost/airlock-doctor:local >/dev/null 2>&1 || true
