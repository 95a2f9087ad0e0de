//! Shared helpers: a temporary workspace with its upper/work scratch directories.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use airlock_sandbox::{Backend, NamespaceBackend, Outcome, SandboxSettings, SandboxSpec};

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        let upper = dir.path().join("upper");
        let work = dir.path().join("work");
        for d in [&workspace, &upper, &work] {
            std::fs::create_dir(d).unwrap();
        }
        Fixture {
            dir,
            workspace,
            upper,
            work,
        }
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.workspace.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn spec(&self, script: &str) -> SandboxSpec {
        let mut spec = SandboxSpec::new(
            &self.workspace,
            &self.upper,
            &self.work,
            ["sh", "-c", script],
        );
        spec.home = Some(self.dir.path().join("home"));
        spec
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The settings a program's `main` would install: from this process's environment.
pub fn settings() -> SandboxSettings {
    SandboxSettings::from_vars(|n| std::env::var_os(n), std::env::vars_os())
}

pub fn run(spec: &SandboxSpec) -> Outcome {
    NamespaceBackend::with_settings(settings())
        .run(spec)
        .unwrap_or_else(|e| panic!("sandbox failed: {e}"))
}

pub fn stdout(o: &Outcome) -> String {
    o.stdout.text_lossy()
}
