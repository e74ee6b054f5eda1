# One machine's configuration through nixpkgs' module system: the NixOS options of this model,
# `pkgs` from ./pkgs.nix, and the given modules (the hyperhive modules, a VM test's node...).
{
  modules,
  hostName ? null,
}:
let
  lib = import ./nixpkgs-lib.nix;
  pkgs = import ./pkgs.nix { inherit lib; };
in
lib.evalModules {
  class = "nixos";
  modules = [
    ./.
    { _module.args.pkgs = pkgs; }
  ]
  ++ lib.optional (hostName != null) { networking.hostName = lib.mkDefault hostName; }
  ++ modules;
}
