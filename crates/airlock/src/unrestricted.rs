//! The unrestricted session: switched on only by a person at the terminal, for one process,
//! never persisted. `--unrestricted` alone grants nothing: the grant
//! ([`airlock_policy::modes::OperatorGrant`]) is made only after the operator types the
//! confirmation word on the controlling terminal (`/dev/tty`), which a model's channels (MCP on
//! stdio, `airlock call` run from a sandboxed command, a config file) do not have. The MCP
//! server refuses the flag outright.

use airlock_policy::modes::OperatorGrant;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::Path;

/// The word the operator types to confirm.
pub const CONFIRMATION: &str = "unrestricted";

/// Why the session stays restricted.
#[derive(Debug, thiserror::Error)]
#[error("the unrestricted session was not switched on: {0}")]
pub struct NotConfirmed(pub String);

/// Ask the person at the terminal `tty` (normally `/dev/tty`) to confirm an unrestricted
/// session for `workspace`/`session`; the grant when they type [`CONFIRMATION`].
pub fn confirm(tty: &Path, workspace: &Path, session: &str) -> Result<OperatorGrant, NotConfirmed> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(tty)
        .map_err(|e| {
            NotConfirmed(format!(
                "there is no terminal to confirm on ({e}); only a person at the terminal can switch it on"
            ))
        })?;
    if !file.is_terminal() {
        return Err(NotConfirmed(format!(
            "`{}` is not a terminal; only a person at the terminal can switch it on",
            tty.display()
        )));
    }
    let mut w = &file;
    let _ = write!(
        w,
        "\n!!! airlock: UNRESTRICTED session requested for workspace {} (session `{session}`).\n\
         !!! For this process the jail admits paths outside the workspace (sensitive files and .airlock/\n\
         !!! stay denied), the profile is `unrestricted`, git_push gets GH_TOKEN, GITHUB_TOKEN, SSH_AUTH_SOCK.\n\
         !!! Type `{CONFIRMATION}` and press Enter to confirm (anything else keeps it restricted): ",
        workspace.display()
    );
    let _ = w.flush();
    let mut line = String::new();
    BufReader::new(&file)
        .read_line(&mut line)
        .map_err(|e| NotConfirmed(format!("the terminal could not be read ({e})")))?;
    if line.trim() == CONFIRMATION {
        let _ = writeln!(w, "!!! airlock: this session is UNRESTRICTED.");
        Ok(OperatorGrant::from_cli_flag())
    } else {
        Err(NotConfirmed("the operator did not confirm".into()))
    }
}
