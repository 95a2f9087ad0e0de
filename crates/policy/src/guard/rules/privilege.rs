//! `privilege`: commands that give a program or a user more rights than the agent has —
//! setuid/setgid modes (`chmod u+s`, `chmod 4755`, `install -m 4755`), file capabilities
//! (`setcap`), membership of an admin group, and writes to, or mode and owner changes of, the
//! files that grant root (`/etc/sudoers`, `/etc/sudoers.d/*`, `/etc/passwd`, `/etc/shadow`,
//! `/etc/group`).
//! `sudo`, `su`, `chroot`, `nsenter`, `unshare` are recorded by the walk as it unwraps them.

use super::super::Family;
use super::super::command::{Spec, parse_args};
use super::super::effects::Effects;
use super::super::normalize::Arg;

pub(super) fn check(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) {
    match name {
        "chmod" => privilege_chmod(w, args, shown),
        // `chown bob /etc/sudoers`, `chgrp -R users /etc/sudoers.d`: the new owner may rewrite
        // who is root. (`--reference=F` takes all operands as files.)
        "chown" | "chgrp" => privilege_chown(w, args, shown),
        "install" => privilege_install(w, args, shown),
        "setcap" => privilege_setcap(w, args, shown),
        "usermod" | "gpasswd" | "adduser" | "addgroup" | "useradd" => {
            privilege_usermod(w, name, args, shown)
        }
        "visudo" => w.deny(
            Family::Privilege,
            format!("`{shown}` edits who may run commands as root."),
        ),
        "tee" | "cp" | "mv" | "ln" | "dd" => privilege_tee(w, name, args, shown),
        _ => {}
    }
}

/// When `chmod` grants rights the agent does not have.
fn privilege_chmod(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let p = parse_args(args, &Spec::gnu("", &["reference"]));
    // A mode such as `-s` reads as an option; it only removes bits.
    if !p.has_long("reference") && p.operands.len() >= 2 && sets_id_bits(&p.operands[0].text) {
        w.deny(
            Family::Privilege,
            format!("`{shown}` sets the setuid or setgid bit, so the file runs with its owner's or group's rights."),
        );
    } else if p.operands.len() >= 2 && p.operands[1..].iter().any(|a| grants_root(&a.text)) {
        w.deny(
            Family::Privilege,
            format!("`{shown}` changes who may edit a file that decides who is root."),
        );
    }
}

/// When `chown chgrp` grants rights the agent does not have.
fn privilege_chown(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let p = parse_args(args, &Spec::gnu("", &["reference", "from"]));
    let files = if p.has_long("reference") {
        &p.operands[..]
    } else {
        p.operands.get(1..).unwrap_or(&[])
    };
    if files.iter().any(|a| grants_root(&a.text)) {
        w.deny(
            Family::Privilege,
            format!("`{shown}` changes who may edit a file that decides who is root."),
        );
    }
}

/// When `install` grants rights the agent does not have.
fn privilege_install(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let p = parse_args(
        args,
        &Spec::gnu(
            "gmoStT",
            &["group", "mode", "owner", "suffix", "target-directory"],
        ),
    );
    if p.values(Some('m'), &["mode"]).any(sets_id_bits) {
        w.deny(
            Family::Privilege,
            format!("`{shown}` installs a file with the setuid or setgid bit."),
        );
    }
}

/// When `setcap` grants rights the agent does not have.
fn privilege_setcap(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let p = parse_args(args, &Spec::gnu("n", &[]));
    let grants = p
        .operands
        .iter()
        .any(|a| a.text.contains(['=', '+']) && !p.has_short('v'));
    if grants {
        w.deny(
            Family::Privilege,
            format!("`{shown}` grants a program capabilities reserved to root."),
        );
    }
}

