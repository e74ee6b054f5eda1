"""The offline build's bad inputs, each on a small workspace of its own in a temporary directory
(one binary crate depending on cfg-if, from the local registry cache): each fails with cargo's own
message, where cargo gives one, and the line saying what to run. The same workspace unbroken builds
and passes first, so each failure below is its input's."""

import contextlib
import io
import shutil
import tempfile
from pathlib import Path

MANIFEST = """[package]
name = "offline-probe"
version = "0.3.1"
edition = "2021"
rust-version = "{rust_version}"

[dependencies]
{dependencies}
"""

MAIN = """cfg_if::cfg_if! {
    if #[cfg(unix)] {
        fn family() -> &'static str { "unix" }
    } else {
        fn family() -> &'static str { "other" }
    }
}

fn main() {
    if std::env::args().any(|arg| arg == "--version") {
        println!("offline-probe {} ({})", env!("CARGO_PKG_VERSION"), family());
    }
}
"""

# What a build script that downloads does first.
DOWNLOADING_BUILD_SCRIPT = """fn main() {
    std::net::TcpStream::connect(("192.0.2.1", 80)).expect("fetching the model weights");
}
"""

FLAGS = ["--package", "offline-probe", "--bin", "offline-probe"]
PROGRAMS = {"offline-probe": ["offline-probe"]}
FILESET = ["Cargo.toml", "Cargo.lock", "src", "build.rs"]


def workspace(directory, dependencies='cfg-if = "1"', rust_version="1.70", build_script=None):
    directory.mkdir(parents=True)
    (directory / "Cargo.toml").write_text(MANIFEST.format(rust_version=rust_version, dependencies=dependencies))
    (directory / "src").mkdir()
    (directory / "src/main.rs").write_text(MAIN)
    if build_script:
        (directory / "build.rs").write_text(build_script)
    return directory


def lock(run, directory):
    """Cargo.lock for it, from the local registry cache if it has cfg-if."""
    import subprocess

    for extra in (["--offline"], []):
        if subprocess.run(["cargo", "generate-lockfile", *extra], cwd=directory, capture_output=True).returncode == 0:
            return
    raise run.Refused("cargo generate-lockfile failed for the self-test's workspace")


class Case:
    def __init__(self, run, name):
        self.run, self.name = run, name

    def refused(self, call, hint, cargo_says=None):
        """`call` must raise Refused whose line contains `hint`, after cargo said `cargo_says`."""
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                call()
        except self.run.Refused as refused:
            line = str(refused)
            if hint not in line:
                raise AssertionError(f"{self.name}: the line {line!r} lacks {hint!r}") from None
            if cargo_says and cargo_says not in said.getvalue():
                raise AssertionError(f"{self.name}: cargo's message lacks {cargo_says!r}:\n{said.getvalue()}") from None
            self.run.say(f"self-test: {self.name}: refused: {line}")
            return
        raise AssertionError(f"{self.name}: was not refused")


def run(run):
    with tempfile.TemporaryDirectory(prefix="offline-build-self-test.") as temporary:
        top = Path(temporary)

        good = workspace(top / "good")
        lock(run, good)
        run.offline_build(good, FILESET, top / "good-work", FLAGS, PROGRAMS, "0.3.1", {}, "debug")
        run.say("self-test: the unbroken workspace builds offline and its program says its version")

        Case(run, "a program the packages name that the flags do not build").refused(
            lambda: run.check_programs(top / "good-work/out", {**PROGRAMS, "other": ["other-program"]}, "0.3.1"),
            "nix/packages.nix's flags and `programs` disagree",
        )

        stale = workspace(top / "stale", dependencies="")
        lock(run, stale)
        (stale / "Cargo.toml").write_text(MANIFEST.format(rust_version="1.70", dependencies='cfg-if = "1"'))
        Case(run, "Cargo.lock out of date with Cargo.toml").refused(
            lambda: run.offline_build(stale, FILESET, top / "stale-work", FLAGS, PROGRAMS, "0.3.1", {}, "debug"),
            "run `cargo update --workspace` and commit Cargo.lock",
            cargo_says="--locked",
        )

        missing = top / "missing-work"
        shutil.copytree(top / "good-work/vendor", missing / "vendor")
        for crate in (missing / "vendor").glob("cfg-if-*"):
            shutil.rmtree(crate)
        Case(run, "a crate missing from the vendored directory").refused(
            lambda: run.offline_build(good, FILESET, missing, FLAGS, PROGRAMS, "0.3.1", {}, "debug"),
            "--vendor-again",
            cargo_says="cfg-if",
        )

        downloading = workspace(top / "downloading", build_script=DOWNLOADING_BUILD_SCRIPT)
        lock(run, downloading)
        Case(run, "a build script that reaches for the network").refused(
            lambda: run.offline_build(downloading, FILESET, top / "downloading-work", FLAGS, PROGRAMS, "0.3.1", {}, "debug"),
            "the build reached for the network",
            cargo_says="Network is unreachable",
        )

        git = workspace(top / "git")
        lock(run, git)
        with (git / "Cargo.lock").open("a") as lockfile:
            lockfile.write('\n[[package]]\nname = "forked"\nversion = "0.2.0"\nsource = "git+https://example.org/forked.git#0123abcd"\n')
        Case(run, "a git dependency without an output hash").refused(
            lambda: run.check_sources(git, {}),
            "add each to `cargoLock.outputHashes` in nix/packages.nix",
        )
        run.check_sources(git, {"forked-0.2.0": "sha256-AAAA"})

        too_new = workspace(top / "too-new", rust_version="1.200")
        lock(run, too_new)
        Case(run, "a rust-version newer than the nixpkgs release's rustc").refused(
            lambda: run.check_sources(too_new, {}),
            f"newer than rustc {'.'.join(map(str, run.NIXPKGS_RUSTC))} of {run.NIXPKGS_RELEASE}",
        )
        Case(run, "a flake that follows another nixpkgs than the rustc figure's").refused(
            lambda: run.check_release("github:NixOS/nixpkgs/nixos-unstable"),
            "set NIXPKGS_RELEASE and NIXPKGS_RUSTC",
        )
        run.check_release(f"github:NixOS/nixpkgs/{run.NIXPKGS_RELEASE}")
    run.say("self-test: every bad input is refused with the line saying what to run")
