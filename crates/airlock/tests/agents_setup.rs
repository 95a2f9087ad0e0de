//! `airlock setup CLIENT` against the real clients: after setup into a fresh HOME and
//! workspace, the client's own health command (`claude mcp list`, `codex mcp list`,
//! `gemini mcp list`) must report airlock connected or enabled; a second run changes nothing;
//! the user's other settings survive (with a `.bak` of the previous file); a malformed file is
//! an error that changes nothing. Cursor and Goose have no CLI here, so their files are checked
//! by content.
//!
//! The clients are installed from npm at pinned versions by `scripts/ci-deps-agents.sh`; a
//! missing client is a failure, not a skip.

mod agents_common;

use agents_common::*;
use serde_json::{Value, json};
use std::path::Path;

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn claude_setup_is_connected_in_claude_mcp_list() {
    let env = Env::new();
    // The user's own settings, which must survive.
    let user = json!({
        "numStartups": 7,
        "projects": { "/elsewhere": { "allowedTools": ["X"] } },
        "mcpServers": { "other": { "type": "stdio", "command": "true", "args": [] } }
    });
    std::fs::write(env.home.join(".claude.json"), user.to_string()).unwrap();
    std::fs::create_dir_all(env.ws.join(".claude")).unwrap();
    std::fs::write(
        env.ws.join(".claude/settings.local.json"),
        r#"{"permissions": {"allow": ["Read(./docs/**)"], "deny": ["Bash"]}, "model": "opus"}"#,
    )
    .unwrap();
    let out = env.setup(&["claude", "--trust"]);
    assert!(out.contains("~/.claude.json: updated"), "{out}");

    let list = env.client("claude", &["mcp", "list"]);
    let line = list
        .lines()
        .find(|l| l.starts_with("airlock:"))
        .unwrap_or_else(|| panic!("no airlock in `claude mcp list`:\n{list}"));
    assert!(line.contains("Connected"), "{list}");
    assert!(line.contains(&env.ws_str()), "{line}");

    let cfg = read_json(&env.home.join(".claude.json"));
    assert_eq!(cfg["numStartups"], 7);
    assert_eq!(cfg["projects"]["/elsewhere"]["allowedTools"], json!(["X"]));
    assert_eq!(cfg["mcpServers"]["other"]["command"], "true");
    let proj = &cfg["projects"][env.ws_str()];
    assert_eq!(proj["hasTrustDialogAccepted"], true);
    assert_eq!(
        proj["mcpServers"]["airlock"]["command"],
        env!("CARGO_BIN_EXE_airlock")
    );
    let bak = read_json(&env.home.join(".claude.json.bak"));
    assert_eq!(bak["numStartups"], 7);
    assert!(bak["projects"].get(env.ws_str()).is_none());
    let settings = read_json(&env.ws.join(".claude/settings.local.json"));
    assert_eq!(settings["model"], "opus");
    assert_eq!(
        settings["permissions"]["allow"],
        json!(["Read(./docs/**)", "mcp__airlock"])
    );
    assert_eq!(
        settings["permissions"]["deny"],
        json!(["Bash", "Edit", "Write", "NotebookEdit"])
    );
    assert_eq!(settings["env"]["MCP_TOOL_TIMEOUT"], "900000");
    env.assert_idempotent(&["claude", "--trust"]);
}

