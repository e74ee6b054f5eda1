# The anchor of the hardening ceiling: the unit nixpkgs' services.harmonia writes (nixpkgs,
# nixos/modules/services/networking/harmonia.nix, MIT), a hardened network daemon of nixpkgs'
# own. Its [Service] settings are restated here as that module sets them, so it is rendered and
# measured (`systemd-analyze security`) exactly as the hyperhive units are; docs/nixos.md gives
# the figures. It is measured only: its program is not on this machine.
{ pkgs, lib, ... }:
{
  systemd.services.harmonia = {
    description = "harmonia binary cache service";
    requires = [ "nix-daemon.socket" ];
    after = [ "network.target" ];
    wantedBy = [ "multi-user.target" ];
    environment.HOME = "/run/harmonia";
    serviceConfig = {
      ExecStart = lib.getExe pkgs.harmonia;
      User = "harmonia";
      Group = "harmonia";
      DynamicUser = true;
      PrivateUsers = true;
      DeviceAllow = [ "" ];
      UMask = "0066";
      RuntimeDirectory = "harmonia";
      SystemCallFilter = [
        "@system-service"
        "~@privileged"
        "~@resources"
      ];
      CapabilityBoundingSet = "";
      ProtectKernelModules = true;
      ProtectKernelTunables = true;
      ProtectControlGroups = true;
      ProtectKernelLogs = true;
      ProtectHostname = true;
      ProtectClock = true;
      RestrictRealtime = true;
      MemoryDenyWriteExecute = true;
      ProcSubset = "pid";
      ProtectProc = "invisible";
      RestrictNamespaces = true;
      SystemCallArchitectures = "native";
      PrivateNetwork = false;
      PrivateTmp = true;
      PrivateDevices = true;
      PrivateMounts = true;
      NoNewPrivileges = true;
      ProtectSystem = "strict";
      ProtectHome = true;
      LockPersonality = true;
      RestrictAddressFamilies = "AF_UNIX AF_INET AF_INET6";
      LimitNOFILE = 65536;
    };
  };
}
