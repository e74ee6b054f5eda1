//! The flake's `cargo-tests` check runs the suite in the Nix build sandbox, where only the programs
//! its inputs list exist: they must be the nixpkgs package of every program the test kit knows
//! (`Tool::ALL`), no more and no less, so a server added to the kit cannot be forgotten there.
//! Read from nix/packages.nix with nix-instantiate (tests/offline-build/facts.nix), which the
//! sandbox has not: hence `needs_nix::`, one of the check's skips.

use std::collections::BTreeSet;
use std::process::Command;

use hyperhive_testkit::{Tool, workspace_root};

/// tests/offline-build/facts.nix evaluated in a Nix store of its own.
fn facts() -> serde_json::Value {
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().display();
    let out = Command::new("nix-instantiate")
        .args(["--store", &format!("local?store={dir}/store&state={dir}/state&log={dir}/log")])
        .args(["--eval", "--strict", "--json"])
        .arg(workspace_root().join("tests/offline-build/facts.nix"))
        .env("NIX_CONFIG", "substituters =\nsandbox = false\nbuild-users-group =\n")
        .output()
        .expect("nix-instantiate is installed (scripts/setup installs Debian's nix-bin)");
    assert!(out.status.success(), "nix-instantiate failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn strings(value: &serde_json::Value) -> BTreeSet<String> {
    value.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect()
}

mod needs_nix {
    use super::*;

    #[test]
    fn the_sandbox_has_every_program_the_test_kit_runs_and_no_other() {
        let facts = facts();
        let inputs = strings(&facts["cargoTests"]["inputs"]);
        let known: BTreeSet<String> = Tool::ALL.iter().map(|tool| tool.nixpkgs_package().to_owned()).collect();
        let missing: Vec<_> = known.difference(&inputs).collect();
        assert!(
            missing.is_empty(),
            "cargo-tests in nix/packages.nix lacks {missing:?}: add them to its nativeCheckInputs"
        );
        let unknown: Vec<_> = inputs.difference(&known).collect();
        assert!(unknown.is_empty(), "cargo-tests lists {unknown:?}, which no test runs: add it to Tool or drop it");
    }

    #[test]
    fn the_sandbox_skips_name_modules_that_hold_tests() {
        let facts = facts();
        let skips = strings(&facts["cargoTests"]["skips"]);
        assert!(skips.contains("needs_root::") && skips.contains("needs_nix::"), "{skips:?}");
        // A skip that names no test module would leave out nothing and say it does.
        for skip in &skips {
            let module = format!("mod {} {{", skip.trim_end_matches("::"));
            let holders = test_sources().into_iter().filter(|text| text.contains(&module)).count();
            assert!(holders > 0, "no test file has `{module}`: the skip {skip} leaves out nothing");
        }
    }
}

/// Every integration test source of the workspace.
fn test_sources() -> Vec<String> {
    let root = workspace_root();
    let mut texts = Vec::new();
    for group in ["crates", "services"] {
        for package in std::fs::read_dir(root.join(group)).unwrap().flatten() {
            let mut stack = vec![package.path().join("tests")];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else { continue };
                for entry in entries.flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_some_and(|e| e == "rs") {
                        texts.push(std::fs::read_to_string(&path).unwrap());
                    }
                }
            }
        }
    }
    texts
}
