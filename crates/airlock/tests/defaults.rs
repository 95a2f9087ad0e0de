//! Operator defaults: `[defaults]` in the user config and `AIRLOCK_MODE`/`AIRLOCK_PERMISSION`/
//! `AIRLOCK_PROFILE` choose mode, permission and profile when no flag does; flags win over the
//! variables, the variables over the file; the workspace-local config never sets them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Fx {
    _t: tempfile::TempDir,
    ws: PathBuf,
    config_home: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("README.md"), "# sample\n").unwrap();
        let config_home = t.path().join("config");
        std::fs::create_dir_all(config_home.join("airlock")).unwrap();
        Fx {
            _t: t,
            ws,
            config_home,
        }
    }

    fn user_config(&self, toml: &str) {
        std::fs::write(self.config_home.join("airlock/config.toml"), toml).unwrap();
    }

    /// `airlock --workspace WS ARGS…` with the fixture's config home and no AIRLOCK_* choices
    /// inherited from the caller; `env` adds variables.
    fn run(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock"));
        cmd.arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env("XDG_CONFIG_HOME", &self.config_home)
            .env_remove("AIRLOCK_MODE")
            .env_remove("AIRLOCK_PERMISSION")
            .env_remove("AIRLOCK_PROFILE")
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// Stages a file through `airlock call write_file`: exit 0 where the mode allows writes, 3
    /// where it does not.
    fn write(&self, env: &[(&str, &str)], flags: &[&str]) -> Option<i32> {
        let mut args: Vec<&str> = flags.to_vec();
        args.extend(["call", "write_file", r#"{"path":"n.txt","content":"x\n"}"#]);
        self.run(env, &args).status.code()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_user_configs_defaults_choose_the_mode_and_flags_and_variables_win() {
    let fx = Fx::new();
    // Built-in default: discuss, where writes are denied.
    assert_eq!(fx.write(&[], &[]), Some(3));
    fx.user_config("[defaults]\nmode = \"build\"\n");
    assert_eq!(fx.write(&[], &[]), Some(0), "the config's default mode");
    // A variable wins over the file, a flag over the variable.
    assert_eq!(fx.write(&[("AIRLOCK_MODE", "discuss")], &[]), Some(3));
    assert_eq!(
        fx.write(&[("AIRLOCK_MODE", "discuss")], &["--mode", "build"]),
        Some(0)
    );
    // Without a file the variable alone chooses.
    fx.user_config("");
    assert_eq!(fx.write(&[("AIRLOCK_MODE", "build")], &[]), Some(0));
    // A bad variable is a usage error naming the choices, like a bad flag.
    let o = fx.run(&[("AIRLOCK_MODE", "yolo")], &["status"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("discuss"), "{}", stderr(&o));
}

#[test]
fn default_profile_and_permission_apply_and_unrestricted_is_refused() {
    let fx = Fx::new();
    fx.user_config("[defaults]\nmode = \"build\"\nprofile = \"readonly\"\n");
    assert_eq!(fx.write(&[], &[]), Some(3), "the readonly default profile");
    assert_eq!(fx.write(&[], &["--profile", "allow-all"]), Some(0));
    fx.user_config("[defaults]\nmode = \"build\"\npermission = \"ask\"\n");
    // Ask mode with no operator reachable (no TTY): a gated command is denied.
    let bash = ["call", "bash", r#"{"command":"true"}"#];
    let o = fx.run(&[], &bash);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = fx.run(&[("AIRLOCK_PERMISSION", "auto")], &bash);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    fx.user_config("\n[defaults]\nprofile = \"unrestricted\"\n");
    let o = fx.run(&[], &["status"]);
    assert_ne!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(
        e.contains("config.toml:3") && e.contains("unrestricted"),
        "{e}"
    );
    fx.user_config("[defaults]\nmode = \"sudo\"\n");
    let e = stderr(&fx.run(&[], &["status"]));
    assert!(
        e.contains("config.toml:2") && e.contains("defaults.mode"),
        "{e}"
    );
}

#[test]
fn the_workspace_local_config_never_sets_defaults() {
    let fx = Fx::new();
    std::fs::create_dir_all(fx.ws.join(".airlock")).unwrap();
    std::fs::write(
        fx.ws.join(".airlock/config.toml"),
        "[defaults]\nmode = \"build\"\n",
    )
    .unwrap();
    let o = fx.run(
        &[],
        &[
            "--allow-local-config",
            "call",
            "write_file",
            r#"{"path":"n.txt","content":"x\n"}"#,
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("defaults come from the user config only"),
        "{}",
        stderr(&o)
    );
    assert!(!Path::new(&fx.ws.join("n.txt")).exists());
}