/// When `usermod gpasswd adduser addgroup` grants rights the agent does not have.
fn privilege_usermod(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) {
    let admin = |t: &str| {
        t.split(',')
            .any(|g| matches!(g, "sudo" | "wheel" | "admin" | "root" | "docker" | "adm"))
    };
    // `usermod -aG sudo bob`, `gpasswd -a bob wheel`, `adduser bob sudo`,
    // `useradd -o -u 0 x`.
    let groups = match name {
        "usermod" | "useradd" => {
            let p = parse_args(
                args,
                &Spec::gnu("cdefgGlLpsuUZk", &["groups", "gid", "uid"]),
            );
            p.values(Some('G'), &["groups"])
                .chain(p.values(Some('g'), &["gid"]))
                .any(admin)
                || p.values(Some('u'), &["uid"]).any(|u| u == "0")
        }
        "gpasswd" => {
            let p = parse_args(args, &Spec::gnu("adAM", &[]));
            p.has_short('a') && p.operands.iter().any(|a| admin(&a.text))
        }
        _ => {
            let ops: Vec<&str> = args
                .iter()
                .map(|a| a.text.as_str())
                .filter(|t| !t.starts_with('-'))
                .collect();
            ops.len() >= 2 && ops[1..].iter().any(|g| admin(g))
        }
    };
    if groups {
        w.deny(
            Family::Privilege,
            format!("`{shown}` gives a user administrator rights."),
        );
    }
}

/// When `tee cp mv ln` grants rights the agent does not have.
fn privilege_tee(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) {
    let any_operand = args.iter().any(|a| {
        let t = a.text.strip_prefix("of=").unwrap_or(&a.text);
        grants_root(t)
    });
    let writes = match name {
        "cp" | "mv" | "ln" => {
            let p = parse_args(args, &Spec::gnu("St", &["suffix", "target-directory"]));
            p.operands.last().is_some_and(|a| grants_root(&a.text))
        }
        _ => any_operand,
    };
    if writes {
        w.deny(
            Family::Privilege,
            format!("`{shown}` rewrites a file that decides who is root."),
        );
    }
}

/// The files that decide who may be root: writing them is a privilege grant.
pub(crate) fn grants_root(path: &str) -> bool {
    let p = path.trim_end_matches('/');
    matches!(
        p,
        "/etc/sudoers" | "/etc/passwd" | "/etc/shadow" | "/etc/group" | "/etc/gshadow"
    ) || p.starts_with("/etc/sudoers.d/")
        || p == "/etc/sudoers.d"
}

/// Whether a chmod mode sets the setuid or setgid bit: octal `4755`, `2775`, `6755`,
/// `04755`, or a symbolic clause adding `s` for the user or group (`u+s`, `+s`, `g=rxs`).
pub(crate) fn sets_id_bits(mode: &str) -> bool {
    if !mode.is_empty() && mode.chars().all(|c| c.is_digit(8)) {
        return u32::from_str_radix(mode, 8).is_ok_and(|m| m & 0o6000 != 0);
    }
    mode.split(',').any(|clause| {
        let who: String = clause.chars().take_while(|c| "ugoa".contains(*c)).collect();
        let for_owner = who.is_empty() || who.contains(['u', 'g', 'a']);
        let ops = &clause[who.len()..];
        let mut adding = false;
        let mut found = false;
        for c in ops.chars() {
            match c {
                '+' | '=' => adding = true,
                '-' => adding = false,
                's' if adding => found = true,
                _ => {}
            }
        }
        for_owner && found
    })
}

#[cfg(test)]
mod tests {
    use super::sets_id_bits;

    #[test]
    fn setuid_and_setgid_modes() {
        for m in [
            "u+s",
            "+s",
            "g+s",
            "=s",
            "a+rwxs",
            "u=rwxs,go=rx",
            "4755",
            "2775",
            "6755",
            "04755",
        ] {
            assert!(sets_id_bits(m), "{m}");
        }
        for m in [
            "+x", "644", "u+w", "1777", "o+s", "g-s", "0755", "-s", "go-w",
        ] {
            assert!(!sets_id_bits(m), "{m}");
        }
    }
}
