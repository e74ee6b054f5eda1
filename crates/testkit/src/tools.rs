//! Finding the binaries tests run: the servers `scripts/setup` installs and the project's own.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The workspace's top folder (where `Cargo.toml`, `.tools/` and `target/` are).
pub fn workspace_root() -> PathBuf {
    // cargo and nextest set CARGO_MANIFEST_DIR for the test process too: the checkout the test
    // runs from. It wins over the path compiled in, which is stale when two checkouts share one
    // target directory (cargo reuses artifacts across them).
    let runtime = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let from_runtime = runtime.as_deref().and_then(|dir| dir.ancestors().find(|d| d.join("Cargo.lock").is_file()));
    if let Some(root) = from_runtime {
        return root.to_path_buf();
    }
    // This crate lives at <root>/crates/testkit.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// A server binary installed by `scripts/setup`: `.tools/bin/<name>` first, then `PATH`.
///
/// # Errors
/// When neither has it; the message says to run `scripts/setup`.
pub fn tool(name: &str) -> anyhow::Result<PathBuf> {
    let local = workspace_root().join(".tools/bin").join(name);
    if local.is_file() {
        return Ok(local);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    bail!(
        "`{name}` is not installed: run scripts/setup (it installs the test servers into {})",
        workspace_root().join(".tools").display()
    )
}

/// A binary of this workspace, as `cargo build` left it: `$CARGO_TARGET_DIR/debug/<name>` or
/// `target/debug/<name>`.
///
/// Tests of the package that owns a binary should use `env!("CARGO_BIN_EXE_<name>")` instead,
/// which cargo keeps fresh; this is for tests that run another package's binary.
///
/// # Errors
/// When it has not been built; the message says how to build it.
pub fn project_binary(name: &str) -> anyhow::Result<PathBuf> {
    profile_binary("debug", name, "cargo build --workspace --bins` or `cargo test --workspace")
}

/// A binary of this workspace as `cargo build --release` left it (`target/release/<name>`): what
/// benchmarks measure.
///
/// # Errors
/// When it has not been built; the message says how to build it.
pub fn project_release_binary(name: &str) -> anyhow::Result<PathBuf> {
    profile_binary("release", name, &format!("cargo build --release -p {name}"))
}

fn profile_binary(profile: &str, name: &str, build: &str) -> anyhow::Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| if dir.is_relative() { workspace_root().join(dir) } else { dir })
        .unwrap_or_else(|| workspace_root().join("target"));
    let path = target.join(profile).join(name);
    if path.is_file() {
        return Ok(path);
    }
    Err(std::io::Error::from(std::io::ErrorKind::NotFound))
        .with_context(|| format!("{} does not exist: build it first (`{build}`)", path.display()))
}
