//! The happy path of `airlock mcp` through a real MCP client: the official Python SDK
//! (`tests/mcp/test_mcp_client.py`, run with pytest) drives the binary cargo built for this test.
//! A missing Python `mcp` package is a failure, not a skip: `scripts/ci-deps-mcp.sh` installs it.

use std::path::Path;
use std::process::Command;

#[test]
fn the_official_python_sdk_drives_airlock_mcp() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let probe = Command::new("python3")
        .args(["-c", "import mcp, pytest, anyio"])
        .output()
        .expect("python3 must be installed");
    assert!(
        probe.status.success(),
        "the Python MCP SDK and pytest are required (run scripts/ci-deps-mcp.sh): {}",
        String::from_utf8_lossy(&probe.stderr)
    );
    let status = Command::new("python3")
        .args(["-m", "pytest", "tests/mcp", "-q", "-p", "no:cacheprovider"])
        .current_dir(&root)
        .env("AIRLOCK_BIN", env!("CARGO_BIN_EXE_airlock"))
        .status()
        .expect("run pytest");
    assert!(status.success(), "pytest tests/mcp failed: {status}");
}
