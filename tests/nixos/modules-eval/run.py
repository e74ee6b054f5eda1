#!/usr/bin/env python3
"""Runs the module checks (default.nix) against a Nix store of their own, in a temporary
directory removed afterwards: they read files Nix builds. Prints `true`, or exits with the
failed checks (or Nix's error) on stderr."""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "render"))
from nix_store import Store, fail  # noqa: E402

with tempfile.TemporaryDirectory(prefix="modules-eval.") as directory:
    result = Store(directory).evaluate(Path(__file__).resolve().parent)
if result is not True:
    fail(f"expected true, got {result!r}")
print("true")
