//! `airlock demo`: the built-in end-to-end example. Placeholder until it lands.

/// Run the demo; returns the exit code.
pub fn run(json: bool) -> Result<i32, Box<dyn std::error::Error>> {
    let _ = json;
    Err("the demo is not implemented yet".into())
}
