# The networking options the modules read or set, as NixOS declares them
# (nixos/modules/tasks/network-interfaces.nix, services/networking/firewall.nix).
{ config, lib, ... }:
let
  inherit (lib) mkOption types;
  cfg = config.networking;
in
{
  options.networking = {
    hostName = mkOption {
      type = types.strMatching "^$|^[[:alnum:]]([[:alnum:]_-]{0,61}[[:alnum:]])?$";
      default = "nixos";
      description = "The machine's host name.";
    };
    domain = mkOption {
      type = types.nullOr types.str;
      default = null;
      description = "The machine's domain.";
    };
    fqdnOrHostName = mkOption {
      type = types.str;
      readOnly = true;
      description = "The host name with its domain when there is one.";
    };
    firewall = {
      enable = mkOption {
        type = types.bool;
        default = true;
        description = "Whether the firewall is on.";
      };
      allowedTCPPorts = mkOption {
        type = types.listOf types.port;
        default = [ ];
        apply = lib.unique;
        description = "TCP ports open to everyone.";
      };
      allowedUDPPorts = mkOption {
        type = types.listOf types.port;
        default = [ ];
        apply = lib.unique;
        description = "UDP ports open to everyone.";
      };
    };
  };

  config.networking.fqdnOrHostName = if cfg.domain == null then cfg.hostName else "${cfg.hostName}.${cfg.domain}";
}
