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

/// A program the tests run that the workspace does not build: the servers `scripts/setup`
/// installs and the command-line tools some tests call. Every test finds its programs through
/// [`tool`], so this list is all of them: the flake's `cargo-tests` check must give each its
/// nixpkgs package (`tests/nix_check_inputs.rs` compares the two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    NatsServer,
    /// moto's S3 server (the test kit's default bucket).
    MotoServer,
    /// SeaweedFS, the second S3 server.
    Weed,
    Caddy,
    Nginx,
    /// Synapse, the matrix adapter's server.
    SynapseHomeserver,
    Chromium,
    Chromedriver,
    Curl,
    Openssl,
    Pgrep,
}

impl Tool {
    pub const ALL: [Tool; 11] = [
        Tool::NatsServer,
        Tool::MotoServer,
        Tool::Weed,
        Tool::Caddy,
        Tool::Nginx,
        Tool::SynapseHomeserver,
        Tool::Chromium,
        Tool::Chromedriver,
        Tool::Curl,
        Tool::Openssl,
        Tool::Pgrep,
    ];

    /// The executable's name.
    pub fn program(self) -> &'static str {
        match self {
            Tool::NatsServer => "nats-server",
            Tool::MotoServer => "moto_server",
            Tool::Weed => "weed",
            Tool::Caddy => "caddy",
            Tool::Nginx => "nginx",
            Tool::SynapseHomeserver => "synapse_homeserver",
            Tool::Chromium => "chromium",
            Tool::Chromedriver => "chromedriver",
            Tool::Curl => "curl",
            Tool::Openssl => "openssl",
            Tool::Pgrep => "pgrep",
        }
    }

    /// The nixpkgs package that provides it, as the flake's `cargo-tests` names it (moto runs
    /// from a Python environment holding it).
    pub fn nixpkgs_package(self) -> &'static str {
        match self {
            Tool::MotoServer => "python3-with-moto",
            Tool::Weed => "seaweedfs",
            Tool::SynapseHomeserver => "matrix-synapse",
            Tool::Pgrep => "procps",
            other => other.program(),
        }
    }

    /// Where Debian installs it when that is off a user's `PATH` (`/usr/sbin`), or under a name
    /// scripts/setup does not link into `.tools/bin`.
    fn debian_path(self) -> Option<&'static str> {
        match self {
            Tool::Nginx => Some("/usr/sbin/nginx"),
            Tool::Chromium => Some("/usr/bin/chromium"),
            Tool::Chromedriver => Some("/usr/bin/chromedriver"),
            _ => None,
        }
    }
}

/// A program the tests run: `.tools/bin/<program>` first, then `PATH`, then where Debian puts it.
///
/// # Errors
/// When none has it; the message says to run `scripts/setup`.
pub fn tool(tool: Tool) -> anyhow::Result<PathBuf> {
    // The list is what the flake's check inputs are compared with: a tool missing from it would
    // be missing from the Nix sandbox's tests.
    if !Tool::ALL.contains(&tool) {
        bail!("{tool:?} is missing from Tool::ALL (crates/testkit/src/tools.rs): add it there");
    }
    locate(tool.program(), tool.debian_path())
}

fn locate(program: &str, debian_path: Option<&str>) -> anyhow::Result<PathBuf> {
    let local = workspace_root().join(".tools/bin").join(program);
    if local.is_file() {
        return Ok(local);
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(program));
    if let Some(found) = on_path.chain(debian_path.map(PathBuf::from)).find(|candidate| candidate.is_file()) {
        return Ok(found);
    }
    bail!(
        "`{program}` is not installed: run scripts/setup (it installs the test servers into {} and Debian's packages)",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_says_to_run_setup() {
        let err = locate("no-such-server-hyperhive", Some("/no/such/path")).expect_err("missing");
        assert!(err.to_string().contains("`no-such-server-hyperhive` is not installed: run scripts/setup"), "{err}");
    }
}
