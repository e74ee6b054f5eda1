#!/usr/bin/env python3
"""Writes what NixOS would put on each machine of hosts.nix, one directory per machine.

    python3 tests/nixos/render/render_hosts.py OUT

OUT/store/                          the Nix store the files below name (programs, configurations,
                                    scripts), built by Nix; its programs link to the project's
                                    build (HYPERHIVE_BUILD_DIR, default target/debug) and to
                                    scripts/setup's tools (HYPERHIVE_TOOLS_DIR, default .tools/bin)
OUT/<group>/<machine>/etc/systemd/system/<unit>       each unit file
OUT/<group>/<machine>/etc/systemd/system/<target>.wants/<unit> -> ../<unit>   (wantedBy; .requires
                                    for requiredBy), as NixOS links them
OUT/<group>/<machine>/etc/tmpfiles.d/00-nixos.conf    systemd.tmpfiles.rules
OUT/<group>/<machine>/etc/sysusers.d/00-nixos.conf    users.users and users.groups
OUT/<group>/<machine>/etc/<path>    environment.etc: a link into OUT/store, or a copy with its mode
OUT/<group>/<machine>/host.json     the same, as data: units (text, wantedBy, requiredBy), etc
                                    (source, mode, user, group), packages, firewall ports

Groups: control-plane, swarm, provisioning (the VM tests' nodes), docs-example (docs/nixos.md's
whole swarm, run from its own commands), anchor (nixpkgs' harmonia unit, for the hardening ceiling).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from nix_store import ROOT, Store, fail

HERE = Path(__file__).resolve().parent
BUILD_DIR = Path(os.environ.get("HYPERHIVE_BUILD_DIR", ROOT / "target" / "debug"))
TOOLS_DIR = Path(os.environ.get("HYPERHIVE_TOOLS_DIR", ROOT / ".tools" / "bin"))


def check_programs():
    for program in ("agents-control", "swarm-controller", "swarmctl", "hive-agent", "hive-c0re", "swarm-authelia-bridge"):
        if not os.access(BUILD_DIR / program, os.X_OK):
            fail(f"{BUILD_DIR / program} is missing: build the workspace (cargo build) or set HYPERHIVE_BUILD_DIR to a directory holding the binaries")
    for program in ("nats-server", "caddy", "synapse_homeserver", "register_new_matrix_user"):
        if not os.access(TOOLS_DIR / program, os.X_OK):
            fail(f"{TOOLS_DIR / program} is missing: run scripts/setup or set HYPERHIVE_TOOLS_DIR")


def docs_example(directory):
    """docs/nixos.md's whole swarm as a flake in `directory`, with the files its commands make."""
    guide = (ROOT / "docs" / "nixos.md").read_text()
    section = guide.split("## A whole swarm, declared", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    commands = [text for lang, text in blocks if lang == "sh"]
    flakes = [text for lang, text in blocks if lang == "nix"]
    if not commands or len(flakes) != 1:
        fail("docs/nixos.md's \"A whole swarm, declared\" no longer has its commands and one nix block")
    flake = flakes[0]
    (directory / "flake.nix").write_text(flake)
    # Each machine's hardware-configuration.nix, which the example imports: nothing to declare here.
    (directory / "hardware").mkdir()
    for name in set(re.findall(r'(?:host|copy) "([a-z0-9-]+)"', flake)):
        (directory / "hardware" / f"{name}.nix").write_text("{ }\n")
    env = dict(os.environ, PATH=f"{BUILD_DIR}:{os.environ['PATH']}")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", commands[0]], cwd=directory, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        fail("the first commands of docs/nixos.md's \"A whole swarm, declared\" failed")


def write_host(directory, host):
    etc = directory / "etc"
    units = etc / "systemd" / "system"
    units.mkdir(parents=True)
    for name, unit in sorted(host["units"].items()):
        (units / name).write_text(unit["text"])
        for kind, targets in (("wants", unit["wantedBy"]), ("requires", unit["requiredBy"])):
            for target in targets:
                links = units / f"{target}.{kind}"
                links.mkdir(exist_ok=True)
                (links / name).symlink_to(f"../{name}")
    for target, file in sorted(host["etc"].items()):
        path = etc / target
        path.parent.mkdir(parents=True, exist_ok=True)
        if file["mode"] == "symlink":
            path.symlink_to(file["source"])
        else:
            shutil.copyfile(file["source"], path)
            path.chmod(int(file["mode"], 8))
    (directory / "host.json").write_text(json.dumps(host, indent=2, sort_keys=True) + "\n")


def render(out):
    out = Path(out)
    check_programs()
    out.mkdir(parents=True, exist_ok=True)
    store = Store(out)
    with tempfile.TemporaryDirectory(prefix="docs-example.") as example:
        docs_example(Path(example))
        rendered = store.evaluate(
            HERE / "render.nix",
            HYPERHIVE_BUILD_DIR=str(BUILD_DIR),
            HYPERHIVE_TOOLS_DIR=str(TOOLS_DIR),
            HYPERHIVE_DOCS_EXAMPLE=example,
        )
    store.realise(rendered["needs"])
    hosts = json.loads(rendered["hosts"])
    for name, host in hosts.items():
        write_host(out / name, host)
    return hosts


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: render_hosts.py OUT (a directory to write every machine's files into)")
    hosts = render(sys.argv[1])
    print(f"rendered {len(hosts)} machines into {sys.argv[1]}")