#[test]
fn codex_setup_is_enabled_in_codex_mcp_list() {
    let env = Env::new();
    let cfg = env.home.join(".codex/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let user = "# my codex settings\nmodel = \"o3\" # the good one\n\n[mcp_servers.other]\ncommand = \"true\"\n";
    std::fs::write(&cfg, user).unwrap();
    let out = env.setup(&["codex"]);
    assert!(out.contains("~/.codex/config.toml: updated"), "{out}");

    let list = env.client("codex", &["mcp", "list"]);
    let line = list
        .lines()
        .find(|l| l.starts_with("airlock "))
        .unwrap_or_else(|| panic!("no airlock in `codex mcp list`:\n{list}"));
    assert!(line.contains("enabled"), "{list}");
    assert!(list.lines().any(|l| l.starts_with("other ")), "{list}");

    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.starts_with("# my codex settings\nmodel = \"o3\" # the good one\n"),
        "{text}"
    );
    let doc: toml::Table = text.parse().unwrap();
    assert_eq!(doc["approval_policy"].as_str(), Some("never"));
    assert_eq!(doc["sandbox_mode"].as_str(), Some("read-only"));
    assert_eq!(doc["features"]["shell_tool"].as_bool(), Some(false));
    let a = &doc["mcp_servers"]["airlock"];
    assert_eq!(a["default_tools_approval_mode"].as_str(), Some("approve"));
    assert_eq!(a["tool_timeout_sec"].as_integer(), Some(900));
    assert_eq!(a["command"].as_str(), Some(env!("CARGO_BIN_EXE_airlock")));
    assert_eq!(
        std::fs::read_to_string(cfg.with_extension("toml.bak")).unwrap(),
        user
    );
    env.assert_idempotent(&["codex"]);
}

#[test]
fn codex_project_scope_with_trust_is_enabled() {
    let env = Env::new();
    env.setup(&["codex", "--scope", "project", "--trust"]);
    let list = env.client("codex", &["mcp", "list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("airlock ") && l.contains("enabled")),
        "{list}"
    );
    let user: toml::Table = std::fs::read_to_string(env.home.join(".codex/config.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        user["projects"][&env.ws_str()]["trust_level"].as_str(),
        Some("trusted")
    );
    assert!(env.ws.join(".codex/config.toml").exists());
    env.assert_idempotent(&["codex", "--scope", "project", "--trust"]);
}

#[test]
fn gemini_setup_is_connected_in_gemini_mcp_list() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.join(".gemini")).unwrap();
    // What the earlier documentation said: `write_file` excluded, which hid airlock's too.
    std::fs::write(
        env.ws.join(".gemini/settings.json"),
        r#"{"ui": {"theme": "GitHub"}, "tools": {"exclude": ["write_file", "web_fetch"]}}"#,
    )
    .unwrap();
    let out = env.setup(&["gemini", "--trust"]);
    assert!(
        out.contains("remove \"write_file\" from tools.exclude"),
        "{out}"
    );

    let list = env.client("gemini", &["mcp", "list"]);
    let line = list
        .lines()
        .find(|l| l.contains("airlock:"))
        .unwrap_or_else(|| panic!("no airlock in `gemini mcp list`:\n{list}"));
    assert!(line.contains("Connected"), "{list}");

    let s = read_json(&env.ws.join(".gemini/settings.json"));
    assert_eq!(s["ui"]["theme"], "GitHub");
    assert_eq!(
        s["tools"]["exclude"],
        json!(["web_fetch", "run_shell_command", "replace", "WriteFileTool"])
    );
    assert_eq!(s["tools"]["allowed"], json!(["write_file"]));
    assert_eq!(s["mcpServers"]["airlock"]["trust"], true);
    assert_eq!(s["mcpServers"]["airlock"]["timeout"], 900000);
    let trusted = read_json(&env.home.join(".gemini/trustedFolders.json"));
    assert_eq!(trusted[env.ws_str()], "TRUST_FOLDER");
    env.assert_idempotent(&["gemini", "--trust"]);
}

#[test]
fn gemini_without_trust_names_the_trust_step() {
    let env = Env::new();
    let out = env.setup(&["gemini"]);
    assert!(out.contains("--trust"), "{out}");
    assert!(!env.home.join(".gemini/trustedFolders.json").exists());
    let list = env.client("gemini", &["mcp", "list"]);
    assert!(
        list.lines()
            .any(|l| l.contains("airlock:") && l.contains("Disabled")),
        "{list}"
    );
}

