//! Operator approvals on the terminal: gated calls in ASK mode are put to the operator on
//! `/dev/tty` (never stdin/stdout, which may carry data). No terminal → denied, with a reason.
//! What the agent chose (the call's summary, a path in the reason) is shown escaped, each on its
//! one line ([`airlock_types::display`]), so it cannot redraw the prompt.

use airlock_kernel::{Approval, ApprovalRequest, Approver};
use airlock_types::display::Shown;
use std::io::{BufRead, BufReader, Write};
use std::sync::Mutex;

/// Asks on `/dev/tty`; denies when there is none.
#[derive(Default)]
pub struct TtyApprover {
    lock: Mutex<()>,
}

impl Approver for TtyApprover {
    fn approve(&self, req: &ApprovalRequest) -> Approval {
        let _guard = self.lock.lock();
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty");
        let Ok(mut tty) = tty else {
            return Approval::Deny(
                "approval needed but no terminal (/dev/tty) is available to ask the operator"
                    .into(),
            );
        };
        let prompt = format!(
            "airlock: `{}` needs approval: {}\n  ({})\nApprove? [o]nce / [s]ession / [N]o: ",
            Shown::name(&req.tool),
            Shown::name(&req.summary),
            Shown::name(&req.decision.reason)
        );
        if tty.write_all(prompt.as_bytes()).is_err() {
            return Approval::Deny("could not write the approval prompt to /dev/tty".into());
        }
        let mut line = String::new();
        if BufReader::new(&mut tty).read_line(&mut line).is_err() {
            return Approval::Deny("could not read the operator's answer from /dev/tty".into());
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "o" | "once" | "y" | "yes" => Approval::Once,
            "s" | "session" => Approval::Session,
            _ => Approval::Deny("the operator declined".into()),
        }
    }
}
