//! `ask` network rules through the library API, with the real proxy and a real registry: the
//! operator is asked when a run first connects to a host an `ask` rule names; an answer for the
//! session is not asked again; a refusal (or no operator) refuses the connection at once with
//! rule `net_ask`.

use airlock_kernel::{
    Approval, ApprovalRequest, Approver, CallContext, Cancel, DenyAll, Kernel, KernelConfig,
    Settings,
};
use airlock_policy::modes::PermissionMode;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Mutex;

/// Answers every question with `answer` and records them.
struct Scripted {
    answer: Approval,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Scripted {
    fn approve(&self, req: &ApprovalRequest) -> Approval {
        self.asked.lock().unwrap().push(req.clone());
        self.answer.clone()
    }
}

fn open(ws: &Path, config_home: &Path, session: &str) -> Kernel {
    let mut vars: Vec<_> = std::env::vars_os()
        .filter(|(k, _)| k != "XDG_CONFIG_HOME")
        .collect();
    vars.push(("XDG_CONFIG_HOME".into(), config_home.into()));
    Kernel::open(KernelConfig {
        workspace: ws.to_path_buf(),
        session: session.into(),
        mode: "build".parse().unwrap(),
        permission: PermissionMode::Auto,
        profile: None,
        allow_local_config: false,
        allow_degraded: false,
        settings: Settings::from_vars(vars, std::env::temp_dir()),
    })
    .expect("kernel opens")
}

fn curl(k: &Kernel, approver: &dyn Approver) -> Value {
    let ctx = CallContext::new(Cancel::new(), approver);
    let args = json!({"argv": ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "https://pypi.org/simple/six/"]});
    k.call("bash", &args.to_string(), &ctx).output
}

#[test]
fn ask_rules_put_the_host_to_the_operator() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let cfg = t.path().join("cfg");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(cfg.join("airlock")).unwrap();
    std::fs::write(
        cfg.join("airlock/config.toml"),
        "[net]\nask = [\"pypi.org\"]\n",
    )
    .unwrap();

    let k = open(&ws, &cfg, "s1");
    let yes = Scripted {
        answer: Approval::Session,
        asked: Mutex::new(Vec::new()),
    };
    let out = curl(&k, &yes);
    assert_eq!(out["exit_code"], 0, "{out}");
    assert_eq!(out["hosts_contacted"], json!(["pypi.org:443"]), "{out}");
    {
        let asked = yes.asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].decision.rule, "net_ask");
        assert!(
            asked[0].summary.contains("pypi.org:443"),
            "{}",
            asked[0].summary
        );
    }
    // Approved for the session: the next run is not asked again.
    let out = curl(&k, &yes);
    assert_eq!(out["exit_code"], 0, "{out}");
    assert_eq!(yes.asked.lock().unwrap().len(), 1);

    // Another session, and no operator: refused at once with the rule.
    let k = open(&ws, &cfg, "s2");
    let out = curl(&k, &DenyAll("nobody is at the terminal".into()));
    assert_ne!(out["exit_code"], 0, "{out}");
    assert_eq!(out["hosts_refused"][0]["rule"], "net_ask", "{out}");
    let reason = out["hosts_refused"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("nobody is at the terminal"), "{reason}");
}
