//! The sandbox environment: an allow-list of host variables plus what the caller names, never
//! loader variables (`LD_*`, `DYLD_*`) and never secret-looking names.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// Host variables passed through when set.
pub const ALLOWED: &[&str] = &["PATH", "HOME", "LANG", "TERM", "TZ", "USER", "LOGNAME"];

/// Name fragments that mark a variable as a secret (compared case-insensitively).
pub const SECRET_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "API_KEY",
    "APIKEY",
    "CREDENTIAL",
    "PRIVATE_KEY",
    "AUTH",
];

/// True for names the sandbox never passes, whoever asks: loader variables and secret-like names.
pub fn is_forbidden(name: &OsStr) -> bool {
    let upper = String::from_utf8_lossy(name.as_bytes()).to_ascii_uppercase();
    upper.starts_with("LD_")
        || upper.starts_with("DYLD_")
        || SECRET_MARKERS.iter().any(|m| upper.contains(m))
}

fn is_allowed_host(name: &OsStr) -> bool {
    let bytes = name.as_bytes();
    ALLOWED.iter().any(|a| a.as_bytes() == bytes) || bytes.starts_with(b"LC_")
}

/// Builds the sandbox environment from the host's and the caller's additions.
///
/// `home` overrides `HOME`. A forbidden name among `extra` is an error naming it; forbidden host
/// variables are dropped silently (they were never asked for).
pub fn scrubbed(
    host: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[(OsString, OsString)],
    home: Option<&OsStr>,
) -> Result<Vec<(OsString, OsString)>, String> {
    let mut env: Vec<(OsString, OsString)> = host
        .into_iter()
        .filter(|(k, _)| is_allowed_host(k) && !is_forbidden(k))
        .collect();
    let mut set = |k: &OsStr, v: &OsStr| {
        env.retain(|(name, _)| name != k);
        env.push((k.to_owned(), v.to_owned()));
    };
    if let Some(home) = home {
        set(OsStr::new("HOME"), home);
    }
    for (k, v) in extra {
        if is_forbidden(k) {
            return Err(format!(
                "the variable {} may not be passed into the sandbox",
                k.to_string_lossy()
            ));
        }
        if k.is_empty()
            || k.as_bytes().contains(&b'=')
            || k.as_bytes().contains(&0)
            || v.as_bytes().contains(&0)
        {
            return Err(format!("the variable {:?} is malformed", k));
        }
        set(k, v);
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push((
            "PATH".into(),
            "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into(),
        ));
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("LD_PRELOAD", "/evil.so"),
            ("LC_ALL", "C.UTF-8"),
            ("AWS_SECRET_ACCESS_KEY", "k"),
            ("SSH_AUTH_SOCK", "/tmp/agent"),
            ("RANDOM_THING", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    #[test]
    fn only_allow_listed_host_variables_pass() {
        let env = scrubbed(host(), &[], None).unwrap();
        let names: Vec<_> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["PATH", "HOME", "LC_ALL"]);
    }

    #[test]
    fn caller_additions_pass_but_not_secrets_or_loader_variables() {
        let extra = vec![("RUST_LOG".into(), "debug".into())];
        let env = scrubbed(host(), &extra, Some(OsStr::new("/tmp/h"))).unwrap();
        assert!(env.contains(&("RUST_LOG".into(), "debug".into())));
        assert!(env.contains(&("HOME".into(), "/tmp/h".into())));
        for bad in [
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "NPM_TOKEN",
            "db_password",
        ] {
            let extra = vec![(bad.into(), "x".into())];
            assert!(scrubbed(host(), &extra, None).is_err(), "{bad} passed");
        }
    }
}
