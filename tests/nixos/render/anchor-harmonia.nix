# The anchor of the hardening ceiling: the unit nixpkgs' services.harmonia writes (nixpkgs,
# nixos/modules/services/networking/harmonia.nix, MIT), a hardened network daemon of nixpkgs'
# own. Its [Service] settings are restated here as that module sets them, so it is rendered and
# measured (`systemd-analyze security`) exactly as the hyperhive units are; docs/nixos.md gives
# the figures. It is measured only: its program is not on this machine.
#
# hive-c0re is a root supervisor and cannot meet that anchor: its ceiling is the same unit with
# exactly hive-c0re's documented relaxations (modules/hive-c0re.nix) and nothing else. So is
# swarm-controller's, with its one: it sees every user (no `PrivateUsers`), to name and give a
# role to each user of its socket.
{
  config,
  pkgs,
  lib,
  ...
}:
{
  systemd.services.harmonia-with-swarm-controller-relaxations = {
    inherit (config.systemd.services.harmonia) description after wantedBy;
    serviceConfig = config.systemd.services.harmonia.serviceConfig // {
      PrivateUsers = false;
    };
  };

  systemd.services.harmonia-with-hive-c0re-relaxations = {
    inherit (config.systemd.services.harmonia) description after wantedBy;
    serviceConfig = removeAttrs config.systemd.services.harmonia.serviceConfig [ "User" "Group" ] // {
      DynamicUser = false;
      PrivateUsers = false;
      CapabilityBoundingSet = [
        "CAP_CHOWN"
        "CAP_DAC_OVERRIDE"
        "CAP_FOWNER"
      ];
      SystemCallFilter = [
        "@system-service"
        "~@privileged"
        "@chown"
        "~@resources"
      ];
      ProcSubset = "all";
      ReadWritePaths = [ "/var/lib" ];
    };
  };

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
