#!/usr/bin/env python3
"""Runs a VM test's script, unchanged, on real systemd hosts (systemd-nspawn), as root.

    python3 tests/nixos/hosts/run.py control-plane
    python3 tests/nixos/hosts/run.py swarm
    python3 tests/nixos/hosts/run.py provisioning
    python3 tests/nixos/hosts/run.py control-plane --stop-before "the copy the host is on"

`--stop-before PREFIX` runs the script up to the first subtest whose title starts with PREFIX and
stops there, saying so (scripts/test runs the subtests that pass on these hosts this way:
tests/nixos/README.md says which and why).

The machines are the test's nodes as tests/nixos/render/render_hosts.py renders them, booted by
driver.py from scripts/setup's Debian root (.tools/debian-root, HYPERHIVE_DEBIAN_ROOT) and its
packages layer (.tools/debian-hosts-layer, HYPERHIVE_HOSTS_LAYER), with the project's build
(HYPERHIVE_BUILD_DIR, default target/debug) and scripts/setup's servers (HYPERHIVE_TOOLS_DIR,
default .tools/bin) mounted read-only. HYPERHIVE_VM_KEEP=1 keeps the work directory.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver import Driver, StopBefore, log  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
BUILD_DIR = Path(os.environ.get("HYPERHIVE_BUILD_DIR", ROOT / "target" / "debug")).resolve()
TOOLS_DIR = Path(os.environ.get("HYPERHIVE_TOOLS_DIR", ROOT / ".tools" / "bin"))
DEBIAN_ROOT = Path(os.environ.get("HYPERHIVE_DEBIAN_ROOT", ROOT / ".tools" / "debian-root"))
HOSTS_LAYER = Path(os.environ.get("HYPERHIVE_HOSTS_LAYER", ROOT / ".tools" / "debian-hosts-layer"))


def fail(message):
    sys.stderr.write(f"tests/nixos/hosts: {message}\n")
    sys.exit(1)


def preflight():
    if os.geteuid() != 0:
        fail("the VM tests boot systemd-nspawn hosts in network namespaces of their own: run them as root")
    for program in ("systemd-nspawn", "nsenter", "ip", "systemd-sysusers"):
        if shutil.which(program) is None:
            fail(f"{program} is missing (Debian: apt-get install systemd-container iproute2 util-linux)")
    if not (DEBIAN_ROOT / "sbin" / "init").exists():
        fail(f"no Debian root at {DEBIAN_ROOT}: run scripts/setup as root")
    if not (HOSTS_LAYER / "usr" / "bin" / "curl").exists():
        fail(f"no hosts layer (curl, jq) at {HOSTS_LAYER}: run scripts/setup as root")


def test_script(nix_file):
    """The testScript of a VM test's `.nix` file, as the Python nixpkgs' driver runs."""
    text = (ROOT / "tests" / "nixos" / nix_file).read_text()
    script = text[text.index("testScript = ''") + len("testScript = ''") : text.rindex("'';")]
    # `'''` is how a Nix indented string writes `''`.
    return textwrap.dedent(script).replace("'''", "''")


def let_strings(nix_file, *names):
    """The string constants NAMES of a VM test's `let` (`name = "value";`), which its script
    interpolates as `${name}`: the substitutions that make the script what Nix would run."""
    nix = (ROOT / "tests" / "nixos" / nix_file).read_text()
    values = {}
    for name in names:
        found = re.search(rf'^\s*{re.escape(name)} = "([^"$]+)";', nix, re.M)
        if found is None:
            fail(f"{nix_file} no longer sets {name} to a string")
        values[f"${{{name}}}"] = found.group(1)
    return values


def store_path(store, suffix):
    found = sorted(p for p in store.iterdir() if p.name.endswith(suffix) and not p.name.endswith(".drv"))
    if len(found) != 1:
        fail(f"expected one store path ending in {suffix}, found {[p.name for p in found]}")
    return found[0]


def weed():
    path = TOOLS_DIR / "weed"
    if not os.access(path, os.X_OK):
        fail(f"{path} is missing: run scripts/setup")
    return path.resolve()


def minio_files(rendered):
    """SeaweedFS's S3 server in place of MinIO (no MinIO server in the registries): minio.service
    runs `weed server` on MinIO's port with MinIO's state directory, accepting only MinIO's root
    user and password (from the node's minio.env); minio-bucket.service makes the bucket with a
    signed S3 CreateBucket (curl --aws-sigv4) instead of `mc mb`."""
    env = dict(l.split("=", 1) for l in (rendered / "minio" / "etc" / "minio.env").read_text().split())
    identities = json.dumps({"identities": [{"name": "root", "credentials": [{"accessKey": env["MINIO_ROOT_USER"], "secretKey": env["MINIO_ROOT_PASSWORD"]}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]})
    minio = textwrap.dedent(
        f"""\
        [Service]
        ExecStart=
        ExecStart={weed()} server -dir=/var/lib/minio -ip=127.0.0.1 -ip.bind=0.0.0.0 -s3 -s3.port=9000 -s3.port.grpc=19000 -s3.port.iceberg=0 -s3.port.lance=0 -master.port=9333 -master.port.grpc=19333 -volume.port=8080 -volume.port.grpc=18080 -filer.port=8888 -filer.port.grpc=18888 -master.volumeSizeLimitMB=256 -master.telemetry=false -s3.config=/etc/hyperhive-test/s3.json
        StateDirectory=minio
        """
    )
    bucket_script = textwrap.dedent(
        """\
        #!/bin/bash
        # The bucket, made once the S3 server answers (as `mc mb --ignore-existing`).
        until code=$(curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 --user "$MINIO_ROOT_USER:$MINIO_ROOT_PASSWORD" -X PUT http://127.0.0.1:9000/hyperhive) && [ "$code" = 200 ] || [ "$code" = 409 ]; do
          sleep 1
        done
        """
    )
    bucket = "[Service]\nExecStart=\nExecStart=/etc/hyperhive-test/minio-bucket\nTimeoutStartSec=120\n"
    return {
        "/etc/systemd/system/minio.service.d/seaweedfs.conf": (minio, 0o644),
        "/etc/systemd/system/minio-bucket.service.d/seaweedfs.conf": (bucket, 0o644),
        "/etc/hyperhive-test/minio-bucket": (bucket_script, 0o755),
        "/etc/hyperhive-test/s3.json": (identities + "\n", 0o644),
    }


def control_plane(rendered, store):
    client_pkgs = (rendered / "client" / "host.json").read_text()
    cli = re.search(r'"([^"]*-agents-control-[0-9.]+)"', client_pkgs).group(1) + "/bin/agents-control"
    substitutions = {
        "${lib.getExe agents-control}": cli,
        "${pkgs.runtimeShell}": "/bin/bash",
        "${./fixtures/proxy.crt}": str(store_path(store, "-proxy.crt")),
    }
    return ["minio", "cp1", "cp2", "cp3", "proxy", "client"], substitutions, {"minio": minio_files(rendered)}


def natscli(rendered, nodes):
    """natscli is in no registry reachable here: the nodes whose system packages have it get the
    bash client `nats` beside this file, which speaks the NATS protocol to the real servers for the
    commands the scripts run (its header says which)."""
    client = (Path(__file__).resolve().parent / "nats").read_text()
    # It signs with openssl (in the hosts layer with ca-certificates, which needs it) and reads
    # JSON with jq.
    for program in ("openssl", "jq"):
        if not (HOSTS_LAYER / "usr" / "bin" / program).exists():
            fail(f"no {program} in the hosts layer at {HOSTS_LAYER}, which hosts/nats needs: run scripts/setup as root")

    def has_natscli(node):
        # tests/nixos/model/pkgs.nix's natscli: a package `nats` with an empty bin/.
        packages = [Path(p) for p in json.loads((rendered / node / "host.json").read_text())["packages"]]
        return any(p.name.endswith("-nats") and not any((p / "bin").iterdir()) for p in packages)

    return {node: {"/usr/local/bin/nats": (client, 0o755)} for node in nodes if has_natscli(node)}


def swarm(rendered, store):
    nodes = ["nats1", "nats2", "nats3", "controller", "minio", "hive1", "hive2"]
    extra = natscli(rendered, nodes)
    if set(extra) != {"controller", "hive1", "hive2"}:
        fail(f"swarm.nix's nodes with natscli are {sorted(extra)}; expected the controller and both hives")
    extra["minio"] = minio_files(rendered)
    return nodes, let_strings("swarm.nix", "natsUrl"), extra


def forge_files():
    """The test kit's forge stand-in in place of Forgejo (no forge installs here):
    forgejo.service, as rendered (its user, app.ini written before start), runs `forge-stand-in
    web`, which serves app.ini's HTTP_ADDR:HTTP_PORT as its ROOT_URL; `forgejo` on PATH is the
    stand-in too, for `forgejo admin user create`, which it hands to the running server."""
    stand_in = BUILD_DIR / "forge-stand-in"
    if not os.access(stand_in, os.X_OK):
        fail(f"{stand_in} is missing: cargo build -p hyperhive-testkit --bin forge-stand-in")
    unit = f"[Service]\nExecStart=\nExecStart={stand_in} web --pid /run/forgejo/forgejo.pid\n"
    return {
        "/etc/systemd/system/forgejo.service.d/forge-stand-in.conf": (unit, 0o644),
        "/usr/local/bin/forgejo": (f'#!/bin/sh\nexec {stand_in} "$@"\n', 0o755),
    }


def provisioning(rendered, store):
    # Synapse is scripts/setup's, a Python program: its interpreter needs SQLite's library.
    if not list(HOSTS_LAYER.glob("usr/lib/*/libsqlite3.so.0")):
        fail(f"no libsqlite3 in the hosts layer at {HOSTS_LAYER}, which Synapse needs: run scripts/setup as root")
    substitutions = let_strings("provisioning.nix", "hive", "agent", "matrixServer")
    return ["services", "controller", substitutions["${hive}"]], substitutions, {"services": forge_files()}


def tool_mounts(tools):
    """What scripts/setup's tools run from: each tool's directory, or for one in a Python venv
    (Synapse; the wheels' programs) the whole venv and the interpreter it was made with
    (pyvenv.cfg's `home`)."""
    paths = set()
    for tool in tools:
        directory = tool.resolve().parent
        config = directory.parent / "pyvenv.cfg"
        if config.exists():
            home = re.search(r"^home = (.*)$", config.read_text(), re.M).group(1)
            paths |= {str(directory.parent), str(Path(home).resolve().parent)}
        else:
            paths.add(str(directory))
    return paths


def closed_directories(paths):
    """The directories of the Debian root others may not enter (root's home) that hold a path
    bound into the hosts: each becomes a tmpfs others may enter, the bound path mounted back into
    it, so a service's user reaches an interpreter that lives under root's home (pyenv's)."""
    closed = set()
    for path in paths:
        for parent in reversed(Path(path).parents):
            in_root = DEBIAN_ROOT / str(parent).lstrip("/")
            if parent != Path("/") and in_root.is_dir() and not in_root.stat().st_mode & 0o001:
                closed.add(str(parent))
                break
    return sorted(closed)


TESTS = {
    "control-plane": ("control-plane.nix", control_plane),
    "swarm": ("swarm.nix", swarm),
    "provisioning": ("provisioning.nix", provisioning),
}


def main():
    args = sys.argv[1:]
    stop_before = None
    if len(args) == 3 and args[1] == "--stop-before":
        stop_before = args[2]
        args = args[:1]
    if len(args) != 1 or args[0] not in TESTS:
        fail(f"usage: run.py {'|'.join(TESTS)} [--stop-before SUBTEST-PREFIX]")
    name = args[0]
    preflight()
    started = time.monotonic()
    # Not below /tmp: the store is mounted at the same path in the hosts, where units with
    # PrivateTmp= would not see it.
    work = Path(tempfile.mkdtemp(prefix="hyperhive-vm-", dir=os.environ.get("HYPERHIVE_VM_WORK", "/var/lib")))
    # A stopped run cleans up as a failed one does.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: fail(f"stopped by signal {number}"))
    try:
        # The rendered programs link to the tools through a directory of direct links, so the hosts
        # need only the directories the tools really are in.
        tools = work / "tools"
        tools.mkdir()
        for tool in TOOLS_DIR.iterdir():
            (tools / tool.name).symlink_to(tool.resolve())
        env = dict(os.environ, HYPERHIVE_BUILD_DIR=str(BUILD_DIR), HYPERHIVE_TOOLS_DIR=str(tools))
        done = subprocess.run([sys.executable, str(ROOT / "tests/nixos/render/render_hosts.py"), str(work / "render")], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"rendering the machines failed:\n{done.stdout}{done.stderr}")
        store = work / "render" / "store"
        nix_file, configure = TESTS[name]
        rendered = work / "render" / name
        nodes, substitutions, extra = configure(rendered, store)
        script = test_script(nix_file)
        for needle, value in substitutions.items():
            if needle not in script:
                fail(f"{nix_file}'s script no longer has {needle}")
            script = script.replace(needle, value)
        left = re.findall(r"\$\{[^}]*\}", script.replace("${{", ""))
        left = [v for v in left if not v.startswith("${PIPESTATUS")]
        if left:
            fail(f"{nix_file}'s script uses Nix values this driver does not compute: {left}")
        bind_ro = [str(store), str(tools), str(BUILD_DIR)] + sorted(tool_mounts(TOOLS_DIR.iterdir()))
        with Driver(work, DEBIAN_ROOT, [HOSTS_LAYER], rendered, bind_ro, nodes, stop_before, closed_directories(bind_ro)) as driver:
            driver.setup(extra)
            scope = {m.name: m for m in driver.machines}
            scope.update(start_all=driver.start_all, subtest=driver.subtest, machines=driver.machines, driver=driver)
            try:
                exec(compile(script, nix_file, "exec"), scope)
                if stop_before:
                    fail(f"{name}: no subtest starts with {stop_before!r}")
            except StopBefore as where:
                log(f"{name}: every subtest before \"{where}\" passed; stopped there as asked")
            except Exception as error:
                traceback.print_exc()
                fail(f"{name}: {error}")
        log(f"{name}: took {time.monotonic() - started:.0f} s")
    finally:
        if os.environ.get("HYPERHIVE_VM_KEEP"):
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
