//! The guard's program table is written as TOML (`src/guard/programs.toml`) for people and
//! shipped as JSON for the binary: a CLI call parses it once per process, and JSON parses in a
//! fraction of the time TOML takes. A table that does not parse here fails the build.

use std::path::PathBuf;

fn main() {
    let src = "src/guard/programs.toml";
    println!("cargo:rerun-if-changed={src}");
    let text = std::fs::read_to_string(src).expect("read src/guard/programs.toml");
    let value: toml::Value = toml::from_str(&text)
        .unwrap_or_else(|e| panic!("src/guard/programs.toml does not parse: {e}"));
    let json = serde_json::to_string(&value).expect("the table as JSON");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("programs.json");
    std::fs::write(out, json).expect("write programs.json");
}
