#!/usr/bin/env bash
# Verify overhead: `verify` (fresh sandbox + reporter + parse + sanitise) against running the same
# test command directly, on small fixture projects. Uses hyperfine when present.
#   bash scripts/bench-verify.sh            # node, pytest, cargo
#   RUNS=20 bash scripts/bench-verify.sh node
#   bash scripts/bench-verify.sh incremental   # verify after a one-line change vs direct (below)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${RUNS:-10}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
verify="$CARGO_TARGET_DIR/release/examples/verify"
fixtures="$root/crates/verify/fixtures"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bench() { # name, workspace, direct command
  local name=$1 ws=$2 direct=$3
  echo "== $name"
  if command -v hyperfine >/dev/null; then
    hyperfine -N --warmup 2 --runs "$runs" --export-markdown "$tmp/$name.md" \
      --prepare "rm -rf $ws/target $ws/.airlock-verify" \
      -n direct "bash -c 'cd $ws && $direct >/dev/null 2>&1 || true'" \
      -n verify "bash -c '$verify $ws >/dev/null 2>&1 || true'"
    cat "$tmp/$name.md"
  else
    for label in direct verify; do
      local start end
      start=$(date +%s%N)
      for _ in $(seq "$runs"); do
        rm -rf "$ws/target" "$ws/.airlock-verify"
        if [ $label = direct ]; then (cd "$ws" && eval "$direct" >/dev/null 2>&1 || true)
        else "$verify" "$ws" >/dev/null 2>&1 || true; fi
      done
      end=$(date +%s%N)
      echo "$label: $(( (end - start) / runs / 1000000 )) ms per run"
    done
  fi
}

