//! docs/INTEGRATIONS.md shows, per client, exactly what `airlock setup CLIENT --print` prints
//! for the example workspace: the documentation and the command come from one source and
//! cannot drift. `AIRLOCK_REGEN_DOCS=1` (or `bash scripts/gen-integrations.sh`) rewrites the
//! blocks instead of comparing.

use std::path::PathBuf;
use std::process::Command;

const CLIENTS: [&str; 5] = ["claude", "codex", "gemini", "cursor", "goose"];

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/INTEGRATIONS.md")
}

/// The block the doc holds between the client's markers.
fn generated(client: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args([
            "setup",
            client,
            "--print",
            "--workspace",
            "/path/to/project",
        ])
        .args(["--binary", "/usr/local/bin/airlock"])
        .env("HOME", "/home/you")
        .env_remove("CODEX_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    format!(
        "```sh\nairlock setup {client}          # --print to see it first, --trust to trust the workspace too\n```\n\n```text\n{text}```\n"
    )
}

fn markers(client: &str) -> (String, String) {
    (
        format!("<!-- setup:{client}:begin -->\n"),
        format!("<!-- setup:{client}:end -->"),
    )
}

#[test]
fn integrations_doc_matches_setup_print() {
    let path = doc_path();
    let mut doc = std::fs::read_to_string(&path).unwrap();
    let regen = std::env::var_os("AIRLOCK_REGEN_DOCS").is_some();
    let mut stale = Vec::new();
    for client in CLIENTS {
        let (begin, end) = markers(client);
        let b = doc
            .find(&begin)
            .unwrap_or_else(|| panic!("docs/INTEGRATIONS.md lacks {begin}"))
            + begin.len();
        let e = b + doc[b..]
            .find(&end)
            .unwrap_or_else(|| panic!("docs/INTEGRATIONS.md lacks {end}"));
        let want = generated(client);
        if doc[b..e] != want {
            stale.push(client);
            doc.replace_range(b..e, &want);
        }
    }
    if regen {
        std::fs::write(&path, doc).unwrap();
        return;
    }
    assert!(
        stale.is_empty(),
        "docs/INTEGRATIONS.md differs from `airlock setup --print` for {stale:?}; run \
         scripts/gen-integrations.sh"
    );
}
