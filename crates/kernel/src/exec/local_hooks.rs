//! Session-local writes that change how code runs. Writes under ignored paths (`.venv`,
//! `node_modules`, build outputs) are never applied, but later commands and verify see them:
//! an interpreter start-up hook written by a command could rewrite what the tests report and
//! leave no trace in what is applied. Such writes are a concern of the verdict unless an
//! installer's own record vouches for them (a `RECORD` line of a dist-info with the file's
//! SHA-256, as pip and uv write for every installed file).

use airlock_policy::RelPath;
use airlock_stage::store::Store;
use airlock_stage::{Change, ChangesetSnapshot, StagedEntry};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;

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

/// What kind of hook `path` would be, if no installer's record vouches for it.
fn hook_kind(e: &StagedEntry) -> Option<&'static str> {
    let path = e.path.display();
    let comps: Vec<&str> = path.split('/').collect();
    // Interpreter start-up hooks are host-exec entries of the policy's list (its
    // `python_startup` entry): the same list, judged here for ignored paths.
    if airlock_policy::host_exec::classify(&e.path).is_some_and(|h| h.kind == "python_startup") {
        return Some(
            "a Python start-up hook (a `.pth` file or `sitecustomize`: run by every interpreter that starts)",
        );
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
    if let Some(at) = in_site_packages(&comps) {
        let metadata = comps[at..].iter().any(|c| c.ends_with(".dist-info"));
        if comps.contains(&"__pycache__") || metadata {
            return None;
        }
        return Some("a file in an installed package that no installer record vouches for");
    }
    if is_venv_bin(&comps) {
        return match &e.change {
            // `python -> /usr/bin/python3.11`, `python3 -> python`: the interpreter itself.
            Change::Symlink { target } if target.starts_with(b"/") || !target.contains(&b'/') => {
                None
            }
            _ => Some("a program in the virtualenv's `bin` that no installer record vouches for"),
        };
    }
    None
}

/// `<venv>/bin/<name>` of an in-tree virtualenv (`.venv`, `venv`, or any directory whose
/// `bin` sits beside a `pyvenv.cfg`, as far as the path shows: the usual names).
fn is_venv_bin(comps: &[&str]) -> bool {
    comps.len() >= 3
        && comps[comps.len() - 2] == "bin"
        && matches!(comps[comps.len() - 3], ".venv" | "venv" | "env" | ".env")
}

/// `a/b/../c` → `a/c`, lexically; `None` when it climbs above its start.
fn normalise(path: &str) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            c => out.push(c),
        }
    }
    Some(out.join("/"))
}

/// The site-packages directory (workspace-relative, with a trailing `/`) a path is in.
fn site_of(path: &str) -> Option<String> {
    let comps: Vec<&str> = path.split('/').collect();
    let at = in_site_packages(&comps)?;
    Some(format!("{}/", comps[..=at].join("/")))
}

/// Reads the `RECORD` of each dist-info in the site-packages directories the candidates are
/// in or beside (the staged ones and those on disk): workspace-relative path → SHA-256.
fn record_hashes(
    root: &Path,
    store: &Store,
    snap: &ChangesetSnapshot,
    sites: &std::collections::BTreeSet<String>,
) -> HashMap<String, String> {
    let mut records: Vec<RelPath> = Vec::new();
    for e in &snap.entries {
        let path = e.path.display();
        if path.ends_with(".dist-info/RECORD") && matches!(e.change, Change::Write { .. }) {
            records.push(e.path.clone());
        }
    }
    for site in sites {
        let Ok(dir) = std::fs::read_dir(root.join(site)) else {
            continue;
        };
        for d in dir.flatten() {
            let name = d.file_name().to_string_lossy().into_owned();
            if name.ends_with(".dist-info")
                && let Ok(rel) = RelPath::new(format!("{site}{name}/RECORD"))
                && !records.contains(&rel)
            {
                records.push(rel);
            }
        }
    }
    let mut out = HashMap::new();
    for rec in records {
        let Ok(Some(bytes)) = airlock_stage::view::read_merged(store, &rec) else {
            continue;
        };
        // RECORD paths are relative to the site-packages directory holding the dist-info.
        let Some(site) = site_of(&rec.display()) else {
            continue;
        };
        for line in String::from_utf8_lossy(&bytes).lines() {
            let mut parts = line.rsplitn(3, ',');
            let (_size, hash, file) = (parts.next(), parts.next(), parts.next());
            if let (Some(hash), Some(file)) = (hash, file)
                && let Some(h) = hash.strip_prefix("sha256=")
                && let Some(path) = normalise(&format!("{site}{file}"))
            {
                out.insert(path, h.trim_end_matches('=').to_string());
            }
        }
    }
    out
}

