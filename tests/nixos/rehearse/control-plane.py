#!/usr/bin/env python3
"""Rehearses control-plane.nix's device subtests without VMs, on machines with no Nix store or KVM.

Runs the test script itself, cut out of control-plane.nix, against stand-in machines on this
one: three `agents-control serve` copies on loopback sharing a file:// store, Caddy in front of
them running deploy/Caddyfile itself (TLS with a certificate made here, whose pin every code
carries), and the client's commands run here, `systemd-run` and `journalctl` replaced by small
stand-ins. MinIO stopping and starting is the store's directory moved away and back. What it
cannot stand in for is skipped: the VMs coming up.

    python3 tests/nixos/rehearse/control-plane.py            # every subtest it can run
    python3 tests/nixos/rehearse/control-plane.py "the client forgets"   # subtests by name prefix

Needs target/debug/agents-control (cargo build -p agents-control) and .tools/bin/caddy.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile

from standin import ROOT, TARGET, TOOLS, Daemon, Machine, free_port, kill_named, remove_work, run_subtests, test_script, wait

BIN = os.path.join(TARGET, "agents-control")
CADDY = os.path.join(TOOLS, "caddy")
# The subtests that need only copies, a proxy and devices, in the order the test runs them.
RUNNABLE = [
    "a host and a client pair",
    "both connect",
    "they exchange",
    "the copy the host is on is killed",  # and the loop stopping each copy in turn after it
    "MinIO stops",
    "the host's copy dies while MinIO is down",
    "MinIO is back",
    "the client forgets",
]

STAND_INS = {
    # Detached, as a transient unit would be; the unit name is dropped.
    "systemd-run": '#!/usr/bin/env bash\nargs=()\nfor a in "$@"; do case "$a" in --unit=*) ;; *) args+=("$a") ;; esac; done\n'
    'setsid "${args[@]}" </dev/null >/dev/null 2>&1 &\n',
    # The journal of the machine's agents-control unit: its copy's log, every start appended.
    "journalctl": '#!/usr/bin/env bash\ncat "$REHEARSAL_JOURNAL"\n',
}


def ready(port):
    return subprocess.run(["curl", "-sf", f"http://127.0.0.1:{port}/readyz"], capture_output=True).returncode == 0


class Copy(Machine):
    """A copy's machine: `systemctl ... agents-control.service` acts on its process, and port 8791
    in commands is its port."""

    def __init__(self, name, env, work):
        self.port = free_port()
        log = os.path.join(work, f"{name}.log")
        super().__init__(name, dict(env, REHEARSAL_JOURNAL=log))
        address = f"127.0.0.1:{self.port}"
        served = dict(self.env, AGENTS_CONTROL_LISTEN=address, AGENTS_CONTROL_PEER_URL=f"http://{address}")
        self.daemon = Daemon([BIN, "serve"], served, log)

    def start(self):
        self.daemon.start()
        wait(f"{self.name} to be ready", lambda: ready(self.port))

    def stop(self, sig=signal.SIGTERM):
        self.daemon.stop(sig)

    def execute(self, command):
        unit = re.fullmatch(r"systemctl (kill --signal=SIGKILL|stop|start) agents-control\.service", command)
        if unit:
            action = unit.group(1)
            if action == "start":
                self.start()
            else:
                self.stop(signal.SIGKILL if action.startswith("kill") else signal.SIGTERM)
            return 0, ""
        return super().execute(command.replace("127.0.0.1:8791", f"127.0.0.1:{self.port}"))


class Bucket(Machine):
    """MinIO's machine: `systemctl stop|start minio.service` moves the file store's directory away
    and back, which the copies meet as the bucket going away."""

    def __init__(self, env, store):
        super().__init__("minio", env)
        self.store = store

    def execute(self, command):
        unit = re.fullmatch(r"systemctl (stop|start) minio\.service", command)
        if not unit:
            return super().execute(command)
        away, back = (self.store, self.store + ".away")[:: 1 if unit.group(1) == "stop" else -1]
        os.rename(away, back)
        return 0, ""


def main(wanted):
    work = tempfile.mkdtemp(prefix="rehearsal.")
    copies = []
    caddy = None
    try:
        stand_ins = os.path.join(work, "bin")
        os.makedirs(stand_ins)
        for name, body in STAND_INS.items():
            path = os.path.join(stand_ins, name)
            with open(path, "w") as f:
                f.write(body)
            os.chmod(path, 0o755)
        os.symlink(BIN, os.path.join(stand_ins, "agents-control"))
        with open(os.path.join(work, "control-key"), "wb") as f:
            f.write(os.urandom(32))
        os.chmod(os.path.join(work, "control-key"), 0o600)
        os.makedirs(os.path.join(work, "store"))
        os.makedirs(os.path.join(work, "devices"))
        proxy_port = free_port()
        cert, key = os.path.join(work, "proxy.crt"), os.path.join(work, "proxy.key")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", key, "-out", cert],
            check=True, capture_output=True,
        )
        pin = subprocess.run([BIN, "pin", "--cert", cert], check=True, capture_output=True, text=True).stdout.strip()
        env = dict(
            os.environ,
            PATH=f"{stand_ins}:{os.environ['PATH']}",
            AGENTS_STORE=f"file://{work}/store",
            AGENTS_CONTROL_KEY_FILE=f"{work}/control-key",
            AGENTS_CONTROL_URL=f"https://127.0.0.1:{proxy_port}",
            AGENTS_CONTROL_PIN=pin,
        )
        copies = [Copy(name, env, work) for name in ("cp1", "cp2", "cp3")]
        for copy in copies:
            copy.start()
        upstreams = " ".join(f"127.0.0.1:{copy.port}" for copy in copies)
        # deploy/Caddyfile itself, as the VM test runs it: only its address changes; the
        # certificate and the upstreams come from its environment placeholders.
        caddyfile = open(os.path.join(ROOT, "deploy", "Caddyfile")).read()
        if "https://127.0.0.1:8443 {" not in caddyfile:
            raise Exception("rehearsal: deploy/Caddyfile no longer serves https://127.0.0.1:8443")
        with open(os.path.join(work, "Caddyfile"), "w") as f:
            f.write(caddyfile.replace("https://127.0.0.1:8443 {", f"https://127.0.0.1:{proxy_port} {{"))
        with open(os.path.join(work, "caddy.log"), "w") as log:
            caddy = subprocess.Popen(
                [CADDY, "run", "--config", f"{work}/Caddyfile", "--adapter", "caddyfile"],
                env=dict(env, HOME=work, PROXY_CERT=cert, PROXY_KEY=key, UPSTREAMS=upstreams),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        proxied = ["curl", "-sf", "--cacert", cert, f"https://127.0.0.1:{proxy_port}/readyz"]
        wait("Caddy", lambda: subprocess.run(proxied, capture_output=True).returncode == 0)

        script = test_script("control-plane.nix")
        script = script.replace("${lib.getExe agents-control}", BIN).replace("${pkgs.runtimeShell}", "/bin/bash")
        script = script.replace('devices = "/root/devices"', f'devices = "{work}/devices"')
        script = script.replace("--cacert ${./fixtures/proxy.crt} https://proxy/", f"--cacert {cert} https://127.0.0.1:{proxy_port}/")
        client = Machine("client", env)
        minio = Bucket(env, os.path.join(work, "store"))
        scope = dict(cp1=copies[0], cp2=copies[1], cp3=copies[2], client=client, minio=minio)
        ran = run_subtests(script, scope, wanted)
        print(f"rehearsal: {ran} subtests passed")
    finally:
        # The devices started through the systemd-run stand-in run agents-control from this
        # rehearsal's directory: their command lines name it.
        kill_named(f"{work}/")
        for copy in copies:
            copy.stop(signal.SIGKILL)
        if caddy:
            caddy.terminate()
            caddy.wait()
        remove_work(work)


if __name__ == "__main__":
    main(sys.argv[1:] or RUNNABLE)
