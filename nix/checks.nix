# `nix flake check`: every package, the workspace's test suite against real servers, and the three
# multi-host VM tests (tests/nixos/README.md says which end-to-end test each mirrors).
{ pkgs, self }:
let
  system = pkgs.stdenv.hostPlatform.system;
  packages = self.packages.${system};
  hyperhive = pkgs.callPackage ./packages.nix { };
  vmTest = file: pkgs.testers.runNixOSTest (import file { inherit self; });
in
{
  inherit (packages)
    agents-control
    swarm-controller
    hive-agent
    hive-c0re
    swarm-authelia-bridge
    daemon-bins
    ;
  cargo-tests = hyperhive.cargo-tests;
  vm-control-plane = vmTest ../tests/nixos/control-plane.nix;
  vm-swarm = vmTest ../tests/nixos/swarm.nix;
  vm-provisioning = vmTest ../tests/nixos/provisioning.nix;
}
