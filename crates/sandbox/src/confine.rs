//! The confinement applied to the command just before `execve`: a Landlock ruleset (writes only
//! where the sandbox allows them) and a seccomp filter (dangerous system calls refused). Both
//! are built here, before `clone`; the child only adds the path rules and loads the filter.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr,
    Scope,
};
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

use crate::error::SandboxError;
use crate::plan::{DEV_NODES, cstring};

/// A Landlock path rule: beneath `path`, allow `access`.
#[derive(Debug)]
pub(crate) struct PathRule {
    pub(crate) path: CString,
    pub(crate) access: u64,
}

/// A created ruleset and the rules to add once the sandbox's mounts exist.
#[derive(Debug)]
pub(crate) struct LandlockPlan {
    pub(crate) ruleset: OwnedFd,
    pub(crate) rules: Vec<PathRule>,
}

fn policy_error(what: &'static str, e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Policy {
        what,
        detail: e.to_string(),
    }
}

/// Builds the ruleset: write access is handled (so denied by default), then granted beneath
/// `writable_dirs` and on the writable device files. With `block_tcp`, TCP bind/connect are
/// denied too; signals and abstract unix sockets are scoped to the sandbox. `abi`: the kernel's
/// Landlock ABI version (`launch::landlock_abi`).
pub(crate) fn landlock_plan(
    abi: i32,
    writable_dirs: &[&Path],
    block_tcp: bool,
) -> Result<LandlockPlan, SandboxError> {
    if abi < 1 {
        return Err(SandboxError::Unsupported {
            missing: "Landlock",
            detail: "the kernel reports no Landlock ABI".into(),
        });
    }
    // The rights we rely on (ABI 3: write, refer, truncate) are a hard requirement; newer ones
    // are used when the kernel has them.
    let hard = AccessFs::from_write(ABI::V3);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(hard)
        .map_err(|e| policy_error("Landlock ruleset", e))?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_write(ABI::V5))
        .map_err(|e| policy_error("Landlock ruleset", e))?
        .scope(Scope::from_all(ABI::V6))
        .map_err(|e| policy_error("Landlock ruleset", e))?;
    if block_tcp {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(|e| policy_error("Landlock ruleset", e))?;
    }
    let created = ruleset
        .create()
        .map_err(|e| policy_error("Landlock ruleset", e))?;
    let fd: Option<OwnedFd> = created.into();
    let ruleset =
        fd.ok_or_else(|| policy_error("Landlock ruleset", "the kernel did not create a ruleset"))?;

    // Rules may only name rights the ruleset handles: the kernel's share of from_write(V5).
    let effective = AccessFs::from_write(ABI::from(abi.min(5)));
    let dir_access = effective.bits();
    let file_rights: BitFlags<AccessFs> =
        AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let file_access = (effective & file_rights).bits();
    let mut rules = Vec::new();
    for dir in writable_dirs {
        rules.push(PathRule {
            path: cstring(dir.as_os_str().as_encoded_bytes())?,
            access: dir_access,
        });
    }
    for node in DEV_NODES {
        rules.push(PathRule {
            path: cstring(format!("/dev/{node}").as_bytes())?,
            access: file_access,
        });
    }
    Ok(LandlockPlan { ruleset, rules })
}

/// System calls refused with EPERM.
fn denied_syscalls() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_bpf,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_mount_setattr,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_acct,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_syslog,
        libc::SYS_quotactl,
        libc::SYS_pidfd_getfd,
        // The names a run is given stay fixed (defence in depth: every run has its own uts
        // namespace).
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_iopl,
        libc::SYS_ioperm,
        428, /* open_tree_attr */
    ]);
    v
}

const NAMESPACE_FLAGS: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
        .map_err(|e| policy_error("seccomp filter", e))
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conds).map_err(|e| policy_error("seccomp filter", e))
}

/// Compiles the filter. `block_inet`: refuse `AF_INET`/`AF_INET6` sockets.
pub(crate) fn seccomp_program(block_inet: bool) -> Result<Vec<libc::sock_filter>, SandboxError> {
    seccomp_program_for(block_inet, false)
}

/// The filter of the Landlock tier, which has no namespaces to fall back on: besides
/// [`seccomp_program`]'s refusals, `socket(AF_UNIX, …)` (a host daemon's socket, such as a
/// container engine's, is reachable by path, and Landlock does not govern `connect`;
/// `socketpair` stays allowed) and `setsid`/`setpgid` (the run's process group is what the
/// timeout kills, so no process may leave it).
pub(crate) fn seccomp_program_copy_tier(
    block_inet: bool,
) -> Result<Vec<libc::sock_filter>, SandboxError> {
    seccomp_program_for(block_inet, true)
}

