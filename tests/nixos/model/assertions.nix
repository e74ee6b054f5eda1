# assertions and warnings as NixOS declares them (nixos/modules/misc/assertions.nix). NixOS checks
# them when it builds the system; here system.build.host (host.nix) does.
{ lib, ... }:
{
  options = {
    assertions = lib.mkOption {
      type = lib.types.listOf lib.types.unspecified;
      internal = true;
      default = [ ];
      description = "Conditions the configuration must meet, each with the message shown when it does not.";
    };
    warnings = lib.mkOption {
      type = lib.types.listOf lib.types.str;
      internal = true;
      default = [ ];
      description = "Messages shown when the system is built.";
    };
  };
}
