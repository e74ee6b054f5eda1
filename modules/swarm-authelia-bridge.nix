# services.hyperhive.deploy.authelia-bridge: swarm-authelia-bridge on the Authelia host. It
# manages the swarm's agent users in Authelia's file user database (the file Authelia's
# `authentication_backend.file.path` names), behind a bearer token, so the swarm-controller can
# create each agent's SSO user (docs/swarm/provisioning.md, "SSO").
#
# It runs as the user that owns the users file (Authelia's own, by default the one nixpkgs'
# services.authelia.instances.main runs as), because it replaces that file by renaming a new one
# over it: the new file must belong to the user Authelia reads it as.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  cfg = config.services.hyperhive.deploy.authelia-bridge;
  hyperhive = import ./lib.nix { inherit lib pkgs; };
  inherit (lib) mkOption types;
in
{
  options.services.hyperhive.deploy.authelia-bridge = {
    enable = lib.mkEnableOption "swarm-authelia-bridge, which manages the swarm's agent users in Authelia's file user database";

    package = lib.mkPackageOption hyperhive.packages "swarm-authelia-bridge" {
      pkgsText = "pkgs.hyperhive";
      example = "inputs.hyperhive.packages.\${pkgs.stdenv.hostPlatform.system}.swarm-authelia-bridge";
    };

    listenAddress = mkOption {
      type = types.str;
      default = "127.0.0.1";
      example = "10.0.0.5";
      description = ''
        The address to listen on (with `port`: `AUTHELIA_BRIDGE_LISTEN`). Plain HTTP: keep it on
        loopback or a private network, or put a TLS proxy in front when the controller is on another
        host.
      '';
    };

    port = mkOption {
      type = types.port;
      default = 9092;
      example = 9092;
      description = "The port to listen on.";
    };

    openFirewall = lib.mkEnableOption "the firewall for `port`, so a swarm-controller on another host reaches the bridge";

    usersFile = mkOption {
      type = types.strMatching "/.+";
      default = "/var/lib/authelia-main/users_database.yml";
      example = "/var/lib/authelia-main/users_database.yml";
      description = ''
        Authelia's users file (`AUTHELIA_BRIDGE_USERS_FILE`): the path of its
        `authentication_backend.file.path`. Created by the first write when missing; its directory
        must exist and is the only place the unit may write. Set Authelia's
        `authentication_backend.file.watch` to true so it reloads the file after each change.
      '';
    };

    tokenFile = mkOption {
      type = types.path;
      example = "/run/secrets/authelia-bridge-token";
      description = ''
        The bearer token the controller must send (`AUTHELIA_BRIDGE_TOKEN_FILE`), at least 16
        printable characters, e.g. from `head -c 32 /dev/urandom | base64`. Handed to the unit with
        `LoadCredential=`; not in the Nix store. The controller gets the same token.
      '';
    };

    managedGroup = mkOption {
      type = types.strMatching "[A-Za-z0-9][A-Za-z0-9._-]{0,63}";
      default = "hyperhive-agents";
      example = "swarm-agents";
      description = ''
        The group every user the bridge creates carries (`AUTHELIA_BRIDGE_MANAGED_GROUP`). The
        bridge changes, deletes and checks passwords of users in this group only, so a person's
        user is never touched: give no person this group.
      '';
    };

    user = mkOption {
      type = types.str;
      default = "authelia-main";
      example = "authelia";
      description = ''
        The user the bridge runs as: the owner of `usersFile` (Authelia's own user; nixpkgs'
        `services.authelia.instances.<name>` runs as `authelia-<name>`). Not created here.
      '';
    };

    group = mkOption {
      type = types.str;
      default = "authelia-main";
      example = "authelia";
      description = "The group the bridge runs as (Authelia's).";
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      (hyperhive.notInStore "services.hyperhive.deploy.authelia-bridge.tokenFile" cfg.tokenFile)
      {
        assertion = !lib.hasPrefix "${builtins.storeDir}/" cfg.usersFile;
        message = ''
          services.hyperhive.deploy.authelia-bridge.usersFile is ${cfg.usersFile}, in the read-only
          Nix store, where the bridge cannot write it. Give Authelia a users file outside the store,
          e.g. /var/lib/authelia-main/users_database.yml.
        '';
      }
      {
        assertion = cfg.user != "root";
        message = ''
          services.hyperhive.deploy.authelia-bridge.user is root. Run the bridge as the user that
          owns the users file and that Authelia runs as, e.g. authelia-main.
        '';
      }
    ];

    networking.firewall.allowedTCPPorts = lib.optional cfg.openFirewall cfg.port;

    systemd.services.swarm-authelia-bridge = hyperhive.service // {
      description = "hyperhive SSO bridge (swarm-authelia-bridge) for ${cfg.usersFile}";

      environment = lib.mapAttrs (_: hyperhive.literalForSystemd) {
        AUTHELIA_BRIDGE_LISTEN = hyperhive.hostPort cfg.listenAddress cfg.port;
        AUTHELIA_BRIDGE_USERS_FILE = cfg.usersFile;
        AUTHELIA_BRIDGE_MANAGED_GROUP = cfg.managedGroup;
      }
      // {
        # LoadCredential below puts the token here, readable by this unit only.
        AUTHELIA_BRIDGE_TOKEN_FILE = "%d/token";
      };

      serviceConfig = hyperhive.serviceConfig // {
        ExecStart = lib.getExe cfg.package;
        # The users file's owner, so the file renamed into place belongs to the user Authelia
        # reads it as.
        DynamicUser = false;
        User = cfg.user;
        Group = cfg.group;
        LoadCredential = [ "token:${cfg.tokenFile}" ];
        # The new file is written beside the old one and renamed over it; the rest of the system
        # stays read-only.
        ReadWritePaths = [ (dirOf cfg.usersFile) ];
      };
    };
  };
}
