# What a VM test's node or a docs/nixos.md host sets beside services, declared with nixpkgs' types:
# the VM's size (nixos/modules/virtualisation/qemu-vm.nix), documentation and stateVersion.
{ lib, ... }:
let
  inherit (lib) mkOption types;
in
{
  options = {
    virtualisation.memorySize = mkOption {
      type = types.ints.positive;
      default = 1024;
      description = "The VM's memory, in MiB.";
    };
    virtualisation.diskSize = mkOption {
      type = types.nullOr types.ints.positive;
      default = 1024;
      description = "The VM's disk, in MiB.";
    };
    documentation.enable = mkOption {
      type = types.bool;
      default = true;
      description = "Whether manuals are installed.";
    };
    system.stateVersion = mkOption {
      type = types.str;
      default = "26.11";
      description = "The NixOS release whose defaults stateful data follows.";
    };
  };
}
