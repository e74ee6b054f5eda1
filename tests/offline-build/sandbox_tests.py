#!/usr/bin/env python3
"""The workspace's tests as the flake's `cargo-tests` check runs them in the Nix build sandbox, as
near as this machine gets without Nix: every test binary run as an unprivileged user (`nobody`)
in a network namespace of its own with only loopback up, HOME a temporary directory, and the
check's own skips (`sandboxSkips` of nix/packages.nix, read from it). A test that fails here and
is not skipped would fail `nix flake check`: move it into a `needs_root` module (it needs root)
or make it independent of the machine.

Not part of scripts/test (it runs the whole suite a second time); run it as root after the tests
built their binaries, when a test starts to depend on the machine:

    python3 tests/offline-build/sandbox_tests.py [-j THREADS] [--targets T1,T2] [FILTER]
"""

import argparse
import json
import os
import pwd
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402

ROOT = run.ROOT


def test_binaries():
    """Each test binary cargo built for the workspace, with its package's directory."""
    out = subprocess.run(
        ["cargo", "test", "--workspace", "--locked", "--no-run", "--message-format=json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    binaries = []
    for line in out.splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("profile", {}).get("test") and message.get("executable"):
            binaries.append((message["executable"], str(Path(message["manifest_path"]).parent), message["target"]["name"]))
    return binaries


def hidden_interpreter():
    """The directory nobody cannot enter on the way to the test kit's Python (the venv's interpreter
    under root's home, say) and the entry below it that leads there, or None. In the build sandbox
    moto and Synapse come from the Nix store, which everyone may read."""
    python = Path(os.path.realpath(ROOT / ".tools" / "venv" / "bin" / "python3"))
    if not python.exists():
        return None
    for parent in reversed(python.parents):
        if parent != Path("/") and not os.stat(parent).st_mode & 0o001:
            return parent, parent / python.relative_to(parent).parts[0]
    return None


# Run as root in the test's own namespaces before it drops to nobody: loopback up, and, when the
# interpreter is hidden, a world-enterable tmpfs over the closed directory with only the way to
# the interpreter bound back into it (in this mount namespace alone).
PREPARE = """ip link set lo up
if [ -n "$closed" ]; then
  mkdir -p "$stash" && mount --bind "$inner" "$stash"
  mount -t tmpfs -o mode=0755 tmpfs "$closed"
  mkdir -p "$inner" && mount --bind "$stash" "$inner"
fi
exec "$@"
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-j", "--threads", type=int, default=os.cpu_count() or 1, help="test threads per binary")
    parser.add_argument("--targets", help="run only these test targets (comma-separated, e.g. e2e,roles)")
    parser.add_argument("filter", nargs="?", help="run only tests whose name holds this")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("sandbox_tests.py: run it as root (it runs the tests as nobody in a network namespace of its own)")
    skips = run.facts()["cargoTests"]["skips"]
    hidden = hidden_interpreter()
    user = pwd.getpwnam("nobody")
    failed = []
    with tempfile.TemporaryDirectory(prefix="sandbox-tests.") as home:
        os.chown(home, user.pw_uid, user.pw_gid)
        wanted = set(args.targets.split(",")) if args.targets else None
        for executable, package_dir, name in test_binaries():
            if wanted is not None and name not in wanted:
                continue
            command = [executable, f"--test-threads={args.threads}", *[f"--skip={skip}" for skip in skips]]
            if args.filter:
                command.append(args.filter)
            env = {
                "PATH": f"{ROOT}/.tools/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                "HOME": home,
                "TMPDIR": home,
                "CARGO_MANIFEST_DIR": package_dir,
                # The build sandbox's user owns its copy of the tree; nobody does not own this one.
                "HYPERHIVE_SCREENSHOT_DIR": f"{home}/ui-screenshots",
            }
            prepare_env = {
                "closed": str(hidden[0]) if hidden else "",
                "inner": str(hidden[1]) if hidden else "",
                "stash": f"{home}/.interpreter-{name}",
            }
            done = subprocess.run(
                [
                    "unshare", "--net", "--mount", "env", *[f"{k}={v}" for k, v in prepare_env.items()],
                    "sh", "-c", PREPARE, "sh",
                    "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *command,
                ],
                cwd=package_dir,
                env=env,
                capture_output=True,
                text=True,
            )
            summary = next((line for line in done.stdout.splitlines() if line.startswith("test result:")), "no result")
            print(f"{Path(package_dir).name} {name}: {summary}", flush=True)
            if done.returncode != 0:
                failed.append(name)
                sys.stdout.write(done.stdout[-6000:] + done.stderr[-3000:])
    if failed:
        sys.exit(f"sandbox_tests.py: {len(failed)} test binaries failed as the sandbox would run them: {', '.join(failed)}")
    print("every test not skipped passes as the build sandbox would run it")


if __name__ == "__main__":
    main()
