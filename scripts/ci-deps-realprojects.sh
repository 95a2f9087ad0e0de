#!/usr/bin/env bash
# Fetches and sets up the real open-source projects of crates/verify/tests/real_projects.rs,
# the way their developers do, from the registries CI reaches (crates.io, PyPI, the npm
# registry, Debian apt). Pinned versions; idempotent and quiet. Everything lands under
# target/realprojects/ (pristine copies; the tests work on private copies).
#
#   cargo   semver 1.0.23 (.crate from static.crates.io: its tests/ ship in it)
#   pytest  packaging 24.2 (PyPI sdist with tests/) in its own .venv: pip install -e . pytest pretend
#   go      go-cmp 0.5.9 (Debian golang-github-google-go-cmp-dev: /usr/share/gocode/src)
#   jest    gensync 1.0.0-beta.2 (npm tarball with test/index.test.js; its "test" script is
#           `jest`): npm install of jest 26.6.3 (its async `describe` blocks are an error from
#           jest 27 on) and util.promisify (which its test requires but its manifest omits)
#   vitest  ADAPTED (no npm package found that ships a vitest suite with a typecheck step): the
#           same gensync sources and suite, its test script switched to
#           `vitest run --globals --typecheck`, a tsconfig, and one type test
#           (test/api.test-d.ts) so the typecheck step has something to check
#   jest    jsx-ast-utils 3.3.5 (npm tarball with src/ and __tests__/src/*-test.js, eleven test
#           files; CI runs `npm run tests-only`, i.e. `jest --coverage`): npm install of its
#           devDependencies with jest 20.0.4 and babel-jest 20.0.3 pinned. The repository's
#           jest.config.js is not in the tarball; its one setting the suite needs, helper.js
#           being no test file, goes into package.json's "jest" key
#   vitest  zod 4.1.12 (npm tarball with src/v3/tests/*.test.ts, 59 test files, importing
#           `zod/v3`, which the package's exports resolve to src/ under its `@zod/source`
#           condition): vitest 3.2.4 installed, and a vitest.config.mjs that sets that
#           condition, as zod's monorepo config does. The v3 suite (`vitest run src/v3`) is
#           the one used: the v4 suite imports test-only packages of the monorepo
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/realprojects
mkdir -p "$out"

# --- cargo: semver ---------------------------------------------------------------------------
if [ ! -f "$out/semver/Cargo.lock" ]; then
  rm -rf "$out/semver" "$out/semver-1.0.23"
  curl -sSfL https://static.crates.io/crates/semver/semver-1.0.23.crate | tar xz -C "$out"
  mv "$out/semver-1.0.23" "$out/semver"
  # Outside this repository's cargo workspace, as the crate's developer has it.
  tmp=$(mktemp -d)
  cp -r "$out/semver" "$tmp/semver"
  (cd "$tmp/semver" && cargo generate-lockfile -q && cargo fetch -q)
  cp "$tmp/semver/Cargo.lock" "$out/semver/Cargo.lock"
  rm -rf "$tmp"
fi

# --- pytest: packaging in a venv -------------------------------------------------------------
if [ ! -x "$out/packaging/.venv/bin/pytest" ]; then
  rm -rf "$out/packaging" "$out/packaging-24.2"
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$tmp" packaging==24.2 >/dev/null
  tar xzf "$tmp"/packaging-24.2.tar.gz -C "$out"
  rm -rf "$tmp"
  mv "$out/packaging-24.2" "$out/packaging"
  (cd "$out/packaging" && python3 -m venv .venv \
    && .venv/bin/pip install --quiet --disable-pip-version-check -e . pytest==8.3.4 pretend==1.0.9 >/dev/null)
fi

# --- go: go-cmp from Debian ------------------------------------------------------------------
src=/usr/share/gocode/src/github.com/google/go-cmp
if [ ! -d "$src" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q golang-github-google-go-cmp-dev >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q golang-github-google-go-cmp-dev >/dev/null; }
fi
if [ ! -f "$out/go-cmp/go.mod" ]; then
  rm -rf "$out/go-cmp"
  cp -rL "$src" "$out/go-cmp"
  chmod -R u+w "$out/go-cmp"
