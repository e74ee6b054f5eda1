"""What the VM-test rehearsals share: stand-in machines that run a test script's commands on this
host, and the test script itself, cut out of its `.nix` file and run subtest by subtest."""

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import textwrap
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TARGET = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug")
TOOLS = os.path.join(ROOT, ".tools", "bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(what, check, timeout=30):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise Exception(f"rehearsal: timed out waiting for {what}")
        time.sleep(0.2)


class Machine:
    """A VM of the test, standing in as this machine: commands run here, in `env`."""

    def __init__(self, name, env):
        self.name = name
        self.env = env

    def execute(self, command):
        done = subprocess.run(["bash", "-c", command], env=self.env, capture_output=True, text=True)
        return done.returncode, done.stdout

    def succeed(self, command):
        code, out = self.execute(command)
        if code != 0:
            raise Exception(f"{self.name}: `{command}` failed with {code}: {out}")
        return out

    def fail(self, command):
        code, out = self.execute(command)
        if code == 0:
            raise Exception(f"{self.name}: `{command}` succeeded")
        return out

    def wait_until_succeeds(self, command, timeout=900):
        wait(f"{self.name}: {command}", lambda: self.execute(command)[0] == 0, timeout)

    def wait_for_file(self, path, timeout=900):
        self.wait_until_succeeds(f"test -e {path}", timeout)


class Daemon:
    """A unit's process: started with its environment and working directory, its output appended
    to a log (its journal)."""

    def __init__(self, command, env, log, cwd=None):
        self.command, self.env, self.log, self.cwd = command, env, log, cwd
        self.process = None

    def start(self):
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                self.command, env=self.env, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT
            )

    def running(self):
        return self.process is not None and self.process.poll() is None

    def stop(self, sig=signal.SIGTERM):
        if self.running():
            self.process.send_signal(sig)
            self.process.wait(timeout=30)


def test_script(nix_file):
    """The testScript of a VM test's `.nix` file, as the Python the driver runs."""
    text = open(os.path.join(ROOT, "tests", "nixos", nix_file)).read()
    script = text[text.index("testScript = ''") + len("testScript = ''") : text.rindex("'';")]
    # `'''` is how a Nix indented string writes `''`.
    return textwrap.dedent(script).replace("'''", "''")


def run_subtests(script, scope, wanted):
    """Runs the script's definitions, then each top-level subtest whose title starts with one of
    `wanted`, in the script's order. Returns how many ran."""
    definitions, subtests = script.split("start_all()\n", 1)
    if "${" in definitions:
        raise Exception("rehearsal: the test's definitions use a Nix value this rehearsal does not replace")

    @contextlib.contextmanager
    def subtest(name):
        print(f"subtest: {name}", flush=True)
        yield

    scope = dict(scope, subtest=subtest)
    exec(definitions, scope)
    ran = 0
    for block in re.split(r"\n(?=with subtest\()", subtests):
        title = re.match(r'with subtest\(f?"([^"]*)"', block)
        if title and any(title.group(1).startswith(w) for w in wanted):
            exec(block, scope)
            ran += 1
    if ran == 0:
        raise Exception(f"rehearsal: no subtest starts with any of {wanted}")
    return ran


def kill_named(text):
    """SIGTERM to every process whose command line contains `text` (what a rehearsal started
    detached, found by its work directory)."""
    for line in subprocess.run(["pgrep", "-f", text], capture_output=True, text=True).stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line), signal.SIGTERM)


def remove_work(work):
    """Removes the rehearsal's work directory, unless REHEARSAL_KEEP asks to keep it to look at."""
    if os.environ.get("REHEARSAL_KEEP"):
        print(f"rehearsal: left {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
