//! Warm sandbox hosts: the part of a sandbox that does not depend on the command, made once
//! and kept, so that a run costs only its own mounts.
//!
//! Creating a user namespace and building the base of the minimal root (system directories,
//! the `/etc` allow-list, `/dev`) is most of a cold start. A host is a small detached process
//! that does this once, then listens on a unix socket (in a 0700 directory of the caller's
//! choosing, [`SandboxSpec::warm_host`]). For each run it receives the validated request and
//! the run's pipes (`SCM_RIGHTS`), clones a PID 1 into fresh mount (a copy of its own), pid,
//! ipc, uts and (network off) net namespaces ([`crate::launch::run_namespaces`]), and sends
//! back that PID 1's pidfd. The next PID 1 is cloned ahead of its request (a spare), so
//! creating those namespaces is off the caller's path. The PID 1 then does exactly what a cold
//! one does after the base steps: the run's own `/tmp`, `/dev/shm`, `$HOME` and `/proc`, the
//! workspace overlay, the masks, the read-only root, `pivot_root`, and the command under
//! Landlock and seccomp ([`crate::child`], prepared by [`crate::launch`]). The caller
//! supervises it through the pidfd and reads its report from the same pipes as in a cold run,
//! so both paths share one implementation of everything the command can observe.
//!
//! A host also makes the spare's control groups ([`crate::cgroup`]) ahead of its request, and
//! removes them itself once the run's client has read their accounting and hung up, whether it
//! finished or was killed; groups it cannot remove yet it retries on its next turns.
//!
//! Every request a host decodes is validated as a fresh one is ([`wire::decode`],
//! `RunRequest::check`); a spare re-checks what it can see once it has pivoted. A spare
//! allocates after its clone, which is sound only in a process of one thread: the host clones
//! spares through `launch::clone_allocating`, which counts `/proc/self/task` first and refuses
//! otherwise.
//!
//! Lifecycle: a run with `warm_host` set and no host listening runs cold, then starts a host
//! for next time (the executable is the one [`enable`]d, re-run with [`HOST_ARG`]). One host
//! per socket: it holds an exclusive `flock` on `SOCKET.lock`. It exits after an idle period
//! (60 s by default), when a client of another build connects (the binary changed), or when
//! its socket is gone. [`crate::SandboxSettings::host`] turns hosts off (every run cold) or to
//! `always` (a missing host is started and waited for instead of running cold).
//!
//! Trust: only the host's own uid can reach the socket (directory mode 0700, checked with
//! `SO_PEERCRED`), the socket is outside every sandbox's root, and the runs it starts cannot
//! signal or trace it (Landlock scoping and seccomp, as in a cold run).
//!
//! Modules, in the one direction their calls go: [`client`] (the caller's process) and
//! [`host`] (the host process) both speak [`wire`]; the host hands runs to [`spare`]s; all of
//! them prepare and clone PID 1s through [`crate::launch`], which knows nothing of hosts.

pub(crate) mod client;
pub(crate) mod host;
pub(crate) mod spare;
pub(crate) mod wire;

pub use client::enable;
pub use host::main_hook;
pub(crate) use wire::DEFAULT_IDLE_SECS;
pub use wire::HOST_ARG;
