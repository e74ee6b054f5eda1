#!/usr/bin/env python3
"""Renders every machine (render_hosts.py) and checks its files with the real tools:

- its users and groups: systemd-sysusers makes them in a scratch root, where systemd-tmpfiles
  then applies its tmpfiles lines;
- every unit file: `systemd-analyze verify` (no warning allowed; every ExecStart program exists);
- every nginx, nats-server and Caddy configuration a unit runs: `nginx -t`, `nats-server -t`,
  `caddy validate`, each run as its unit would be: with the machine's users, the unit's
  RuntimeDirectory, StateDirectory, CacheDirectory and LogsDirectory made, and no network; the
  hive-gateway's nginx is also run, and attacked with encoded paths (gateway_probe.py);
- every hyperhive daemon's `systemd-analyze security` exposure: at most nixpkgs' harmonia unit's,
  rendered and measured the same way (anchor-harmonia.nix); hive-c0re at most that unit's with
  hive-c0re's documented relaxations; and as docs/nixos.md's hardening table gives it.

    python3 tests/nixos/render/check_hosts.py [--keep OUT]

prints each daemon's exposure beside its ceiling; fails with every problem found.
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from nix_store import ROOT, fail
from render_hosts import render

DAEMON = re.compile(r"(agents-control|swarm-controller|hive-c0re|swarm-authelia-bridge|hyperhive-nats|hive-agent)(-[a-z0-9-]+)?\.service")
ANCHOR = "anchor/harmonia"
CEILINGS = {
    "hive-c0re": "harmonia-with-hive-c0re-relaxations.service",
    "swarm-controller": "harmonia-with-swarm-controller-relaxations.service",
}
DIRECTORIES = {"RuntimeDirectory": "/run", "StateDirectory": "/var/lib", "CacheDirectory": "/var/cache", "LogsDirectory": "/var/log"}

GUIDE = ROOT / "docs" / "nixos.md"
problems = []
# How many configurations each tool checked, by program.
checked = {"nginx": 0, "nats-server": 0, "caddy": 0, "verify": 0, "tmpfiles": 0, "gateway probes": 0}


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


def settings(unit_file):
    """The unit's Key=value lines, by key, in order."""
    found = {}
    for line in unit_file.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("["):
            found.setdefault(key, []).append(value)
    return found


def exposure(unit_file):
    done = run(["systemd-analyze", "security", "--offline=yes", str(unit_file)])
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", done.stdout)
    if not match:
        fail(f"systemd-analyze security printed no exposure for {unit_file}: {done.stderr.strip()}")
    return float(match.group(1))


def scratch_users(machine, scratch):
    """The machine's users and groups, made by systemd-sysusers in a scratch root, where its
    tmpfiles lines are then applied (their owners must be its users); the users are written
    beside this machine's own for the configuration checks."""
    root = scratch / "root"
    (root / "etc").mkdir(parents=True)
    conf = machine / "etc" / "sysusers.d" / "00-nixos.conf"
    done = run(["systemd-sysusers", f"--root={root}", str(conf)])
    if done.returncode != 0:
        problems.append(f"{machine.name}: systemd-sysusers refused its users: {done.stderr.strip()}")
    tmpfiles = machine / "etc" / "tmpfiles.d" / "00-nixos.conf"
    if tmpfiles.exists():
        checked["tmpfiles"] += 1
        done = run(["systemd-tmpfiles", f"--root={root}", "--create", str(tmpfiles)])
        if done.returncode != 0 or done.stderr.strip():
            problems.append(f"{machine.name}: systemd-tmpfiles refused its lines: {done.stderr.strip()}")
    for name in ("passwd", "group"):
        made = root / "etc" / name
        (scratch / name).write_text(Path("/etc", name).read_text() + (made.read_text() if made.exists() else ""))


def in_unit_sandbox(unit, scratch, command):
    """`command` in a mount and network namespace of its own: the machine's users, the unit's
    directories as systemd makes them, nothing reachable on the network."""
    made = [
        f"{base}/{name}"
        for key, base in DIRECTORIES.items()
        for value in unit.get(key, [])
        for name in value.split()
    ]
    script = "; ".join(
        [
            "set -e",
            f"mount --bind {scratch}/passwd /etc/passwd",
            f"mount --bind {scratch}/group /etc/group",
            *(f"mount -t tmpfs tmpfs {base}" for base in DIRECTORIES.values()),
            *(f"mkdir -p {shlex.quote(path)}" for path in made),
            "ip link set lo up",
            shlex.join(command),
        ]
    )
    return run(["unshare", "--mount", "--propagation", "private", "--net", "sh", "-c", script])


