//! Session-local writes that change how code runs. Writes under ignored paths (`.venv`,
//! `node_modules`, build outputs) are never applied, but later commands and verify see them:
//! an interpreter start-up hook written by a command could rewrite what the tests report and
//! leave no trace in what is applied. Such writes are a concern of the verdict unless an
//! installer's own record vouches for them (a `RECORD` line of a dist-info with the file's
//! SHA-256, as pip and uv write for every installed file).

use airlock_stage::store::Store;
use airlock_stage::{Change, ChangesetSnapshot, StagedEntry};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// One session-local write that changes how code runs, with why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct LocalHook {
    pub(crate) path: String,
    pub(crate) why: &'static str,
}

fn in_site_packages(comps: &[&str]) -> Option<usize> {
    comps
        .iter()
        .position(|c| *c == "site-packages" || *c == "dist-packages")
}

/// What kind of hook `path` would be, if its content is not vouched for.
fn hook_kind(e: &StagedEntry) -> Option<&'static str> {
    let path = e.path.display();
    let comps: Vec<&str> = path.split('/').collect();
    let name = *comps.last()?;
    if matches!(name, "sitecustomize.py" | "usercustomize.py") {
        return Some("a Python start-up hook (run by every interpreter that starts)");
    }
    if name.ends_with(".pth") && in_site_packages(&comps).is_some() {
        return Some("a `.pth` file (its `import` lines run at every interpreter start)");
    }
    if let Some(at) = comps.iter().position(|c| *c == "node_modules")
        && comps.get(at + 1) == Some(&".bin")
        && comps.len() == at + 3
    {
        // npm, pnpm and yarn link each launcher to its package: `../pkg/bin/x.js`.
        let into_a_package = |t: &[u8]| {
            t.strip_prefix(b"../")
                .is_some_and(|rest| !rest.is_empty() && !rest.windows(2).any(|w| w == b".."))
        };
        return match &e.change {
            Change::Symlink { target } if into_a_package(target) => None,
            _ => Some(
                "a launcher in `node_modules/.bin` that is not a link into an installed package",
            ),
        };
    }
    if in_site_packages(&comps).is_some()
        && !matches!(e.base, airlock_stage::Fingerprint::Absent)
        && name.ends_with(".py")
    {
        return Some("an installed package's file rewritten in place");
    }
    None
}

/// The `RECORD` hashes of every dist-info directory that the changeset writes, by the
/// workspace-relative path of each file they list.
fn record_hashes(store: &Store, snap: &ChangesetSnapshot) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for e in &snap.entries {
        let path = e.path.display();
        if !path.ends_with(".dist-info/RECORD") || !matches!(e.change, Change::Write { .. }) {
            continue;
        }
        let Ok(Some(bytes)) = airlock_stage::view::read_merged(store, &e.path) else {
            continue;
        };
        // RECORD paths are relative to the site-packages directory holding the dist-info.
        let site = path
            .rsplit_once('/')
            .and_then(|(dir, _)| dir.rsplit_once('/'))
            .map_or(String::new(), |(site, _)| format!("{site}/"));
        for line in String::from_utf8_lossy(&bytes).lines() {
            let mut parts = line.rsplitn(3, ',');
            let (_size, hash, file) = (parts.next(), parts.next(), parts.next());
            if let (Some(hash), Some(file)) = (hash, file)
                && let Some(h) = hash.strip_prefix("sha256=")
                && !file.contains("..")
            {
                out.insert(format!("{site}{file}"), h.to_string());
            }
        }
    }
    out
}

fn vouched(store: &Store, e: &StagedEntry, records: &HashMap<String, String>) -> bool {
    let Some(want) = records.get(&e.path.display()) else {
        return false;
    };
    let Ok(Some(bytes)) = airlock_stage::view::read_merged(store, &e.path) else {
        return false;
    };
    b64url(&Sha256::digest(&bytes)) == want.trim_end_matches('=')
}

/// Every session-local write of `snap` that changes how code runs and that no installer's
/// record vouches for.
pub(crate) fn find(store: &Store, snap: &ChangesetSnapshot) -> Vec<LocalHook> {
    let candidates: Vec<(&StagedEntry, &'static str)> = snap
        .entries
        .iter()
        .filter(|e| e.session_local && !matches!(e.change, Change::Delete | Change::Dir { .. }))
        .filter_map(|e| hook_kind(e).map(|k| (e, k)))
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    let records = record_hashes(store, snap);
    candidates
        .into_iter()
        .filter(|(e, _)| !vouched(store, e, &records))
        .map(|(e, why)| LocalHook {
            path: e.path.display(),
            why,
        })
        .collect()
}

/// Unpadded URL-safe base64, as `RECORD` files write hashes.
fn b64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 2);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for k in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * k)) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_hashes_are_unpadded_url_safe_base64() {
        // `hello` as pip writes it in RECORD.
        assert_eq!(
            b64url(&Sha256::digest(b"hello")),
            "LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ"
        );
        assert_eq!(b64url(b"\xff"), "_w");
    }
}
