//! The guard's program table is written as TOML (`src/guard/programs.toml`) for people and
//! shipped as an index for the binary: each entry as its own JSON text, and every program name
//! with the entries that name it, sorted. A call then parses only the entries of the programs
//! it meets, never the whole table. A table that does not parse here fails the build.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let src = "src/guard/programs.toml";
    println!("cargo:rerun-if-changed={src}");
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
    let dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(dir.join("programs_index.rs"), out).expect("write programs_index.rs");
}