/// SHA-256 (RECORD's encoding) of staged contents already hashed by this process.
static HASHED: std::sync::Mutex<Option<HashMap<airlock_stage::ContentHash, String>>> =
    std::sync::Mutex::new(None);

fn vouched(store: &Store, e: &StagedEntry, records: &HashMap<String, String>) -> bool {
    let Some(want) = records.get(&e.path.display()) else {
        return false;
    };
    let Change::Write { content, .. } = &e.change else {
        return false;
    };
    let known = HASHED
        .lock()
        .ok()
        .and_then(|m| m.as_ref().and_then(|m| m.get(content).cloned()));
    let got = match known {
        Some(h) => h,
        None => {
            let Ok(Some(bytes)) = airlock_stage::view::read_merged(store, &e.path) else {
                return false;
            };
            let h = b64url(&Sha256::digest(&bytes));
            if let Ok(mut m) = HASHED.lock() {
                m.get_or_insert_with(HashMap::new)
                    .insert(*content, h.clone());
            }
            h
        }
    };
    got == *want
}

/// Every session-local write of `snap` that changes how code runs and that no installer's
/// record vouches for.
pub(crate) fn find(root: &Path, store: &Store, snap: &ChangesetSnapshot) -> Vec<LocalHook> {
    let candidates: Vec<(&StagedEntry, &'static str)> = snap
        .entries
        .iter()
        .filter(|e| e.session_local && !matches!(e.change, Change::Delete | Change::Dir { .. }))
        .filter_map(|e| hook_kind(e).map(|k| (e, k)))
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    // A virtualenv's `bin` scripts are recorded by the packages of its site-packages.
    let sites: std::collections::BTreeSet<String> = candidates
        .iter()
        .filter_map(|(e, _)| {
            site_of(&e.path.display()).or_else(|| venv_site(root, &e.path.display()))
        })
        .collect();
    let records = record_hashes(root, store, snap, &sites);
    candidates
        .into_iter()
        .filter(|(e, _)| !vouched(store, e, &records))
        .map(|(e, why)| LocalHook {
            path: e.path.display(),
            why,
        })
        .collect()
}

/// The site-packages directory of the virtualenv a `bin/` path belongs to, on disk.
fn venv_site(root: &Path, path: &str) -> Option<String> {
    let (venv, _) = path.rsplit_once("/bin/")?;
    let lib = root.join(venv).join("lib");
    let py = std::fs::read_dir(&lib)
        .ok()?
        .flatten()
        .map(|d| d.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("python"))?;
    Some(format!("{venv}/lib/{py}/site-packages/"))
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
    fn record_paths_normalise_lexically() {
        assert_eq!(
            normalise(".venv/lib/python3.11/site-packages/../../../bin/pytest").as_deref(),
            Some(".venv/bin/pytest")
        );
        assert_eq!(normalise("a/../../b"), None);
        assert_eq!(
            site_of(".venv/lib/python3.11/site-packages/x/y.py").as_deref(),
            Some(".venv/lib/python3.11/site-packages/")
        );
    }

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
