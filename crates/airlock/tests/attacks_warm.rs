//! Attacks for real, through the `airlock` binary: payload scripts in a temporary workspace run
//! through `airlock exec`, and each test checks the host side, not just the payload's own report.
//!
//! Every attack runs twice where the bash guard could stop it: once as a plain command line (the
//! guard may deny it; that is a valid first line of defence), and once as a script file staged
//! with `airlock call write_file` and run as `airlock exec -- sh payload.sh`, which the guard lets
//! through, so the sandbox itself is what is tested.
//!
//! Here every command runs through the session's warm sandbox host
//! (`AIRLOCK_SANDBOX_HOST=always`), the path most commands take in use.

mod common;

const HOST_MODE: &str = "always";

const TIER: &str = "full";

include!("attacks/suite.rs");

/// The control groups named after the live warm host whose command line contains `marker`: (its
/// pid, every such group with the processes in it). Empty when no such host runs.
fn host_groups(marker: &str) -> (String, Vec<(PathBuf, String)>) {
    let Some(host) = warm_hosts(marker).into_iter().next() else {
        return (String::new(), Vec::new());
    };
    let prefix = format!("airlock-{host}-");
    let mut found = Vec::new();
    let mut dirs = vec![PathBuf::from("/sys/fs/cgroup")];
    // The hierarchies and the groups under them, some levels down (the host's groups sit beside
    // its own, which may be deep in a systemd tree).
    for _ in 0..8 {
        let mut next = Vec::new();
        for d in dirs {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if !p.is_dir() {
                    continue;
                }
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let procs = std::fs::read_to_string(p.join("cgroup.procs")).unwrap_or_default();
                    found.push((p, procs.split_whitespace().collect::<Vec<_>>().join(" ")));
                } else {
                    next.push(p);
                }
            }
        }
        dirs = next;
    }
    (host, found)
}

/// A client killed in the middle of its run (an agent's timeout, kill -9) cannot remove the
/// control groups the host made for that run; the host removes them once the client is gone.
/// Every group named after the host is then its spare's, with the spare in it.
#[test]
fn a_run_whose_client_was_killed_leaves_no_control_group_behind() {
    let fx = Fx::new();
    let run_dir = fx.root.join("run");
    std::fs::create_dir(&run_dir).unwrap();
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let marker = run_dir.to_string_lossy().into_owned();
    let cmd = |argv: &[&str]| {
        let mut args = vec!["--mode", "build", "exec", "--"];
        args.extend_from_slice(argv);
        let mut c = fx.cmd(&args);
        c.env("AIRLOCK_RUN_DIR", &run_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    // The first run starts the session's host.
    assert!(cmd(&["true"]).status().unwrap().success());
    let (host, groups) = host_groups(&marker);
    assert!(!host.is_empty(), "no warm host for {marker}");
    if groups.is_empty() {
        let expected = rustix::process::geteuid().is_root()
            && rustix::fs::access("/sys/fs/cgroup", rustix::fs::Access::WRITE_OK).is_ok();
        assert!(
            !expected,
            "root with writable control groups, yet the host made none"
        );
        eprintln!("no writable control groups here: no group to leave behind");
        return;
    }
    for _ in 0..2 {
        let mut client = cmd(&["sleep", "30"]).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        client.kill().unwrap();
        client.wait().unwrap();
    }
    // The host ends each run once its client hangs up, then removes the run's groups.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left;
    loop {
        let (now_host, groups) = host_groups(&marker);
        assert_eq!(now_host, host, "the host changed");
        left = groups
            .into_iter()
            .filter(|(_, procs)| procs.is_empty())
            .collect::<Vec<_>>();
        if left.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        left.is_empty(),
        "groups without a process, left behind: {left:?}"
    );
    assert!(cmd(&["true"]).status().unwrap().success());
}