fn seccomp_program_for(
    block_inet: bool,
    copy_tier: bool,
) -> Result<Vec<libc::sock_filter>, SandboxError> {
    // The program depends on these two switches alone: a warm host builds each variant once.
    static CACHE: [std::sync::OnceLock<Vec<libc::sock_filter>>; 4] = [
        std::sync::OnceLock::new(),
        std::sync::OnceLock::new(),
        std::sync::OnceLock::new(),
        std::sync::OnceLock::new(),
    ];
    let slot = &CACHE[usize::from(block_inet) | (usize::from(copy_tier) << 1)];
    if let Some(p) = slot.get() {
        return Ok(p.clone());
    }
    let p = seccomp_program_uncached(block_inet, copy_tier)?;
    let _ = slot.set(p.clone());
    Ok(p)
}

fn seccomp_program_uncached(
    block_inet: bool,
    copy_tier: bool,
) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in denied_syscalls() {
        rules.insert(nr, Vec::new());
    }
    if copy_tier {
        rules.insert(libc::SYS_setsid, Vec::new());
        rules.insert(libc::SYS_setpgid, Vec::new());
    }
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| rule(vec![cond(0, SeccompCmpOp::MaskedEq(flag), flag)?]))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![
                SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::TIOCSTI)
                    .map_err(|e| policy_error("seccomp filter", e))?,
            ])?,
            rule(vec![
                SeccompCondition::new(
                    1,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    libc::TIOCLINUX,
                )
                .map_err(|e| policy_error("seccomp filter", e))?,
            ])?,
        ],
    );
    let mut families = Vec::new();
    if block_inet {
        families.extend([libc::AF_INET, libc::AF_INET6]);
    }
    if copy_tier {
        families.push(libc::AF_UNIX);
    }
    if !families.is_empty() {
        let socket_rules = families
            .iter()
            .map(|&af| {
                rule(vec![
                    SeccompCondition::new(
                        0,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::Eq,
                        u64::from(af.cast_unsigned()),
                    )
                    .map_err(|e| policy_error("seccomp filter", e))?,
                ])
            })
            .collect::<Result<Vec<_>, _>>()?;
        rules.insert(libc::SYS_socket, socket_rules);
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| policy_error("seccomp filter", e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| policy_error("seccomp filter", e))?;
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|e| policy_error("seccomp filter", e))?;
    let mut out = prologue().ok_or_else(|| {
        policy_error(
            "seccomp filter",
            "the prologue does not fit its jump fields",
        )
    })?;
    out.extend(program.iter().map(|f| libc::sock_filter {
        code: f.code,
        jt: f.jt,
        jf: f.jf,
        k: f.k,
    }));
    if out.len() > 4096 {
        return Err(policy_error(
            "seccomp filter",
            "the program exceeds 4096 instructions",
        ));
    }
    Ok(out)
}

/// Address families a sandboxed command may open: unix sockets, IPv4/IPv6 (in the full tier
/// with the network off they reach only the run's private loopback; the Landlock tier refuses
/// them again with EPERM) and netlink for `NETLINK_ROUTE` (libc's
/// `getaddrinfo` and `ip` query interfaces with it). Every other family (vsock, which no network
/// namespace confines, packet, XDP, Bluetooth, CAN, ALG, key, …) fails with EAFNOSUPPORT, and
/// any other netlink protocol with EPROTONOSUPPORT.
pub(crate) const ALLOWED_FAMILIES: [u32; 4] = [
    libc::AF_UNIX as u32,
    libc::AF_INET as u32,
    libc::AF_INET6 as u32,
    libc::AF_NETLINK as u32,
];

/// The only netlink protocol allowed.
pub(crate) const ALLOWED_NETLINK: u32 = libc::NETLINK_ROUTE as u32;

