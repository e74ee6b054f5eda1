#!/usr/bin/env python3
"""Evaluates each configuration of broken.nix (with every hyperhive module, through nixpkgs' module
system) and checks that it is refused with the message broken.nix expects."""

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "render"))
from nix_store import Store, fail  # noqa: E402

HERE = Path(__file__).resolve().parent
EVAL = HERE.parent / "model" / "eval.nix"
MODULES = HERE.parents[2] / "modules"


def case(name):
    quoted = json.dumps(name)
    return f"""
      let c = (import {HERE / "broken.nix"}).{quoted};
      in (import {EVAL} {{ hostName = "broken"; modules = [ {MODULES} c.module ]; }}).config.system.build.host
    """


with tempfile.TemporaryDirectory(prefix="modules-broken.") as directory:
    store = Store(directory)
    cases = store.evaluate_expression(f"builtins.mapAttrs (_: c: c.expect) (import {HERE / 'broken.nix'})")
    wrong = []
    for name, expect in cases.items():
        done = store.try_evaluate_expression(case(name))
        if done.returncode == 0:
            wrong.append(f"{name}: evaluated, but must be refused with: {expect}")
        # Nix indents the lines of its messages: compare them word by word.
        elif " ".join(expect.split()) not in " ".join(done.stderr.split()):
            wrong.append(f"{name}: refused, but not with: {expect}\n{done.stderr}")
if wrong:
    fail("\n".join(wrong))
print(f"{len(cases)} broken configurations refused with nixpkgs' messages")
