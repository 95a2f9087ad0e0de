//! The sensitive-name rules: files no tool may read or write, whatever the profile.
//!
//! Matching is per path segment and fails closed on names that merely *look* sensitive, even
//! where Linux would see a different file:
//!
//! - case-insensitive (Unicode lowercase, plus `ſ`→`s` and `ı`→`i`, which FAT/NTFS and case
//!   folding treat as `S` and `I`): `.ENV`, `ID_RSA`, `.ſsh`;
//! - trailing dots and spaces are ignored (Windows and some filesystems drop them; on Linux
//!   `.env.` and `.env ` are other names, refused all the same); leading ones are not;
//! - invisible characters (zero-width spaces and joiners, direction marks, the soft hyphen,
//!   variation selectors, the byte-order mark) are dropped: `.e<U+200B>nv` is `.env`;
//! - fullwidth and dot look-alikes map to ASCII (NFKC's mapping): `.ｅnv`, `．env`, `ＩＤ_ＲＳＡ`;
//!   other scripts' homoglyphs (Cyrillic `е`) are left alone — they are other letters;
//! - a name is cut at its first `:` (`.env:x` is the stream `x` of `.env` on NTFS mounts).
//!
//! A name anywhere in the path counts: `sub/.ssh/known_hosts` is as sensitive as `.ssh/x`, and
//! below any `.git` directory every `config`, `config.*` (`config.worktree`, `config.lock`)
//! and `hooks` counts (`.git/modules/m/config`); `.git/HEAD`, `.github/`, `.gitconfig` and
//! `.gitignore` do not.
//!
//! Choices where the list could be read either way: `.env.*` covers templates too
//! (`.env.example`, `.env.sample`: refused, since they often hold real values); `.envrc` and
//! `prod.env` are neither `.env` nor `.env.*` and are allowed (`.envrc` to read only: it is a
//! host-exec path, see [`crate::host_exec`]); every name starting with an SSH key's base name is refused,
//! public keys included (`id_rsa.pub`); `secrets.{yml,yaml,json}` are exact names, so
//! `secrets.example.yaml` is allowed; `*.tfvars` covers `prod.auto.tfvars` and
//! `*.tfvars.json`; `.docker/config.json` needs the `.docker` parent (`docker/config.json`
//! is allowed), while `credentials.json` is refused in any directory.

use crate::decision::{Decision, Stage};
use crate::names::fold;
use crate::path::RelPath;
use std::ffi::OsStr;

/// Private-key base names; any name starting with one matches (`id_rsa.pub`, `id_ed25519_sk`).
const KEY_PREFIXES: &[&str] = &["id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"];
/// Directories whose whole content is secret.
const SECRET_DIRS: &[&str] = &[".ssh", ".aws", ".kube", ".gnupg"];
/// Exact secret file names.
const SECRET_FILES: &[&str] = &[
    ".git-credentials",
    ".npmrc",
    ".netrc",
    "_netrc",
    ".pypirc",
    "credentials.json",
    "secrets.yml",
    "secrets.yaml",
    "secrets.json",
];
/// Secret extensions (the name must have something before the dot or be only the extension).
const SECRET_EXTENSIONS: &[&str] = &[".pem", ".key", ".p12", ".pfx", ".tfvars", ".tfvars.json"];

/// The sensitive-name rules alone, on a workspace-relative path: `Some(deny)` with rule
/// `jail_airlock_state` or `jail_sensitive_file`, or `None`. Pure: it never looks at the disk.
pub fn sensitive_rule(rel: &RelPath) -> Option<Decision> {
    sensitive_components(rel.components(), &rel.to_string())
}

