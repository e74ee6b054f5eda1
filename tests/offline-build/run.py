#!/usr/bin/env python3
"""The build phase of nix/packages.nix's workspace build, run here as Nix runs it, without Nix.

nixpkgs' buildRustPackage vendors every crate Cargo.lock names, points cargo at that directory
alone (cargoSetupHook writes the source's .cargo/config.toml), runs `cargo build --offline` with the
expression's cargoBuildFlags in a sandbox that has no network, and copies the executables cargo left
into $out/bin (cargoInstallHook). This runs each of those steps:

1. reads the flags, each package's programs and the git hashes from nix/packages.nix
   (facts.nix, evaluated with nixpkgs' lib against a stand-in package set);
2. refuses what cannot build in the sandbox: a git dependency without an output hash, a
   `rust-version` newer than the rustc of the nixpkgs release the flake follows;
3. `cargo vendor --locked` into target/offline-build/vendor: from the local registry cache once it
   holds the crates, and again only when Cargo.lock changed;
4. copies the derivation's source (the files of its fileset: Cargo.toml, Cargo.lock, crates/,
   services/) to target/offline-build/source and writes the .cargo/config.toml cargoSetupHook writes;
5. builds in an empty network namespace of its own, with an empty CARGO_HOME:
   `cargo build -j N --target <host> --offline --frozen <the expression's flags>`;
6. installs as cargoInstallHook does, and checks that each package's programs are there, run, and
   say the workspace's version.

The debug profile by default (the same flags and the same network question as Nix's release
build, in a third of the time); --release builds what Nix builds. --self-test shows, on small
workspaces of its own, that each bad input fails with cargo's own message and a line saying what
to run. Needs cargo, nix-instantiate (scripts/setup) and unshare (root, or user namespaces).
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests/nixos/render"))
from nix_store import Store  # noqa: E402

# The nixpkgs release flake.nix follows and its rustc (pkgs/development/compilers/rust/1_99.nix,
# the `rust` of that release). On a Nix machine: nix eval github:NixOS/nixpkgs/nixos-26.11#rustc.version
NIXPKGS_RELEASE = "nixos-26.11"
NIXPKGS_RUSTC = (1, 99)

THIS = "tests/offline-build/run.py"


class Refused(Exception):
    """A step failed; the message is the line saying what is wrong and what to run."""


def say(message):
    print(f"offline-build: {message}", flush=True)


def facts():
    """What the offline build reads of nix/packages.nix (facts.nix)."""
    with tempfile.TemporaryDirectory(prefix="offline-build-eval.") as directory:
        return Store(directory).evaluate(Path(__file__).resolve().parent / "facts.nix")


def version_tuple(text):
    parts = text.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise Refused(f"rust-version {text!r} is not a version like 1.89 (Cargo.toml [workspace.package])")
    return tuple(int(p) for p in parts[:2]) + (0,) * (2 - len(parts[:2]))


def check_sources(workspace, output_hashes):
    """Refuses, before any build, what the sandbox cannot build: git dependencies without their
    output hash, and a rust-version the nixpkgs release's rustc does not reach."""
    lock = tomllib.loads((workspace / "Cargo.lock").read_text())
    unhashed = [
        f"{package['name']}-{package['version']}"
        for package in lock.get("package", [])
        if package.get("source", "").startswith("git+")
        and f"{package['name']}-{package['version']}" not in output_hashes
    ]
    if unhashed:
        raise Refused(
            f"Cargo.lock takes {', '.join(unhashed)} from git, and the sandbox cannot fetch it without "
            "its hash: add each to `cargoLock.outputHashes` in nix/packages.nix "
            '(`"NAME-VERSION" = lib.fakeHash;`, then the hash a Nix build reports), or take it from crates.io'
        )
    manifest = tomllib.loads((workspace / "Cargo.toml").read_text())
    declared = manifest.get("workspace", {}).get("package", {}).get("rust-version") or manifest.get(
        "package", {}
    ).get("rust-version")
    if declared and version_tuple(declared) > NIXPKGS_RUSTC:
        rustc = ".".join(map(str, NIXPKGS_RUSTC))
        raise Refused(
            f"Cargo.toml's rust-version {declared} is newer than rustc {rustc} of {NIXPKGS_RELEASE}, "
            f"which flake.nix follows: lower rust-version to {rustc} or less (and stop using what is newer), "
            "or move the flake to a nixpkgs with that rustc"
        )


def lock_digest(workspace):
    return hashlib.sha256((workspace / "Cargo.lock").read_bytes()).hexdigest()