/// Instructions run before seccompiler's program: refuse x32 system calls on x86_64 (which a
/// deny-list would otherwise miss), make `clone3` (whose flags live in memory, beyond a
/// filter's reach) fail with ENOSYS so libc falls back to `clone`, and hold `socket` and
/// `socketpair` to [`ALLOWED_FAMILIES`] (an allow-list: a family the kernel adds later is
/// refused too). Anything else continues into seccompiler's program, which checks the
/// architecture again and applies the deny-list.
fn prologue() -> Option<Vec<libc::sock_filter>> {
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xc000_003e;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xc000_00b7;
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        /// A BPF opcode, checked at compile time to fit its 16-bit field.
        #[allow(clippy::cast_possible_truncation, reason = "checked by the assertion")]
        const fn op(code: u32) -> u16 {
            assert!(code <= 0xffff);
            code as u16
        }
        /// A system call number as the filter sees it (32 bits).
        fn nr(n: libc::c_long) -> Option<u32> {
            u32::try_from(n).ok()
        }
        const LD_ABS_W: u16 = op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS);
        const JEQ: u16 = op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K);
        const JGE: u16 = op(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K);
        const JA: u16 = op(libc::BPF_JMP | libc::BPF_JA);
        const RET: u16 = op(libc::BPF_RET | libc::BPF_K);
        // struct seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (low word first on the
        // little-endian targets above).
        const ARG0: u32 = 16;
        const ARG2: u32 = 32;
        // Labels: every jump is forward, resolved below.
        #[derive(Clone, Copy, PartialEq)]
        enum L {
            Next,
            Cont,
            Sock,
            Eperm,
            Enosys,
            Eafnosupport,
            Eprotonosupport,
        }
        struct I {
            code: u16,
            jt: L,
            jf: L,
            k: u32,
            label: Option<L>,
        }
        let i = |code, jt, jf, k| I {
            code,
            jt,
            jf,
            k,
            label: None,
        };
        let mut prog: Vec<I> = vec![
            i(LD_ABS_W, L::Next, L::Next, 4),
            i(JEQ, L::Next, L::Cont, AUDIT_ARCH), // another arch: seccompiler kills it
            i(LD_ABS_W, L::Next, L::Next, 0),
        ];
        #[cfg(target_arch = "x86_64")]
        prog.push(i(JGE, L::Eperm, L::Next, 0x4000_0000)); // x32 bit set
        #[cfg(not(target_arch = "x86_64"))]
        let _ = JGE;
        prog.push(i(JEQ, L::Enosys, L::Next, nr(libc::SYS_clone3)?));
        prog.push(i(JEQ, L::Sock, L::Next, nr(libc::SYS_socket)?));
        prog.push(i(JEQ, L::Next, L::Cont, nr(libc::SYS_socketpair)?));
        let mut sock = i(LD_ABS_W, L::Next, L::Next, ARG0);
        sock.label = Some(L::Sock);
        prog.push(sock);
        for af in ALLOWED_FAMILIES
            .iter()
            .filter(|&&af| af != libc::AF_NETLINK as u32)
        {
            prog.push(i(JEQ, L::Cont, L::Next, *af));
        }
        prog.push(i(JEQ, L::Next, L::Eafnosupport, libc::AF_NETLINK as u32));
        prog.push(i(LD_ABS_W, L::Next, L::Next, ARG2));
        prog.push(i(JEQ, L::Cont, L::Eprotonosupport, ALLOWED_NETLINK));
        let ret = |errno: i32, label| I {
            code: RET,
            jt: L::Next,
            jf: L::Next,
            k: libc::SECCOMP_RET_ERRNO | (errno.cast_unsigned() & libc::SECCOMP_RET_DATA),
            label: Some(label),
        };
        // Cont jumps over the four returns into seccompiler's program.
        let mut cont = i(JA, L::Next, L::Next, 4);
        cont.label = Some(L::Cont);
        prog.push(cont);
        prog.push(ret(libc::EPERM, L::Eperm));
        prog.push(ret(libc::ENOSYS, L::Enosys));
        prog.push(ret(libc::EAFNOSUPPORT, L::Eafnosupport));
        prog.push(ret(libc::EPROTONOSUPPORT, L::Eprotonosupport));
        let at = |l: L| prog.iter().position(|x| x.label == Some(l));
        // A jump past 255 instructions does not fit: no program rather than a wrong one.
        let off = |pc: usize, l: L| -> Option<u8> {
            match l {
                L::Next => Some(0),
                _ => u8::try_from(at(l)?.checked_sub(pc + 1)?).ok(),
            }
        };
        prog.iter()
            .enumerate()
            .map(|(pc, x)| {
                Some(libc::sock_filter {
                    code: x.code,
                    jt: off(pc, x.jt)?,
                    jf: off(pc, x.jf)?,
                    k: x.k,
                })
            })
            .collect()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Some(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_compiles_with_and_without_inet() {
        let a = seccomp_program(true).unwrap();
        let b = seccomp_program(false).unwrap();
        assert!(a.len() > b.len());
        assert!(seccomp_program_copy_tier(true).unwrap().len() > a.len());
    }
}
