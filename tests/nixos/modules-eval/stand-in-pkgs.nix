# A stand-in nixpkgs for evaluating flake.nix and nix/*.nix without building: nixpkgs' own lib, and
# builders that only record their arguments (a derivation here is an attribute set naming its
# inputs). flake-outputs.nix checks the flake's outputs with it; tests/offline-build/facts.nix reads
# the workspace build's flags and the packages' programs from it.
let
  b = builtins;

  # nixpkgs' own lib, but for lib.fileset.toSource, which would hash the workspace's sources into a
  # store path: here a fixed stand-in path that names the files it would hold, since nothing is built.
  lib = import ../model/nixpkgs-lib.nix // {
    fileset = {
      unions = paths: paths;
      toSource =
        { root, fileset }:
        {
          outPath = "/nix/store/00000000000000000000000000000000-source";
          files = map (path: lib.removePrefix "${toString root}/" (toString path)) fileset;
        };
    };
  };

  drv =
    name: extra:
    {
      type = "derivation";
      inherit name;
      outPath = "/nix/store/00000000000000000000000000000000-${name}";
      meta.mainProgram = name;
    }
    // extra;
  tool = name: drv name { };

  # As mkDerivation does: `passthru` and `meta` become attributes of the derivation, the rest its
  # environment (recorded as `env`).
  derivation' =
    name: attrs:
    drv name (
      (attrs.passthru or { })
      // {
        env = b.removeAttrs attrs [
          "passthru"
          "meta"
        ];
      }
      // lib.optionalAttrs (attrs ? meta) { inherit (attrs) meta; }
    );

  pkgsFor =
    system:
    let
      pkgs = {
        inherit lib;
        stdenv.hostPlatform.system = system;
        callPackage =
          path: args:
          let
            f = import path;
          in
          f (b.intersectAttrs (b.functionArgs f) pkgs // args);
        rustPlatform = {
          rustLibSrc = tool "rust-lib-src";
          buildRustPackage =
            attrs:
            drv "${attrs.pname}-${attrs.version}" {
              inherit attrs;
              inherit (attrs) meta;
            };
        };
        symlinkJoin = args: derivation' args.name (b.removeAttrs args [ "name" ]) // { inherit (args) paths; };
        mkShell = attrs: drv "shell" { inherit attrs; };
        # A Python environment is named after the first package in it (`python3-with-moto`).
        python3.withPackages =
          f:
          let
            packages = f {
              moto = tool "moto";
              flask = tool "flask";
              flask-cors = tool "flask-cors";
            };
          in
          tool "python3-with-${(b.head packages).name}" // { inherit packages; };
        testers.runNixOSTest = test: drv "vm-test" { inherit test; };
        writeText = name: text: drv name { inherit text; };
        runCommand = name: env: script: derivation' name (env // { buildCommand = script; });
        runtimeShell = "/nix/store/00000000000000000000000000000000-bash/bin/bash";
      }
      // lib.genAttrs [
        "cargo"
        "rustc"
        "clippy"
        "rustfmt"
        "rust-analyzer"
        "nats-server"
        "natscli"
        "minio"
        "minio-client"
        "caddy"
        "seaweedfs"
        "matrix-synapse"
        "shellcheck"
        "openssl"
        "nixfmt-tree"
        "curl"
        "jq"
        "nginx"
        "chromium"
        "chromedriver"
        "procps"
      ] tool;
    in
    pkgs;
in
{
  inherit lib pkgsFor;
}
