# nixpkgs' own services.nats (nixos/modules/services/networking/nats.nix), as far as it meets
# services.hyperhive.deploy.nats on one machine: its unit `nats.service` running nats-server with a
# JSON configuration, its state in `dataDir` (/var/lib/nats by default), its static user `nats`.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  inherit (lib) mkOption types;
  cfg = config.services.nats;
  configFile = pkgs.writeText "nats.conf" (
    builtins.toJSON (
      {
        server_name = cfg.serverName;
        inherit (cfg) port;
      }
      // lib.optionalAttrs cfg.jetstream { jetstream.store_dir = cfg.dataDir; }
      // cfg.settings
    )
  );
in
{
  options.services.nats = {
    enable = lib.mkEnableOption "the NATS messaging system";
    user = mkOption {
      type = types.str;
      default = "nats";
      description = "The user nats-server runs as.";
    };
    group = mkOption {
      type = types.str;
      default = "nats";
      description = "Its group.";
    };
    serverName = mkOption {
      type = types.str;
      default = "$HOSTNAME";
      description = "server_name.";
    };
    port = mkOption {
      type = types.port;
      default = 4222;
      description = "The client port.";
    };
    dataDir = mkOption {
      type = types.path;
      default = "/var/lib/nats";
      description = "JetStream's store.";
    };
    jetstream = lib.mkEnableOption "JetStream";
    settings = mkOption {
      type = types.attrsOf types.anything;
      default = { };
      description = "More of the server's configuration.";
    };
  };

  config = lib.mkIf cfg.enable {
    systemd.services.nats = {
      description = "NATS messaging system";
      wantedBy = [ "multi-user.target" ];
      after = [ "network.target" ];
      serviceConfig = lib.mkMerge [
        (lib.mkIf (cfg.dataDir == "/var/lib/nats") {
          StateDirectory = "nats";
          StateDirectoryMode = "0750";
        })
        {
          Type = "simple";
          ExecStart = "${lib.getExe pkgs.nats-server} -c ${configFile}";
          ExecReload = "${pkgs.coreutils}/bin/kill -HUP $MAINPID";
          ExecStop = "${pkgs.coreutils}/bin/kill -SIGINT $MAINPID";
          Restart = "on-failure";
          User = cfg.user;
          Group = cfg.group;
          ReadWritePaths = [ cfg.dataDir ];
          LimitNOFILE = 800000;
          CapabilityBoundingSet = "";
          NoNewPrivileges = true;
          PrivateDevices = true;
          PrivateTmp = true;
          ProtectHome = true;
          ProtectSystem = "strict";
          RestrictAddressFamilies = [
            "AF_INET"
            "AF_INET6"
          ];
          SystemCallArchitectures = "native";
          SystemCallFilter = [
            "@system-service"
            "~@privileged"
          ];
        }
      ];
    };
    users.users = lib.mkIf (cfg.user == "nats") {
      nats = {
        description = "NATS daemon user";
        isSystemUser = true;
        inherit (cfg) group;
        home = cfg.dataDir;
      };
    };
    users.groups = lib.mkIf (cfg.group == "nats") { nats = { }; };
  };
}
