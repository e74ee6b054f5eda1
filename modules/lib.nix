# Shared by the hyperhive NixOS modules (not a module itself): the package set their `package`
# options default to, the unit settings every daemon starts from (restart policy, hardening), and
# checks on option values.
{ lib, pkgs }:
{
  # The flake's overlay provides `pkgs.hyperhive`; without it (the modules imported from a
  # checkout, or the flake's nixosModules on a system without the overlay) the same packages are
  # built with the system's own nixpkgs.
  packages = pkgs.hyperhive or (pkgs.callPackage ../nix/packages.nix { });

  # Every daemon starts at boot once the network is up. What it depends on (NATS, the bucket) may
  # come up later or go away for a while: it keeps retrying, every RestartSec, instead of giving
  # up after systemd's default five starts.
  service = {
    wantedBy = [ "multi-user.target" ];
    wants = [ "network-online.target" ];
    after = [ "network-online.target" ];
    startLimitIntervalSec = 0;
  };

  # The [Service] settings every daemon starts from: the restart policy, and what nixpkgs daemons
  # share (atticd, harmonia, minio, memos): no privileges, a read-only system, private /tmp and
  # devices, and only the system calls a network service needs. Units override single keys (e.g.
  # swarm-controller keeps a static user so a group may use its socket).
  serviceConfig = {
    Restart = "on-failure";
    RestartSec = 5;
    DynamicUser = true;
    CapabilityBoundingSet = "";
    AmbientCapabilities = "";
    NoNewPrivileges = true;
    ProtectSystem = "strict";
    ProtectHome = true;
    PrivateTmp = true;
    PrivateDevices = true;
    DevicePolicy = "closed";
    # Mounts made inside stay inside; only the unit's own user and group (and root) are mapped, so
    # it cannot act on other users' files (as nixpkgs' harmonia unit).
    PrivateMounts = true;
    PrivateUsers = true;
    ProtectKernelTunables = true;
    ProtectKernelModules = true;
    ProtectKernelLogs = true;
    ProtectControlGroups = true;
    ProtectClock = true;
    ProtectHostname = true;
    ProtectProc = "invisible";
    ProcSubset = "pid";
    RestrictNamespaces = true;
    RestrictRealtime = true;
    RestrictSUIDSGID = true;
    LockPersonality = true;
    MemoryDenyWriteExecute = true;
    RemoveIPC = true;
    UMask = "0077";
    # AF_UNIX as well as IP: journald logging, and swarm-controller's API socket.
    RestrictAddressFamilies = [
      "AF_UNIX"
      "AF_INET"
      "AF_INET6"
    ];
    SystemCallArchitectures = "native";
    SystemCallFilter = [
      "@system-service"
      "~@privileged"
      "~@resources"
    ];
  };

  # A secret given as a path must stay out of the world-readable Nix store. A Nix path literal
  # (`./key`, unquoted) is refused as well: interpolating it into the unit copies it into the store.
  notInStore =
    option: path:
    {
      assertion =
        path == null
        || (!builtins.isPath path && !lib.hasPrefix "${builtins.storeDir}/" (toString path));
      message = ''
        ${option} is in the Nix store, or is a Nix path literal that would be copied there
        (${toString path}): every user of the machine can read the store.
        Give the path of a file outside the store instead, deployed by your secret manager
        (agenix, sops-nix, or by hand with mode 0600), e.g. "/run/secrets/...".
      '';
    };

  # Agent and hive names are NATS subject tokens, KV keys and unix names.
  isAgentName = name: builtins.match "[a-z][a-z0-9-]{0,31}" name != null;

  # systemd expands specifiers (%d, %s, %h...) in Environment= values, so a value that is meant
  # literally (a turn command's printf format, a URL with %-escapes) has its "%" doubled.
  literalForSystemd = lib.replaceStrings [ "%" ] [ "%%" ];

  # "host:port", bracketing an IPv6 host.
  hostPort =
    host: port: if lib.hasInfix ":" host then "[${host}]:${toString port}" else "${host}:${toString port}";
}
