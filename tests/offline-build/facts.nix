# What of nix/packages.nix the offline build (run.py) and the test kit's check of the sandbox's
# inputs (crates/testkit/tests/nix_check_inputs.rs) read, evaluated against the stand-in nixpkgs
# (nothing is built): the workspace build's source files, cargo flags and git hashes, each package's programs,
# and the cargo tests' inputs and skips.
let
  inherit (import ../nixos/modules-eval/stand-in-pkgs.nix) lib pkgsFor;
  hyperhive = (pkgsFor "x86_64-linux").callPackage ../../nix/packages.nix { };
  build = hyperhive.workspaceBuild.attrs;
in
{
  inherit (build) version cargoBuildFlags;
  # The nixpkgs flake.nix follows (whose rustc the workspace's rust-version must not pass).
  nixpkgs = (import ../../flake.nix).inputs.nixpkgs.url;
  # What of the checkout the build sees (its `src` fileset), relative to the checkout.
  source = build.src.files;
  # A git dependency builds in the sandbox only with its hash here.
  outputHashes = build.cargoLock.outputHashes or { };
  programs = lib.mapAttrs (_: package: package.programs) (
    lib.filterAttrs (_: value: value ? programs) hyperhive
  );
  cargoTests = {
    inputs = map (input: input.name) hyperhive.cargo-tests.attrs.nativeCheckInputs;
    skips = hyperhive.sandboxSkips;
  };
}