def vendor(workspace, directory, again=False):
    """Every crate Cargo.lock names, in `directory`; the cargo configuration that uses only it.
    Vendors again when Cargo.lock changed (or `again`); else keeps what is there."""
    stamp = directory / ".lock-sha256"
    config = directory / ".cargo-config.toml"
    digest = lock_digest(workspace)
    if not again and stamp.is_file() and stamp.read_text() == digest and config.is_file():
        return config.read_text().replace("@vendor@", str(directory)), "kept (Cargo.lock unchanged)"
    shutil.rmtree(directory, ignore_errors=True)
    command = ["cargo", "vendor", "--locked", "--versioned-dirs", "--manifest-path", str(workspace / "Cargo.toml")]
    # The local registry cache first; the registry only for crates it has not got yet (the crates
    # of other platforms, which no local build downloads).
    for extra, where in ((["--offline"], "from the local registry cache"), ([], "from the registry")):
        done = subprocess.run([*command, *extra, str(directory)], capture_output=True, text=True, cwd=workspace)
        if done.returncode == 0:
            break
        if "--locked" in done.stderr:
            sys.stderr.write(done.stderr)
            raise Refused(
                "Cargo.lock is out of date with Cargo.toml (cargo's message above), and Nix builds from "
                "Cargo.lock alone: run `cargo update --workspace` and commit Cargo.lock"
            )
    else:
        sys.stderr.write(done.stderr)
        raise Refused(f"cargo vendor failed (cargo's message above): run `python3 {THIS}` again once the registry is reachable")
    # cargo vendor prints the configuration that replaces each source (crates.io, git) with it;
    # kept with the directory as a placeholder, as nixpkgs keeps it, so a copy of the directory is
    # configured to use itself.
    config.write_text(done.stdout.replace(str(directory), "@vendor@"))
    stamp.write_text(digest)
    return done.stdout, where


def copy_source(workspace, fileset, destination, cargo_config):
    """The derivation's source (the files of its fileset, all the sandbox's build sees of the
    checkout), with the .cargo/config.toml cargoSetupHook writes. Copies keep their modification
    times, so an unchanged file does not rebuild."""
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir(parents=True)
    for name in fileset:
        source = workspace / name
        if source.is_dir():
            shutil.copytree(source, destination / name, symlinks=True)
        elif source.exists():
            shutil.copy2(source, destination / name)
    (destination / ".cargo").mkdir()
    (destination / ".cargo/config.toml").write_text(cargo_config)


def host_triple():
    out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    return re.search(r"^host: (\S+)$", out, re.M).group(1)


def toolchain(program):
    """The real cargo or rustc behind rustup's proxies, which an empty CARGO_HOME would confuse."""
    done = subprocess.run(["rustup", "which", program], capture_output=True, text=True) if shutil.which("rustup") else None
    return done.stdout.strip() if done and done.returncode == 0 else shutil.which(program)


def without_network():
    """The command prefix that runs a program in a network namespace of its own (no interface but
    a loopback that is down): as root, a plain one; else inside a user namespace."""
    prefix = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--net"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise Refused(
            f"cannot make a network namespace ({probe.stderr.strip()}): run as root, or where unprivileged user namespaces are allowed"
        )
    return prefix


NETWORK_SIGNS = ("Network is unreachable", "failed to lookup address", "Temporary failure in name resolution", "os error 101")