def check_configurations(machine, unit_file, unit, scratch):
    starts = [v for v in unit.get("ExecStart", []) if v]
    if not starts:
        return
    argv = starts[0].lstrip("@-:+!").split()
    program = Path(argv[0]).name
    if program == "nginx":
        command = [argv[0], "-t", "-c", argv[argv.index("-c") + 1]]
    elif program == "nats-server":
        command = [argv[0], "-t", "-c", argv[argv.index("-c") + 1]]
    elif program == "caddy":
        command = [argv[0], "validate", "--config", argv[argv.index("--config") + 1], "--adapter", "caddyfile"]
    else:
        return
    done = in_unit_sandbox(unit, scratch, command)
    checked[program] += 1
    if done.returncode != 0:
        problems.append(f"{machine}: {unit_file.name}: `{program}` refuses its configuration:\n{done.stdout}{done.stderr}")
    elif program == "nginx" and "location = /api/forge/webhook" in Path(command[-1]).read_text():
        # The hive-gateway's: the real nginx, attacked with encoded paths (gateway_probe.py).
        probe = in_unit_sandbox(unit, scratch, [sys.executable, str(Path(__file__).with_name("gateway_probe.py")), argv[0], command[-1]])
        checked["gateway probes"] += 1
        if probe.returncode != 0:
            problems.append(f"{machine}: {unit_file.name}: the gateway forwards what it should not:\n{probe.stdout}{probe.stderr}")


def program_absent(unit):
    """A unit whose program is not on this machine: its package's bin/ is empty
    (../model/pkgs.nix), so verify would only say so."""
    starts = [v for v in unit.get("ExecStart", []) if v]
    program = Path(starts[0].lstrip("@-:+!").split()[0]) if starts else None
    return program is not None and program.parent.is_dir() and not any(program.parent.iterdir())


def check_machine(out, name, exposures, unchecked):
    machine = out / name
    units_dir = machine / "etc" / "systemd" / "system"
    unit_files = sorted(p for p in units_dir.iterdir() if p.is_file() and p.suffix in (".service", ".socket"))
    absent = [p for p in unit_files if program_absent(settings(p))]
    unchecked.extend(f"{name}/{p.name}" for p in absent)
    verified = [p for p in unit_files if p not in absent]
    with tempfile.TemporaryDirectory(prefix="check-host.") as scratch:
        scratch = Path(scratch)
        scratch_users(machine, scratch)
        done = run(["systemd-analyze", "verify", "--man=no", *map(str, verified)]) if verified else None
        checked["verify"] += len(verified)
        if done and (done.returncode != 0 or done.stdout.strip() or done.stderr.strip()):
            problems.append(f"{name}: systemd-analyze verify:\n{done.stdout}{done.stderr}")
        for unit_file in unit_files:
            check_configurations(name, unit_file, settings(unit_file), scratch)
            daemon = DAEMON.fullmatch(unit_file.name)
            if daemon:
                exposures.setdefault(daemon.group(1), []).append((exposure(unit_file), f"{name}/{unit_file.name}"))


def main():
    keep = sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "--keep" else None
    if len(sys.argv) > 1 and not keep:
        fail("usage: check_hosts.py [--keep OUT] (OUT: where to leave the rendered machines)")
    if os.geteuid() != 0:
        fail("run it as root: the configuration checks run in mount and network namespaces of their own")
    with tempfile.TemporaryDirectory(prefix="rendered-hosts.") as scratch:
        out = Path(keep or scratch)
        hosts = render(out)
        exposures, unchecked = {}, []
        for name in sorted(hosts):
            if name != ANCHOR:
                check_machine(out, name, exposures, unchecked)
        if unchecked:
            print(f"not verified, their programs are not on this machine: {', '.join(unchecked)}")
        anchor_dir = out / ANCHOR / "etc" / "systemd" / "system"
        anchor = exposure(anchor_dir / "harmonia.service")
        print(f"anchor: nixpkgs' harmonia unit {anchor}")
        for daemon, measured in sorted(exposures.items()):
            ceiling_unit = CEILINGS.get(daemon)
            ceiling = exposure(anchor_dir / ceiling_unit) if ceiling_unit else anchor
            worst, where = max(measured)
            print(f"{daemon}: {worst} (ceiling {ceiling}{', ' + ceiling_unit if ceiling_unit else ''}; {len(measured)} units)")
            if worst > ceiling:
                problems.append(f"{where}: exposure {worst} is above its ceiling {ceiling}")
            documented = re.search(rf"^\| `{daemon}[^`]*`[^|]*\| ([0-9.]+) \|", GUIDE.read_text(), re.M)
            if not documented or float(documented.group(1)) != worst:
                problems.append(f"docs/nixos.md's hardening table must give {daemon} as {worst}")
        if len(exposures) < 6:
            problems.append(f"only {sorted(exposures)} were measured: every hyperhive daemon must be rendered somewhere")
    if problems:
        fail("\n".join(problems))
    print(
        f"{len(hosts) - 1} machines: {checked['verify']} units pass systemd-analyze verify, "
        f"{checked['tmpfiles']} tmpfiles.d files systemd-tmpfiles; "
        f"configurations pass nginx -t ({checked['nginx']}), nats-server -t ({checked['nats-server']}), caddy validate ({checked['caddy']}); the gateway's nginx forwards no encoded path past SSO ({checked['gateway probes']} probes)"
    )


if __name__ == "__main__":
    os.umask(0o022)
    main()
