"""A local Nix store of its own for evaluating and building the model's derivations.

Debian's Nix (nix-instantiate, nix-store) with a store whose directory is `<dir>/store`: the
files Nix writes (path literals copied, derivations built by ../model/pkgs.nix with this machine's
/bin/sh) are real files there, at the paths the rendered units name. Nothing is fetched: no
substituters, no sandbox (Debian's Nix has none), builds run as the calling user.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NIXPKGS_LIB_VARIABLE = "HYPERHIVE_NIXPKGS_LIB"


def fail(message):
    sys.exit(f"{Path(sys.argv[0]).name}: {message}")


def nixpkgs_lib():
    """nixpkgs' lib/: HYPERHIVE_NIXPKGS_LIB, else ../shared/nixpkgs-lib/lib beside the checkout."""
    given = os.environ.get(NIXPKGS_LIB_VARIABLE)
    lib = Path(given) if given else ROOT.parent / "shared" / "nixpkgs-lib" / "lib"
    if not (lib / "default.nix").is_file():
        fail(f"nixpkgs' lib is not at {lib}: set {NIXPKGS_LIB_VARIABLE} to the lib/ directory of a nixpkgs checkout (26.11)")
    return lib


class Store:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.path = self.dir / "store"
        state = self.dir / ".nix"
        self.url = f"local?store={self.path}&state={state}/state&log={state}/log"
        self.env = dict(
            os.environ,
            NIX_CONFIG="substituters =\nsandbox = false\nbuild-users-group =\nwarn-dirty = false\n",
            HYPERHIVE_NIXPKGS_LIB=str(nixpkgs_lib()),
        )

    def _run(self, args, what):
        done = subprocess.run(args, env=self.env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            fail(f"{what} failed (the lines above are Nix's)")
        return done.stdout

    def evaluate(self, expression_file, **env):
        """The JSON value of a Nix file, evaluated strictly; path literals are copied into the store."""
        self.env.update(env)
        out = self._run(
            ["nix-instantiate", "--store", self.url, "--read-write-mode", "--eval", "--strict", "--json", str(expression_file)],
            f"evaluating {expression_file}",
        )
        return json.loads(out)

    def _eval_args(self, expression):
        return ["nix-instantiate", "--store", self.url, "--read-write-mode", "--eval", "--strict", "--json", "-E", expression]

    def evaluate_expression(self, expression):
        """The JSON value of a Nix expression."""
        return json.loads(self._run(self._eval_args(expression), "evaluating an expression"))

    def try_evaluate_expression(self, expression):
        """The finished nix-instantiate of an expression, failed or not (its stderr is Nix's error)."""
        return subprocess.run(self._eval_args(expression), env=self.env, capture_output=True, text=True)

    def realise(self, paths):
        """Builds the given derivations (and what they need) into the store."""
        drvs = [p for p in paths if p.endswith(".drv")]
        if drvs:
            self._run(["nix-store", "--store", self.url, "--realise", *drvs], "building the rendered files")
