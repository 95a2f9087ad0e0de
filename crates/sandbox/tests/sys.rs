//! `/sys` in the sandbox: what runtimes and test suites read to size themselves is there, as on
//! the host, read-only; nothing else of `/sys` (firmware tables, DMI serials, device and kernel
//! tunables) is visible.

mod common;
use common::*;

#[test]
fn sys_shows_what_suites_read_read_only_and_nothing_else() {
    let fx = Fixture::new();
    let host_online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let spec = fx.spec(
        "echo online=$(cat /sys/devices/system/cpu/online); \
         echo nproc=$(getconf _NPROCESSORS_ONLN); \
         ls /sys/fs/cgroup >/dev/null 2>&1 && echo cgroup=yes; \
         for f in /sys/devices/system/cpu/cpu0/online /sys/kernel/mm/transparent_hugepage/enabled; do \
           if [ -e $f ]; then (echo 1 > $f) 2>/dev/null && echo wrote=$f || echo refused=$f; fi; done; \
         for d in /sys/firmware /sys/class /sys/kernel/debug /sys/devices/virtual /sys/bus; do \
           [ -e $d ] && echo visible=$d; done; \
         touch /sys/new 2>/dev/null && echo created=/sys/new; true",
    );
    let out = run(&spec);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("online={}", host_online.trim())),
        "{text}"
    );
    let host_nproc = std::process::Command::new("getconf")
        .arg("_NPROCESSORS_ONLN")
        .output()
        .unwrap();
    let host_nproc = String::from_utf8_lossy(&host_nproc.stdout)
        .trim()
        .to_string();
    assert!(text.contains(&format!("nproc={host_nproc}")), "{text}");
    if std::path::Path::new("/sys/fs/cgroup").exists() {
        assert!(text.contains("cgroup=yes"), "{text}");
    }
    assert!(!text.contains("wrote="), "{text}");
    assert!(!text.contains("visible="), "{text}");
    assert!(!text.contains("created="), "{text}");
}