#[test]
fn cursor_and_goose_files_merge_and_are_idempotent() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.join(".cursor")).unwrap();
    std::fs::write(
        env.ws.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"docs": {"url": "http://localhost:1"}}}"#,
    )
    .unwrap();
    env.setup(&["cursor"]);
    let m = read_json(&env.ws.join(".cursor/mcp.json"));
    assert_eq!(m["mcpServers"]["docs"]["url"], "http://localhost:1");
    assert_eq!(
        m["mcpServers"]["airlock"]["args"],
        json!(["--workspace", env.ws_str(), "--mode", "build", "mcp"])
    );
    let cli = read_json(&env.ws.join(".cursor/cli.json"));
    assert_eq!(cli["permissions"]["allow"], json!(["Mcp(airlock, *)"]));
    env.assert_idempotent(&["cursor"]);

    let goose = env.home.join(".config/goose/config.yaml");
    std::fs::create_dir_all(goose.parent().unwrap()).unwrap();
    std::fs::write(
        &goose,
        "GOOSE_PROVIDER: openai\nextensions:\n  developer:\n    type: builtin\n    name: developer\n    enabled: true\n    bundled: true\n    timeout: 300\n",
    )
    .unwrap();
    env.setup(&["goose"]);
    let y: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&goose).unwrap()).unwrap();
    assert_eq!(y["GOOSE_PROVIDER"].as_str(), Some("openai"));
    assert_eq!(
        y["extensions"]["developer"]["enabled"].as_bool(),
        Some(false)
    );
    assert_eq!(y["extensions"]["developer"]["timeout"].as_u64(), Some(300));
    assert_eq!(y["extensions"]["airlock"]["enabled"].as_bool(), Some(true));
    assert_eq!(
        y["extensions"]["airlock"]["cmd"].as_str(),
        Some(env!("CARGO_BIN_EXE_airlock"))
    );
    env.assert_idempotent(&["goose"]);
    let err = env.setup_fails(&["goose", "--scope", "project"], 2);
    assert!(err.contains("--scope user"), "{err}");
}

#[test]
fn a_malformed_file_is_an_error_that_changes_nothing() {
    let cases: [(&str, &str, &str); 4] = [
        ("claude", ".claude.json", "{\"projects\": {"),
        ("codex", ".codex/config.toml", "model = \n[mcp_servers"),
        ("gemini", "ws/.gemini/settings.json", "{\"tools\": [1,}"),
        (
            "goose",
            ".config/goose/config.yaml",
            "extensions: [\n  - a\n b: :",
        ),
    ];
    for (client, rel, bad) in cases {
        let env = Env::new();
        let path = if let Some(r) = rel.strip_prefix("ws/") {
            env.ws.join(r)
        } else {
            env.home.join(rel)
        };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bad).unwrap();
        let before_home = snapshot_tree(&env.home);
        let before_ws = snapshot_tree(&env.ws);
        let err = env.setup_fails(&[client, "--trust"], 1);
        assert!(err.contains(&path.display().to_string()), "{client}: {err}");
        assert!(err.contains("nothing was changed"), "{client}: {err}");
        assert_eq!(snapshot_tree(&env.home), before_home, "{client}");
        assert_eq!(snapshot_tree(&env.ws), before_ws, "{client}");
    }
}

#[test]
fn a_key_of_the_wrong_shape_is_an_error_that_changes_nothing() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.join(".gemini")).unwrap();
    let bad = r#"{"tools": {"exclude": "run_shell_command"}}"#;
    std::fs::write(env.ws.join(".gemini/settings.json"), bad).unwrap();
    let err = env.setup_fails(&["gemini"], 1);
    assert!(err.contains("tools.exclude"), "{err}");
    assert_eq!(
        std::fs::read_to_string(env.ws.join(".gemini/settings.json")).unwrap(),
        bad
    );
}

#[test]
fn print_writes_nothing() {
    for client in ["claude", "codex", "gemini", "cursor", "goose"] {
        let env = Env::new();
        let out = env.setup(&[client, "--print", "--trust"]);
        assert!(out.contains("mcp"), "{client}: {out}");
        assert!(
            out.contains(env!("CARGO_BIN_EXE_airlock")),
            "{client}: {out}"
        );
        assert!(snapshot_tree(&env.home).is_empty(), "{client}");
        assert!(snapshot_tree(&env.ws).is_empty(), "{client}");
    }
}
