#!/usr/bin/env bash
# Fails when library code of a crate other than the front end reads environment variables.
# The `airlock` binary reads its environment once, in `main` (`airlock_kernel::Settings` and the
# sandbox's `SandboxSettings::from_vars`), and passes it down; the library crates take what they
# need as arguments or settings.
set -euo pipefail
cd "$(dirname "$0")/.."
crates=(crates/types/src crates/policy/src crates/stage/src crates/sandbox/src crates/verify/src crates/kernel/src)
pattern='env::(var|var_os|vars|vars_os|temp_dir|home_dir)\b|option_env!'
if hits=$(grep -rnE "$pattern" "${crates[@]}"); then
    echo "$hits"
    echo "library code reads the environment: take the value from the caller (Settings) instead" >&2
    exit 1
fi
echo "no environment reads in ${crates[*]}"
