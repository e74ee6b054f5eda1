"""Real systemd hosts for the VM tests, and nixpkgs' test-driver API over them.

Each node is a systemd-nspawn container booted from one shared Debian root (read-only, with the
packages layer scripts/setup adds, and an overlay of its own), in a network namespace of its own
with a veth on a bridge that lives in another namespace made for the run: the hosts reach each
other and nothing else. A node's units, users, tmpfiles lines and /etc files are the ones
tests/nixos/render/render_hosts.py renders for it, installed into its overlay before boot.

The Machine methods keep nixpkgs' names, defaults and exceptions (nixos/lib/test-driver in
NixOS/nixpkgs): commands run under `set -euo pipefail` in bash, `succeed` raises
"command `...` failed (exit code N)", the waits retry once a second for 900 s by default and raise
"action timed out after N seconds", `wait_for_unit` raises on a failed unit and on an inactive
one with no job queued.
"""

import base64
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

BOOT_TIMEOUT = 90
# Each host's systemd gets a cgroup of its own in every writable hierarchy it uses (on a machine
# with cgroup v1 controllers: name=systemd and the unified one; on a cgroup v2 machine: the one).
# Without it every host, started with --keep-unit in the driver's cgroup, would put its units in
# the same cgroups as the others (systemctl kill then fails on processes of other hosts).
CGROUP_ROOTS = [p for p in (Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified")) if (p / "cgroup.procs").exists()] or [Path("/sys/fs/cgroup")]
PATH_IN_HOST = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def log(message):
    print(message, flush=True)


def retry(fn, timeout=900):
    """nixpkgs' retry: FN(last_try) once a second until it returns true, TIMEOUT tries."""
    for _ in range(timeout):
        if fn(False):
            return
        time.sleep(1)
    if not fn(True):
        raise Exception(f"action timed out after {timeout} seconds")


def run(*args, check=True, **kwargs):
    done = subprocess.run(list(args), capture_output=True, text=True, **kwargs)
    if check and done.returncode != 0:
        raise Exception(f"`{shlex.join(args)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done


class Network:
    """A bridge in a namespace of its own, and one namespace per host with a veth on it."""

    def __init__(self, run_id, subnet="10.231.0"):
        self.run_id = run_id
        self.subnet = subnet
        self.bridge_ns = f"{run_id}-br"
        self.namespaces = []
        self.links = {}

    def up(self):
        self._add_ns(self.bridge_ns)
        self._in(self.bridge_ns, "ip", "link", "add", "br0", "type", "bridge")
        self._in(self.bridge_ns, "ip", "link", "set", "br0", "up")

    def _add_ns(self, name):
        run("ip", "netns", "add", name)
        self.namespaces.append(name)
        self._in(name, "ip", "link", "set", "lo", "up")

    def _in(self, ns, *args, check=True):
        return run("ip", "-n", ns, *args[1:], check=check) if args[0] == "ip" else None

    def add_host(self, index, name):
        ns = f"{self.run_id}-{index}"
        self._add_ns(ns)
        outside = f"h{index}"
        # Made in the bridge's namespace, the inner end moved to the host's.
        run("ip", "-n", self.bridge_ns, "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("ip", "-n", self.bridge_ns, "link", "set", outside, "master", "br0", "up")
        run("ip", "-n", ns, "addr", "add", f"{self.address(index)}/24", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        self.links[name] = outside
        return ns

    def address(self, index):
        return f"{self.subnet}.{index + 10}"

    def set_link(self, name, state):
        run("ip", "-n", self.bridge_ns, "link", "set", self.links[name], state)

    def down(self):
        for ns in reversed(self.namespaces):
            run("ip", "netns", "del", ns, check=False)
        self.namespaces = []


class Machine:
    def __init__(self, driver, name, index, rendered):
        self.driver = driver
        self.name = name
        self.index = index
        self.rendered = Path(rendered)
        self.work = driver.work / "hosts" / name
        self.ns = None
        self.process = None
        self.pid = None
        self.booted = False
        self.console = self.work / "console.log"

    def __repr__(self):
        return f"<Machine '{self.name}'>"

    def log(self, message):
        log(f"{self.name}: {message}")

    # The host's file system: the rendered /etc, users, packages on PATH, /etc/hosts.
    def prepare(self, hosts_lines, extra_files):
        upper = self.work / "upper"
        (self.work / "work").mkdir(parents=True, exist_ok=True)
        upper.mkdir(parents=True, exist_ok=True)
        root = self.driver.root
        etc = upper / "etc"
        shutil.copytree(self.rendered / "etc", etc, symlinks=True, dirs_exist_ok=True)
        for name in ("passwd", "group", "shadow", "gshadow"):
            if (root / "etc" / name).exists():
                shutil.copy2(root / "etc" / name, etc / name)
        sysusers = etc / "sysusers.d" / "00-nixos.conf"
        if sysusers.exists():
            run("systemd-sysusers", f"--root={upper}", str(sysusers.resolve()))
        info = json.loads((self.rendered / "host.json").read_text())
        self._own_etc_copies(etc, info["etc"])
        (etc / "hostname").write_text(f"{self.name}\n")
        (etc / "hosts").write_text("127.0.0.1 localhost\n" + hosts_lines)
        # NixOS puts each system package's programs on PATH; here /usr/local/bin holds links.
        local_bin = upper / "usr" / "local" / "bin"
        local_bin.mkdir(parents=True, exist_ok=True)
        for package in info["packages"]:
            bin_dir = Path(package) / "bin"
            if bin_dir.is_dir():
                for program in sorted(bin_dir.iterdir()):
                    link = local_bin / program.name
                    if not link.is_symlink():
                        link.symlink_to(program)
        for path, (text, mode) in extra_files.items():
            target = upper / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            target.chmod(mode)

    @staticmethod
    def _own_etc_copies(etc, files):
        """Gives each copied /etc file its `user` and `group` (names, or `+N` ids), as NixOS's
        activation does once the users exist."""
        def ids(database):
            return {line.split(":")[0]: int(line.split(":")[2]) for line in (etc / database).read_text().splitlines() if line}

        users, groups = ids("passwd"), ids("group")
        for target, file in files.items():
            if file["mode"] != "symlink" and (file["user"], file["group"]) != ("+0", "+0"):
                def resolve(name, known):
                    return int(name[1:]) if name.startswith("+") else known[name]
                os.chown(etc / target, resolve(file["user"], users), resolve(file["group"], groups))

    def start(self):
        if self.booted:
            return
        self.spawn()
        self.wait_booted()

    def spawn(self):
        """Starts the host's systemd-nspawn; wait_booted() waits for its systemd."""
        if self.booted or (self.process is not None and self.process.poll() is None):
            return
        root = self.driver.root
        lowers = [str(root)] + [str(layer) for layer in self.driver.layers]
        command = [
            "systemd-nspawn", "--register=no", "--keep-unit", "--quiet",
            "-D", str(root), "-M", self.name, "--boot", "--console=pipe",
            f"--network-namespace-path=/run/netns/{self.ns}",
            "--overlay=" + ":".join(lowers + [str(self.work / "upper"), "/"]),
        ]
        command += [f"--tmpfs={path}:mode=0755" for path in self.driver.tmpfs]
        command += [f"--bind-ro={path}" for path in self.driver.bind_ro]
        self.log("booting")
        cgroups = self.cgroups()
        for cgroup in cgroups:
            cgroup.mkdir(parents=True, exist_ok=True)

        def enter_cgroups():
            for cgroup in cgroups:
                (cgroup / "cgroup.procs").write_text("0\n")

        with open(self.console, "ab") as console:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=enter_cgroups)
        self.spawned_at = time.monotonic()

    def wait_booted(self):
        if self.booted:
            return
        deadline = self.spawned_at + BOOT_TIMEOUT
        state = "no systemd yet"
        while True:
            if self.process.poll() is not None:
                self._boot_failed(f"systemd-nspawn exited with {self.process.returncode}")
            if self.pid is None:
                self.pid = self._init_pid()
            if self.pid is not None:
                done = subprocess.run(self._nsenter(["systemctl", "is-system-running"]), capture_output=True, text=True)
                state = done.stdout.strip() or done.stderr.strip()
                if state in ("running", "degraded"):
                    break
            if time.monotonic() > deadline:
                self._boot_failed(f"not running within {BOOT_TIMEOUT} s (state: {state})")
            time.sleep(0.2)
        self.booted = True
        if state == "degraded":
            failed = self.execute("systemctl list-units --failed --plain --no-legend | cut -d' ' -f1")[1].split()
            journals = "\n".join(self.execute(f"journalctl -b --no-pager -u {shlex.quote(u)} | tail -n 40")[1] for u in failed)
            raise Exception(f"{self.name}: units failed to start: {', '.join(failed)}\n{journals}")
        self.log("running")

    def cgroups(self):
        return [root / "hyperhive-vm" / f"{self.driver.network.run_id}-{self.name}" for root in CGROUP_ROOTS]

    def remove_cgroups(self):
        # Once the host is gone its cgroups hold no process: removed deepest first.
        for cgroup in self.cgroups():
            if cgroup.exists():
                for directory in sorted((d for d in cgroup.rglob("*") if d.is_dir()), key=lambda d: len(d.parts), reverse=True):
                    directory.rmdir()
                cgroup.rmdir()
            with contextlib.suppress(OSError):
                cgroup.parent.rmdir()

    def _boot_failed(self, why):
        console = self.console.read_text(errors="replace")[-6000:]
        report = f"{self.name}: the host did not boot: {why}; its console:\n{console}"
        if self.pid is not None and self.process.poll() is None:
            # Its systemd answers: what it is still waiting for and what failed, with their journals.
            def ask(command):
                done = subprocess.run(self._nsenter(["bash", "-c", command]), capture_output=True, text=True, timeout=30)
                return done.stdout
            jobs = ask("systemctl list-jobs --no-pager")
            failed = ask("systemctl list-units --failed --plain --no-legend | cut -d' ' -f1").split()
            waiting = [line.split()[1] for line in jobs.splitlines()[1:] if len(line.split()) > 3 and line.split()[3] == "running"]
            report += f"\nits pending jobs:\n{jobs}"
            for unit in failed + waiting:
                report += f"\njournal of {unit}:\n" + ask(f"journalctl -b --no-pager -u {shlex.quote(unit)} | tail -n 30")
        raise Exception(report)

    def _init_pid(self):
        # The container's systemd: the descendant of systemd-nspawn that is PID 1 of its namespace.
        pending = [self.process.pid]
        while pending:
            pid = pending.pop()
            with contextlib.suppress(OSError):
                status = Path(f"/proc/{pid}/status").read_text()
                nspid = re.search(r"^NSpid:\s*(.*)$", status, re.M).group(1).split()
                if pid != self.process.pid and nspid[-1] == "1":
                    return pid
                for task in Path(f"/proc/{pid}/task").iterdir():
                    pending += [int(c) for c in (task / "children").read_text().split()]
        return None

    def _nsenter(self, args):
        return ["nsenter", "-t", str(self.pid), "-a", "env", "-i", f"PATH={PATH_IN_HOST}", "HOME=/root", "LANG=C.UTF-8", "TERM=dumb"] + args

    def execute(self, command, check_return=True, check_output=True, timeout=900):
        if not self.booted:
            self.start()
        command = f"set -euo pipefail; {command}"
        args = (["timeout", str(timeout)] if timeout is not None else []) + ["bash", "-c", command]
        if not check_output:
            subprocess.Popen(self._nsenter(args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return (-2, "")
        # As nixpkgs' driver: stdout is the output, stderr goes to the log; the host's stdin is empty.
        done = subprocess.run(self._nsenter(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if done.stderr:
            sys.stdout.write(done.stderr.decode(errors="replace"))
        if not check_return:
            return (-1, done.stdout.decode())
        return (done.returncode, done.stdout.decode(errors="replace"))

    def succeed(self, *commands, timeout=None):
        output = ""
        for command in commands:
            status, out = self.execute(command, timeout=timeout)
            if status != 0:
                self.log(f"output: {out}")
                raise Exception(f"{self.name}: command `{command}` failed (exit code {status})")
            output += out
        return output

    def fail(self, *commands, timeout=None):
        output = ""
        for command in commands:
            status, out = self.execute(command, timeout=timeout)
            if status == 0:
                raise Exception(f"{self.name}: command `{command}` unexpectedly succeeded")
            output += out
        return output

    def wait_until_succeeds(self, command, timeout=900):
        output = ""

        def check(_last_try):
            nonlocal output
            status, output = self.execute(command, timeout=timeout)
            return status == 0

        self._waiting(f"waiting for success: {command}", check, timeout)
        return output

    def wait_until_fails(self, command, timeout=900):
        output = ""

        def check(_last_try):
            nonlocal output
            status, output = self.execute(command, timeout=timeout)
            return status != 0

        self._waiting(f"waiting for failure: {command}", check, timeout)
        return output

    def _waiting(self, what, check, timeout):
        try:
            retry(check, timeout)
        except Exception as error:
            raise Exception(f"{self.name}: {what}: {error}") from None

    def systemctl(self, q, user=None):
        if user is not None:
            q = q.replace("'", "\\'")
            return self.execute(f"su -l {user} --shell /bin/sh -c $'XDG_RUNTIME_DIR=/run/user/`id -u` systemctl --user {q}'")
        return self.execute(f"systemctl {q}")

    def get_unit_info(self, unit, user=None):
        status, lines = self.systemctl(f'--no-pager show "{unit}"', user)
        if status != 0:
            raise Exception(f'retrieving systemctl info for unit "{unit}" failed with exit code {status}')
        return dict(m.groups() for m in (re.match(r"^([^=]+)=(.*)$", l) for l in lines.split("\n")) if m)

    def get_unit_property(self, unit, prop, user=None):
        status, lines = self.systemctl(f'--no-pager show "{unit}" --property="{prop}"', user)
        if status != 0:
            raise Exception(f'retrieving systemctl property "{prop}" for unit "{unit}" failed with exit code {status}')
        match = re.match(r"^([^=]+)=(.*)$", lines)
        assert match is not None and match[1] == prop, f'systemctl show --property "{prop}" "{unit}" produced invalid output: {lines}'
        return match[2]

    def journal(self, unit, lines=60):
        return self.execute(f"journalctl -b --no-pager -u {shlex.quote(unit)} | tail -n {lines}", timeout=30)[1]

    def wait_for_unit(self, unit, user=None, timeout=900):
        def check_active(_last_try):
            state = self.get_unit_property(unit, "ActiveState", user)
            if state == "failed":
                raise Exception(f'unit "{unit}" reached state "{state}"')
            if state == "inactive":
                _, jobs = self.systemctl("list-jobs --full 2>&1", user)
                if "No jobs" in jobs and self.get_unit_info(unit, user)["ActiveState"] == state:
                    raise Exception(f'unit "{unit}" is inactive and there are no pending jobs')
            return state == "active"

        try:
            retry(check_active, timeout)
        except Exception as error:
            raise Exception(f"{self.name}: waiting for unit {unit}: {error}; its journal:\n{self.journal(unit)}") from None

    def require_unit_state(self, unit, require_state="active"):
        state = self.get_unit_info(unit)["ActiveState"]
        if state != require_state:
            raise Exception(f"Expected unit '{unit}' to to be in state '{require_state}' but it is in state '{state}'")

    def wait_for_file(self, filename, timeout=900):
        self._waiting(f"waiting for file '{filename}'", lambda _: self.execute(f"test -e {filename}")[0] == 0, timeout)

    def wait_for_open_port(self, port, addr="localhost", timeout=900):
        # nixpkgs' driver asks `nc -z`; the Debian root has no netcat, bash's /dev/tcp connects the same.
        probe = f"exec 2>/dev/null 3<>/dev/tcp/{addr}/{port}"
        self._waiting(f"waiting for TCP port {port} on {addr}", lambda _: self.execute(probe, timeout=10)[0] == 0, timeout)

    def wait_for_closed_port(self, port, addr="localhost", timeout=900):
        probe = f"exec 2>/dev/null 3<>/dev/tcp/{addr}/{port}"
        self._waiting(f"waiting for TCP port {port} on {addr} to be closed", lambda _: self.execute(probe, timeout=10)[0] != 0, timeout)

    def sleep(self, secs):
        """nixpkgs' Machine.sleep: a window of that many seconds, for checking that something
        does not happen in it."""
        self.log(f"sleeping {secs} s")
        time.sleep(secs)

    def start_job(self, jobname, user=None):
        return self.systemctl(f"start {jobname}", user)

    def stop_job(self, jobname, user=None):
        return self.systemctl(f"stop {jobname}", user)

    def copy_from_host(self, source, target):
        # Through the shell, as nixpkgs' copy_from_host_via_shell: mode bits kept, owned by root.
        source = Path(source)
        data = base64.b64encode(source.read_bytes()).decode()
        mode = oct(source.stat().st_mode & 0o7777)[2:]
        self.succeed(f"mkdir -p $(dirname {shlex.quote(target)})")
        done = subprocess.run(self._nsenter(["bash", "-c", f"base64 -d > {shlex.quote(target)} && chmod {mode} {shlex.quote(target)}"]), input=data.encode(), capture_output=True)
        if done.returncode != 0:
            raise Exception(f"{self.name}: copying {source} to {target} failed: {done.stderr.decode()}")

    def block(self):
        """Cuts the host's link to the network (nixpkgs: `set_link virtio-net-pci.1 off`)."""
        self.driver.network.set_link(self.name, "down")

    def unblock(self):
        self.driver.network.set_link(self.name, "up")

    def _stopped(self):
        self.booted = False
        self.pid = None

    def shutdown(self):
        """Powers the host off and waits for it to be gone."""
        if not self.booted:
            return
        os.kill(self.pid, signal.SIGRTMIN + 4)  # systemd: start poweroff.target
        try:
            self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.crash()
            raise Exception(f"{self.name}: did not power off within 90 s")
        self._stopped()

    def crash(self):
        """Stops the host at once, as pulling its plug: its PID 1 killed, all its processes with it."""
        if self.process is None:
            self._stopped()
            return
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self._kill_leftovers()
        self._stopped()

    def _kill_leftovers(self):
        # A systemd-nspawn killed from outside leaves its container running: whatever is still in
        # the host's cgroups is killed, and waited for (at most 10 s) so they can be removed.
        deadline = time.monotonic() + 10
        while True:
            pids = set()
            for cgroup in self.cgroups():
                for procs in cgroup.rglob("cgroup.procs") if cgroup.exists() else []:
                    with contextlib.suppress(OSError):
                        pids.update(int(p) for p in procs.read_text().split())
            if not pids:
                return
            if time.monotonic() > deadline:
                raise Exception(f"{self.name}: processes {sorted(pids)} outlived the host")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)


class StopBefore(Exception):
    """Raised on entering the subtest a run was asked to stop before."""


class Driver:
    def __init__(self, work, root, layers, rendered_group, bind_ro, nodes, stop_before=None, tmpfs=()):
        self.stop_before = stop_before
        # Directories of the root replaced by an empty tmpfs (mode 0755) under the binds.
        self.tmpfs = list(tmpfs)
        self.work = Path(work)
        self.root = Path(root)
        self.layers = [Path(l) for l in layers]
        self.bind_ro = bind_ro
        self.network = Network(f"hh{os.getpid()}")
        self.machines = []
        for index, name in enumerate(nodes):
            self.machines.append(Machine(self, name, index, Path(rendered_group) / name))

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.cleanup()

    def setup(self, extra_files):
        self.network.up()
        hosts = "".join(f"{self.network.address(m.index)} {m.name}\n" for m in self.machines)
        for machine in self.machines:
            machine.ns = self.network.add_host(machine.index, machine.name)
            machine.prepare(hosts, extra_files.get(machine.name, {}))

    def start_all(self):
        # Booted side by side (as nixpkgs' start_all starts every VM at once), then waited for.
        for machine in self.machines:
            machine.spawn()
        for machine in self.machines:
            machine.wait_booted()

    def cleanup(self):
        problems = []
        for machine in self.machines:
            try:
                machine.crash()
                machine.remove_cgroups()
            except Exception as error:
                problems.append(f"{machine.name}: {error}")
        self.network.down()
        if problems:
            raise Exception("cleaning up failed: " + "; ".join(problems))

    @contextlib.contextmanager
    def subtest(self, name):
        if self.stop_before and name.startswith(self.stop_before):
            raise StopBefore(name)
        log(f"subtest: {name}")
        started = time.monotonic()
        try:
            yield
        except Exception as error:
            raise Exception(f'subtest "{name}" failed: {error}') from error
        log(f"subtest passed: {name} ({time.monotonic() - started:.1f} s)")