def build(source, target_dir, flags, profile):
    """cargoBuildHook's command, in a network namespace of its own; the release directory."""
    triple = host_triple()
    release_dir = target_dir / triple / ("release" if profile == "release" else "debug")
    # cargoInstallHook installs every executable it finds there: only this build's.
    if release_dir.is_dir():
        for entry in release_dir.iterdir():
            if entry.is_file() and os.access(entry, os.X_OK):
                entry.unlink()
    cargo_home = target_dir.parent / "cargo-home"
    shutil.rmtree(cargo_home, ignore_errors=True)
    cargo_home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CARGO", "RUSTC", "RUSTFLAGS", "RUSTDOC"))}
    env.update(
        CARGO_HOME=str(cargo_home),
        CARGO_TARGET_DIR=str(target_dir),
        RUSTC=toolchain("rustc"),
        # As cargoBuildHook: stdenv strips, not cargo.
        **{f"CARGO_PROFILE_{'RELEASE' if profile == 'release' else 'DEV'}_STRIP": "false"},
        CARGO_INCREMENTAL="0",
    )
    command = [toolchain("cargo"), "build", "-j", str(os.cpu_count() or 1), "--target", triple, "--offline", "--frozen"]
    if profile == "release":
        command += ["--profile", "release"]
    command += flags
    say(f"cargo {' '.join(command[1:])}   (no network, CARGO_HOME empty)")
    done = subprocess.run([*without_network(), *command], cwd=source, env=env, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        if "directory source" in done.stderr or "vendored-sources" in done.stderr:
            raise Refused(
                f"a crate Cargo.lock names is missing from the vendored directory (cargo's message above): "
                f"run `python3 {THIS} --vendor-again`"
            )
        if any(sign in done.stderr for sign in NETWORK_SIGNS):
            raise Refused(
                "the build reached for the network (cargo's message above), which the Nix sandbox has not: "
                "a build script must read what it downloads from the source tree or a vendored crate; "
                f"then run `python3 {THIS}` again"
            )
        raise Refused(f"the build phase failed (cargo's message above): fix it and run `python3 {THIS}` again")
    return release_dir


def install(release_dir, out):
    """cargoInstallHook: every executable at the top of the release directory, into out/bin."""
    shutil.rmtree(out, ignore_errors=True)
    (out / "bin").mkdir(parents=True)
    library = re.compile(r".*\.(so(\.[0-9.]+)?|a|dylib)$")
    for entry in sorted(release_dir.iterdir()):
        if entry.is_file() and os.access(entry, os.X_OK) and not library.match(entry.name):
            shutil.copy2(entry, out / "bin" / entry.name)
    return sorted(p.name for p in (out / "bin").iterdir())


def check_programs(out, programs, version):
    """Each package's programs are installed, run and say the workspace's version; nothing else is."""
    wanted = sorted(p for names in programs.values() for p in names)
    installed = sorted(p.name for p in (out / "bin").iterdir())
    if installed != wanted:
        raise Refused(f"the install phase gave {installed}, not the packages' programs {wanted}: nix/packages.nix's flags and `programs` disagree")
    for package, names in sorted(programs.items()):
        for name in names:
            done = subprocess.run([str(out / "bin" / name), "--version"], capture_output=True, text=True, timeout=30)
            if done.returncode != 0 or version not in done.stdout:
                raise Refused(
                    f"{package}'s {name} --version answered {done.returncode} {done.stdout.strip()!r} {done.stderr.strip()!r}, "
                    f"not the workspace's version {version}"
                )
            say(f"{package}: {name} --version: {done.stdout.strip()}")


def check_release(nixpkgs_url):
    """flake.nix follows the release whose rustc NIXPKGS_RUSTC is."""
    if not nixpkgs_url.endswith(f"/{NIXPKGS_RELEASE}"):
        raise Refused(
            f"flake.nix follows {nixpkgs_url}, but {THIS} knows the rustc of {NIXPKGS_RELEASE}: set NIXPKGS_RELEASE "
            "and NIXPKGS_RUSTC there to the release the flake follows and its rustc"
        )


def offline_build(workspace, fileset, work, flags, programs, version, output_hashes, profile, vendor_again=False):
    started = time.monotonic()
    check_sources(workspace, output_hashes)
    say(f"sources: no git dependency without a hash; rust-version within rustc {'.'.join(map(str, NIXPKGS_RUSTC))} of {NIXPKGS_RELEASE}")
    cargo_config, where = vendor(workspace, work / "vendor", again=vendor_again)
    say(f"vendored {sum(1 for p in (work / 'vendor').iterdir() if p.is_dir())} crates into {work / 'vendor'}: {where}")
    copy_source(workspace, fileset, work / "source", cargo_config)
    release_dir = build(work / "source", work / "target", flags, profile)
    installed = install(release_dir, work / "out")
    say(f"installed {', '.join(installed)}")
    check_programs(work / "out", programs, version)
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="See the module's docstring and docs/nixos.md.")
    parser.add_argument("--release", action="store_true", help="build the release profile, as Nix does (slower)")
    parser.add_argument("--vendor-again", action="store_true", help="vendor every crate anew, even when Cargo.lock is unchanged")
    parser.add_argument("--self-test", action="store_true", help="check that bad inputs fail with cargo's message and a line saying what to run")
    args = parser.parse_args()
    try:
        if args.self_test:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            import self_test

            self_test.run(sys.modules[__name__])
            return
        known = facts()
        check_release(known["nixpkgs"])
        profile = "release" if args.release else "debug"
        took = offline_build(
            ROOT,
            known["source"],
            ROOT / "target/offline-build",
            known["cargoBuildFlags"],
            known["programs"],
            known["version"],
            known["outputHashes"],
            profile,
            vendor_again=args.vendor_again,
        )
        say(f"the {profile} build phase of every package ran offline in {took:.0f} s")
    except Refused as refused:
        sys.exit(f"offline-build: {refused}")


if __name__ == "__main__":
    main()
