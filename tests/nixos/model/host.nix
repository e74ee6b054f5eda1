# system.build.host: what NixOS would put on the machine, for the renderer
# (tests/nixos/render/render.nix): every unit file with the targets it is linked into, and every
# file under /etc. As when NixOS builds a system, a failed assertion stops the evaluation with
# nixpkgs' "Failed assertions:" message, and warnings are printed.
{ config, lib, ... }:
let
  failed = map (a: a.message) (lib.filter (a: !a.assertion) config.assertions);
  files = lib.filterAttrs (_: f: f.enable) config.environment.etc;
in
{
  options.system.build.host = lib.mkOption {
    type = lib.types.unspecified;
    readOnly = true;
    internal = true;
    description = "The host's unit files and /etc.";
  };

  config.system.build.host =
    if failed != [ ] then
      throw "\nFailed assertions:\n${lib.concatMapStringsSep "\n" (message: "- ${message}") failed}"
    else
      lib.showWarnings config.warnings {
        units = config.systemd.units;
        etc = lib.mapAttrs' (
          _: f:
          lib.nameValuePair f.target {
            source = "${f.source}";
            inherit (f) mode user group;
          }
        ) files;
        packages = map toString config.environment.systemPackages;
        firewall = { inherit (config.networking.firewall) allowedTCPPorts allowedUDPPorts; };
      };
}