/// [`sensitive_rule`] over any sequence of names; `shown` is the path for the message.
pub(crate) fn sensitive_components<'a>(
    names: impl Iterator<Item = &'a OsStr>,
    shown: &str,
) -> Option<Decision> {
    let mut prev = String::new();
    let mut in_git = false;
    let mut found: Option<&'static str> = None;
    for name in names {
        let seg = fold(name);
        // Below `.git`, every `config` and `hooks` counts (`.git/modules/x/config` too).
        if in_git
            && found.is_none()
            && (seg == "config" || seg.starts_with("config.") || seg == "hooks")
        {
            found = Some("git configuration or hooks");
        }
        if seg == ".airlock" {
            return Some(Decision::deny(
                Stage::Jail,
                "jail_airlock_state",
                format!(
                    "`{shown}` is inside airlock's own state (.airlock), which no tool may touch."
                ),
            ));
        }
        if found.is_none() {
            found = classify(&prev, &seg);
        }
        in_git |= seg == ".git";
        prev = seg;
    }
    found.map(|what| {
        Decision::deny(
            Stage::Jail,
            "jail_sensitive_file",
            format!("`{shown}` is a sensitive file ({what}) that no tool may read or write."),
        )
    })
}

/// Words that name a credential when they make up part of a file name under a toolchain or
/// home directory (`api.token`, `.vault-token`, `access_tokens.db`, `npm-credentials`).
const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "tokens",
    "credential",
    "credentials",
    "password",
    "passwords",
    "secret",
    "secrets",
];

/// Exact names of host credential stores beyond the workspace's set: registry and forge logins
/// (`auth.json` of composer and others, gh's `hosts.yml`), database password files, and npm's
/// `_logs` directory (debug logs that echo request headers).
const HOST_CREDENTIAL_NAMES: &[&str] = &[
    "auth.json",
    "hosts.yml",
    "hosts.yaml",
    ".pgpass",
    ".my.cnf",
    ".boto",
    ".s3cfg",
    ".dockercfg",
    ".yarnrc.yml",
    ".terraformrc",
    "settings-security.xml",
    "_logs",
];

/// Host files outside the workspace (`$HOME`, toolchain directories) that hold credentials:
/// everything [`sensitive_rule`] refuses, plus host-only stores (`~/.cargo/credentials.toml`,
/// `~/.npm/_logs`, `~/.config/gh/hosts.yml`, `*.token`), and a toolchain's own configuration
/// file where registry tokens live (`config.toml`, `config` directly under `.cargo`).
///
/// A file name counts when one of its words (split at `.`, `-`, `_`) is a credential word
/// (`token`, `credentials`, `password`, `secret`, plural or not); a directory name counts only
/// when it is a credentials directory (`.ssh`, `_logs`, …), so a package directory such as
/// `secret-service-3.0` in a registry cache is not hidden wholesale. Names are folded as the
/// jail folds them. `last_is_dir` says whether the last name is a directory.
pub fn host_credential_components<'a>(
    names: impl Iterator<Item = &'a OsStr>,
    last_is_dir: bool,
    shown: &str,
) -> Option<Decision> {
    let names: Vec<&OsStr> = names.collect();
    if let Some(d) = sensitive_components(names.iter().copied(), shown) {
        return Some(d);
    }
    let n = names.len();
    let mut prev = String::new();
    for (i, name) in names.iter().enumerate() {
        let seg = fold(name);
        let is_file = i + 1 == n && !last_is_dir;
        let what = if HOST_CREDENTIAL_NAMES.contains(&seg.as_str()) {
            Some("a host credential store")
        } else if prev == ".cargo" && (seg == "config" || seg == "config.toml") && is_file {
            Some("a toolchain configuration that may hold registry tokens")
        } else if is_file
            && seg
                .split(['.', '-', '_'])
                .any(|w| CREDENTIAL_WORDS.contains(&w))
        {
            Some("a credentials file")
        } else {
            None
        };
        if let Some(what) = what {
            return Some(Decision::deny(
                Stage::Jail,
                "jail_sensitive_file",
                format!("`{shown}` is a host credential ({what}) that no sandbox may read."),
            ));
        }
        prev = seg;
    }
    None
}