sel=("$@")
has() { [ ${#sel[@]} -eq 0 ] && return 0; for s in "${sel[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
if has node || has pytest || has cargo; then
  cargo build -q --release -p airlock-verify --example verify
fi

if has node; then
  cp -a "$fixtures/node/pass" "$tmp/node"
  bench node "$tmp/node" "node --test --test-reporter=junit --test-reporter-destination=.airlock-verify/node.xml --test-reporter=spec --test-reporter-destination=stdout"
fi
if has pytest; then
  cp -a "$fixtures/pytest/pass" "$tmp/pytest"
  bench pytest "$tmp/pytest" "PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider --junitxml=.airlock-verify/pytest.xml"
fi
if has cargo; then
  cp -a "$fixtures/cargo/pass" "$tmp/cargo"
  bench cargo "$tmp/cargo" "env -u CARGO_TARGET_DIR cargo test --offline --no-fail-fast --message-format=json-diagnostic-short"
fi

# ---------------------------------------------------------------------------------------------
# Incremental: `airlock verify` after a one-line change beside the direct incremental test run,
# for cargo, go, pytest and vitest, in one run, through the airlock binary (its per-workspace
# caches). Then a fresh clone: the second verify must not rebuild what the first built (read
# from the runner's own output: cargo's `Compiling` lines, go's `(cached)` packages).
#   bash scripts/bench-verify.sh incremental                 # release build
#   PROFILE=debug RUNS=3 bash scripts/bench-verify.sh incremental
# Targets: cargo and go <= 1.2x, pytest and vitest <= 1.1x (release).
if has incremental && [ ${#sel[@]} -gt 0 ]; then
  profile=${PROFILE:-release}
  if [ "$profile" = debug ]; then cargo build -q -p airlock; else cargo build -q --profile "$profile" -p airlock; fi
  airlock="$CARGO_TARGET_DIR/$profile/airlock"
  export PATH="$HOME/.cargo/bin:$PATH"
  inc_runs=${RUNS:-5}
  results=()

  al() { "$airlock" --workspace "$1" --mode build "${@:2}"; }
  stage() { # workspace, relative path: stage the file's on-disk content of the direct copy
    local ws=$1 rel=$2 src=$3
    al "$ws" call write_file "$(python3 -c 'import json,sys; print(json.dumps({"path": sys.argv[1], "content": open(sys.argv[2]).read()}))' "$rel" "$src/$rel")" >/dev/null
  }
  ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
  median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

  cargo_project() { # dir: a crate with a path dependency
    mkdir -p "$1/src" "$1/helper/src"
    printf '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nhelper = { path = "helper" }\n' >"$1/Cargo.toml"
    printf '[package]\nname = "helper"\nversion = "0.1.0"\nedition = "2021"\n' >"$1/helper/Cargo.toml"
    printf 'pub fn base() -> i32 {\n    40\n}\n' >"$1/helper/src/lib.rs"
    printf 'pub fn answer() -> i32 {\n    helper::base() + 2\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn answers() {\n        assert_eq!(super::answer(), 42);\n    }\n}\n' >"$1/src/lib.rs"
    printf 'target/\n' >"$1/.gitignore"
  }
  go_project() { # dir: two packages; the change touches one
    cp -a "$fixtures/go/pass/." "$1/"
    mkdir -p "$1/greet"
    printf 'package greet\n\nfunc Hello() string { return "hello" }\n' >"$1/greet/greet.go"
    printf 'package greet\n\nimport "testing"\n\nfunc TestHello(t *testing.T) {\n\tif Hello() != "hello" {\n\t\tt.Fatal(Hello())\n\t}\n}\n' >"$1/greet/greet_test.go"
  }
  node_project() { # dir
    cp -a "$fixtures/vitest/pass/." "$1/"
    cp -a "$fixtures/node_deps/node_modules" "$1/node_modules"
  }

  incremental() { # name, setup function, changed file, direct command, target ratio
    local name=$1 setup=$2 rel=$3 direct=$4 target=$5
    local d="$tmp/inc-$name-direct" a="$tmp/inc-$name-airlock"
    mkdir -p "$d" "$a"
    $setup "$d"; $setup "$a"
    # Warm both: the direct build, and airlock's caches (first verify).
    (cd "$d" && eval "$direct" >/dev/null 2>&1 || true)
    al "$a" verify >/dev/null 2>&1 || true
    local dt=() vt=()
    for i in $(seq "$inc_runs"); do
      change_line "$rel" "$i" >>"$d/$rel"
      stage "$a" "$rel" "$d"
      dt+=("$(cd "$d" && ms bash -c "$direct")")
      vt+=("$(ms al "$a" verify)")
    done
    local dm vm
    dm=$(median "${dt[@]}"); vm=$(median "${vt[@]}")
    local ratio; ratio=$(awk -v v="$vm" -v d="$dm" 'BEGIN {printf "%.2f", (d > 0 ? v / d : 0)}')
    local ok; ok=$(awk -v r="$ratio" -v t="$target" 'BEGIN {print (r <= t ? "yes" : "NO")}')
    results+=("| $name | $dm | $vm | ${ratio}x | <= ${target}x | $ok |")
  }
  change_line() { # file, n: one line of code that changes what the file compiles to
    case "$1" in
      *.rs) echo "pub fn bench_$2() -> i32 { $2 }" ;;
      *.go) echo "func Bench$2() int { return $2 }" ;;
      *.py) echo "def bench_$2(): return $2" ;;
      *) echo "export function bench$2() { return $2; }" ;;
    esac
  }

  has_runner() { command -v "$1" >/dev/null 2>&1; }
  has_runner cargo && incremental cargo cargo_project src/lib.rs "cargo test --offline -q" 1.2
  has_runner go && incremental go go_project greet/greet.go "go test ./..." 1.2
  pytest_project() { cp -a "$fixtures/pytest/pass/." "$1/"; }
  python3 -c 'import pytest' 2>/dev/null && incremental pytest pytest_project calc/__init__.py "python3 -m pytest -q" 1.1
  if [ -x "$fixtures/node_deps/node_modules/.bin/vitest" ]; then
    incremental vitest node_project src/math.js "node_modules/.bin/vitest run" 1.1
  else
    echo "(vitest skipped: run scripts/ci-deps-verify.sh)"
  fi

  echo "== incremental ($profile build, median of $inc_runs one-line changes, ms)"
  echo "| runner | direct | verify | ratio | target | holds |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${results[@]}"

  # A fresh clone: the first verify builds from nothing; after a one-line change the second
  # must rebuild only what changed. Read from the runner's output, teed into the verify cache.
  fresh() { # name, setup, changed file, command whose output is checked, check function
    local name=$1 setup=$2 rel=$3 cmd=$4 check=$5
    local a="$tmp/fresh-$name" d="$tmp/fresh-$name-edit"
    mkdir -p "$a" "$d"; $setup "$a"; $setup "$d"
    local first; first=$(ms al "$a" verify -- sh -c "$cmd 2>&1 | tee /var/cache/airlock/xdg/first.log")
    change_line "$rel" 1 >>"$d/$rel"
    stage "$a" "$rel" "$d"
    local second; second=$(ms al "$a" verify -- sh -c "$cmd 2>&1 | tee /var/cache/airlock/xdg/second.log")
    local log="$a/.airlock/cache/verify/xdg/second.log"
    if $check "$log"; then echo "$name fresh clone: first verify ${first} ms, second ${second} ms, nothing rebuilt beyond the change: yes"
    else echo "$name fresh clone: the second verify rebuilt more than the change: NO"; sed 's/^/    /' "$log"; fi
  }
  cargo_check() { ! grep -q 'Compiling helper' "$1" && grep -q 'Compiling app' "$1"; }
  go_check() { grep -q 'calc.*(cached)' "$1"; } # go reruns a package's tests only when its test binary changed
  echo "== fresh clone"
  has_runner cargo && fresh cargo cargo_project src/lib.rs "cargo test --offline" cargo_check
  has_runner go && fresh go go_project greet/greet.go "go test ./..." go_check
fi