fi

# --- jest and vitest: gensync ----------------------------------------------------------------
if [ ! -x "$out/gensync-jest/node_modules/.bin/jest" ]; then
  rm -rf "$out/gensync-jest"
  mkdir -p "$out/gensync-jest"
  (cd "$out/gensync-jest" && npm pack --silent gensync@1.0.0-beta.2 >/dev/null \
    && tar xzf gensync-1.0.0-beta.2.tgz --strip-components=1 && rm gensync-1.0.0-beta.2.tgz \
    && npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
         jest@26.6.3 util.promisify@1.1.2 >/dev/null)
fi
if [ ! -x "$out/gensync-vitest/node_modules/.bin/vitest" ]; then
  rm -rf "$out/gensync-vitest"
  mkdir -p "$out/gensync-vitest"
  (cd "$out/gensync-vitest" && npm pack --silent gensync@1.0.0-beta.2 >/dev/null \
    && tar xzf gensync-1.0.0-beta.2.tgz --strip-components=1 && rm gensync-1.0.0-beta.2.tgz \
    && node -e '
      const fs = require("fs");
      const p = JSON.parse(fs.readFileSync("package.json"));
      p.scripts.test = "vitest run --globals --typecheck";
      fs.writeFileSync("package.json", JSON.stringify(p, null, 2) + "\n");
      fs.writeFileSync("tsconfig.json", JSON.stringify({
        compilerOptions: { allowJs: true, checkJs: false, noEmit: true, strict: true,
                           skipLibCheck: true, module: "commonjs", target: "es2019",
                           types: ["node"] },
        include: ["index.js", "test/**/*.ts"] }, null, 2) + "\n");
      fs.writeFileSync("test/api.test-d.ts", [
        "import { expectTypeOf, test } from \"vitest\";",
        "import gensync = require(\"../index.js\");",
        "",
        "test(\"gensync is a function\", () => {",
        "  expectTypeOf(gensync).toBeFunction();",
        "});",
        ""].join("\n"));' \
    && npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
         vitest@3.2.4 typescript@5.6.3 @types/node@20.17.6 util.promisify@1.1.2 >/dev/null)
fi
# --- jest: jsx-ast-utils ---------------------------------------------------------------------
if [ ! -x "$out/jsx-ast-utils/node_modules/.bin/jest" ]; then
  rm -rf "$out/jsx-ast-utils"
  mkdir -p "$out/jsx-ast-utils"
  (cd "$out/jsx-ast-utils" && npm pack --silent jsx-ast-utils@3.3.5 >/dev/null \
    && tar xzf jsx-ast-utils-3.3.5.tgz --strip-components=1 && rm jsx-ast-utils-3.3.5.tgz \
    && node -e '
      const fs = require("fs");
      const p = JSON.parse(fs.readFileSync("package.json"));
      p.jest = { testPathIgnorePatterns: ["/node_modules/", "helper.js"] };
      fs.writeFileSync("package.json", JSON.stringify(p, null, 2) + "\n");' \
    && npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
         jest@20.0.4 babel-jest@20.0.3 >/dev/null)
fi

# --- vitest: zod -----------------------------------------------------------------------------
if [ ! -x "$out/zod/node_modules/.bin/vitest" ]; then
  rm -rf "$out/zod"
  mkdir -p "$out/zod"
  (cd "$out/zod" && npm pack --silent zod@4.1.12 >/dev/null \
    && tar xzf zod-4.1.12.tgz --strip-components=1 && rm zod-4.1.12.tgz \
    && printf '%s\n' \
         "export default {" \
         "  resolve: { conditions: [\"@zod/source\"] }," \
         "  ssr: { resolve: { conditions: [\"@zod/source\"] } }," \
         "};" > vitest.config.mjs \
    && npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
         vitest@3.2.4 >/dev/null)
fi
echo "real projects: $(ls "$out" | tr '\n' ' ')"
