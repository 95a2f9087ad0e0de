//! The guard's program table is written as TOML (`src/guard/programs.toml`) for people and
//! shipped as an index for the binary: each entry as its own JSON text, and every program name
//! with the entries that name it, sorted. A call then parses only the entries of the programs
//! it meets, never the whole table. A table that does not parse here fails the build.
//!
//! The names are also laid out in open-addressing slots by their hash ([`name_hash`], the
//! lookup's own function), so that a process finds a name without building a hash map of the
//! whole table first.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

#[path = "src/guard/programs/name_hash.rs"]
mod name_hash;

/// The host-exec list (`data/host_exec.toml`) is parsed at run time from the embedded text;
/// a list that does not parse, or an entry missing a field, fails the build here instead.
fn check_host_exec() {
    let src = "data/host_exec.toml";
    println!("cargo:rerun-if-changed={src}");
    let text = std::fs::read_to_string(src).expect("read data/host_exec.toml");
    let value: toml::Value =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{src} does not parse: {e}"));
    let entries = value
        .get("entry")
        .and_then(toml::Value::as_array)
        .unwrap_or_else(|| panic!("{src}: an `[[entry]]` array"));
    for e in entries {
        for field in ["kind", "tool", "what", "why", "docs"] {
            assert!(
                e.get(field).and_then(toml::Value::as_str).is_some(),
                "{src}: every entry needs `{field}`: {e:?}"
            );
        }
        assert!(
            e.get("patterns")
                .and_then(toml::Value::as_array)
                .is_some_and(|p| !p.is_empty()),
            "{src}: every entry needs `patterns`: {e:?}"
        );
    }
}

fn main() {
    check_host_exec();
    let src = "src/guard/programs.toml";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed=src/guard/programs/name_hash.rs");
    let text = std::fs::read_to_string(src).expect("read src/guard/programs.toml");
    let value: toml::Value = toml::from_str(&text)
        .unwrap_or_else(|e| panic!("src/guard/programs.toml does not parse: {e}"));
    let entries = value
        .get("program")
        .and_then(toml::Value::as_array)
        .expect("src/guard/programs.toml: a `[[program]]` array");
    let mut names: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut out = String::from("/// Each `[[program]]` entry as JSON, in table order.\n");
    out.push_str("pub(super) static ENTRY_JSON: &[&str] = &[\n");
    for (i, e) in entries.iter().enumerate() {
        let json = serde_json::to_string(e).expect("an entry as JSON");
        writeln!(out, "    {json:?},").unwrap();
        for n in e
            .get("names")
            .and_then(toml::Value::as_array)
            .expect("every entry has `names`")
        {
            let n = n.as_str().expect("names are strings");
            names.entry(n.to_string()).or_default().push(i);
        }
    }
    out.push_str("];\n/// Every name, sorted, with the entries that name it.\n");
    out.push_str("pub(super) static NAME_INDEX: &[(&str, &[usize])] = &[\n");
    for (n, of) in &names {
        writeln!(out, "    ({n:?}, &{of:?}),").unwrap();
    }
    out.push_str("];\n");
    // Twice as many slots as names, a power of two: a probe ends at an empty slot soon.
    let slots = (names.len() * 2).next_power_of_two();
    assert!(
        names.len() < usize::from(u16::MAX),
        "too many program names for u16 slots"
    );
    let mut table = vec![u16::MAX; slots];
    for (k, n) in names.keys().enumerate() {
        let mut i = usize::try_from(name_hash::name_hash(n) % slots as u64).expect("a slot");
        while table[i] != u16::MAX {
            i = (i + 1) % slots;
        }
        table[i] = u16::try_from(k).expect("fewer names than u16::MAX");
    }
    out.push_str("/// [`NAME_INDEX`] positions by name hash (open addressing, linear probing); `u16::MAX` is\n");
    out.push_str("/// an empty slot.\n");
    writeln!(
        out,
        "pub(super) static NAME_SLOTS: [u16; {slots}] = {table:?};"
    )
    .unwrap();
    let dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(dir.join("programs_index.rs"), out).expect("write programs_index.rs");
}