fn classify(prev: &str, seg: &str) -> Option<&'static str> {
    if seg == ".env" || seg.starts_with(".env.") {
        return Some("environment secrets");
    }
    if SECRET_DIRS.contains(&seg) {
        return Some("a credentials directory");
    }
    if SECRET_FILES.contains(&seg) {
        return Some("a credentials file");
    }
    if KEY_PREFIXES.iter().any(|p| seg.starts_with(p)) {
        return Some("an SSH key");
    }
    if SECRET_EXTENSIONS.iter().any(|e| seg.ends_with(e)) {
        return Some("a key, certificate or secrets file");
    }
    if prev == ".docker" && seg == "config.json" {
        return Some("docker credentials");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(p: &str) -> Option<String> {
        sensitive_rule(&RelPath::new(p).unwrap()).map(|d| d.rule.into_owned())
    }

    #[test]
    fn matches_each_family_case_insensitively() {
        for p in [
            ".env",
            ".ENV",
            "app/.env.local",
            ".env.",
            ".git/config",
            ".GIT/Hooks/pre-commit",
            ".git/modules/vendor/config",
            ".git/worktrees/w/hooks/x",
            ".git-credentials",
            ".npmrc",
            "home/.netrc",
            ".pypirc",
            "ID_RSA",
            "keys/id_ed25519.pub",
            "id_ecdsa_sk",
            "id_dsa",
            "tls/server.PEM",
            "a.key",
            "c.p12",
            "c.pfx",
            ".aws/credentials",
            ".ssh",
            ".kube/config",
            ".docker/config.json",
            "credentials.json",
            "secrets.yaml",
            "secrets.yml",
            "secrets.json",
            "prod.tfvars",
        ] {
            assert_eq!(rule(p).as_deref(), Some("jail_sensitive_file"), "{p}");
        }
        assert_eq!(rule(".airlock/x").as_deref(), Some("jail_airlock_state"));
        assert_eq!(rule("a/.AIRLOCK").as_deref(), Some("jail_airlock_state"));
    }

    fn host(p: &str, is_dir: bool) -> bool {
        let path = std::path::Path::new(p);
        host_credential_components(path.iter(), is_dir, p).is_some()
    }

    #[test]
    fn host_credential_stores_beyond_the_jail_set() {
        for p in [
            ".cargo/credentials.toml",
            ".cargo/credentials",
            ".cargo/config.toml",
            ".cargo/config",
            ".npm/_logs/2026-01-01T00_00_00_000Z-debug-0.log",
            ".config/gh/hosts.yml",
            ".composer/auth.json",
            ".vault-token",
            "registry/index/api.token",
            ".config/gcloud/access_tokens.db",
            ".config/gcloud/application_default_credentials.json",
            ".pgpass",
            ".CARGO/Credentials.TOML",
            ".ssh/id_rsa",
            ".netrc",
        ] {
            assert!(host(p, false), "{p}");
        }
        assert!(host(".npm/_logs", true));
        for (p, is_dir) in [
            (".cargo/bin/cargo", false),
            (".cargo/registry/index/x/config.json", false),
            (".cargo/registry/src/secret-service-3.0.1", true),
            (".cargo/registry/cache/i/tokenizers-0.1.crate", false),
            (".rustup/settings.toml", false),
            (".npm/_cacache/index-v5", true),
            ("go/pkg/mod/cache", true),
            ("config.toml", false),
        ] {
            assert!(!host(p, is_dir), "{p}");
        }
    }

    #[test]
    fn leaves_ordinary_names_alone() {
        for p in [
            "src/env.rs",
            "environment",
            ".envrc_not",
            "config",
            ".git/HEAD",
            "git/config",
            "monkey",
            "keyboard.rs",
            "docker/config.json",
            "secrets.md",
            "plans/ssh.md",
        ] {
            assert_eq!(rule(p), None, "{p}");
        }
    }
}
