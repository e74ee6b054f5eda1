# services.hyperhive.deploy.swarm-controller: the swarm daemon, one per swarm, with
# its HTTP API on a unix socket and `swarmctl` on the system PATH pointed at it.
#
# Its `enable` is its own: it is deliberately not derived from
# services.hyperhive.deploy.hive-controller.enable, so a host runs the swarm daemon only when
# asked to.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  cfg = config.services.hyperhive.deploy.swarm-controller;
  hyperhive = import ./lib.nix { inherit lib pkgs; };

  # The hive directory (modules/swarm.nix) as crates/hive-proto/src/directory.rs reads it:
  # {"<hive>": {"description", "labels", "xkey"}}, xkey left out when unset. Built field by field:
  # a submodule's value also holds the module system's own `_module`, which is not JSON.
  hives = config.services.hyperhive.swarm.hives;
  hivesFile = pkgs.writeText "swarm-hives.json" (
    builtins.toJSON (
      lib.mapAttrs (
        _: hive: { inherit (hive) description labels; } // lib.optionalAttrs (hive.xkey != null) { inherit (hive) xkey; }
      ) hives
    )
  );
  inherit (lib) mkOption types;

  socketDir = dirOf cfg.socketPath;
  # RuntimeDirectory= is relative to /run.
  runtimeDirectory = lib.removePrefix "/run/" socketDir;

  # Other units' runtime directories (RuntimeDirectory= may list several, space-separated).
  runtimeDirectoriesOf =
    unit: lib.concatMap (lib.splitString " ") (lib.toList (unit.serviceConfig.RuntimeDirectory or [ ]));
  sharingUnits = lib.attrNames (
    lib.filterAttrs (
      name: unit: name != "swarm-controller" && lib.elem runtimeDirectory (runtimeDirectoriesOf unit)
    ) config.systemd.services
  );

  # Directories other daemons also put sockets in: the socket is mode 0666 and its directory is the
  # only access control, so it must hold nothing else (services/swarm-controller/README.md).
  sharedSocketDirs = [
    "/run"
    "/run/hyperhive"
    "/run/user"
    "/run/systemd"
    "/run/dbus"
    "/run/nscd"
  ];

  # swarmctl with SWARM_CONTROLLER_SOCKET defaulting to this socket (`--socket` or the variable
  # still override it).
  swarmctl =
    pkgs.runCommand "swarmctl-${cfg.package.version or "configured"}"
      {
        nativeBuildInputs = [ pkgs.makeWrapper ];
        meta.mainProgram = "swarmctl";
      }
      ''
        makeWrapper ${lib.getExe' cfg.package "swarmctl"} "$out/bin/swarmctl" \
          --set-default SWARM_CONTROLLER_SOCKET ${lib.escapeShellArg cfg.socketPath}
      '';
in
{
  # services.hyperhive.swarm.hives, the hive directory this daemon serves.
  imports = [ ./swarm.nix ];

  options.services.hyperhive.deploy.swarm-controller = {
    enable = lib.mkEnableOption "the hyperhive swarm daemon (swarm-controller), one per swarm";

    package = lib.mkPackageOption hyperhive.packages "swarm-controller" {
      pkgsText = "pkgs.hyperhive";
      example = "inputs.hyperhive.packages.\${pkgs.stdenv.hostPlatform.system}.swarm-controller";
    };

    socketPath = mkOption {
      type = types.strMatching "/run/[^/]+(/[^/]+)*/[^/]+";
      default = "/run/swarm-controller/controller.sock";
      example = "/run/swarm-controller/controller.sock";
      description = ''
        The unix socket the HTTP API is served on (`SWARM_CONTROLLER_SOCKET`). The socket is mode
        0666 and its directory is the access control, so the directory is the unit's own runtime
        directory (kept across restarts: `RuntimeDirectoryPreserve=yes`), holds nothing else, and
        only root and members of `group` may enter it. Never in /run/hyperhive or any directory
        other sockets use.
      '';
    };

    group = mkOption {
      type = types.str;
      default = "swarm-controller";
      example = "wheel";
      description = ''
        The group that may use the socket, and so drive the swarm with `swarmctl`. Add operators to
        it (`users.users.<name>.extraGroups`). Created when left at its default.
      '';
    };

    nats = {
      url = mkOption {
        type = types.strMatching "(nats|tls|ws|wss)://[^[:space:]]+";
        default = "nats://127.0.0.1:4222";
        example = "nats://nats.internal:4222";
        description = "The swarm's NATS server (`SWARM_NATS_URL`).";
      };
      credentialsFile = mkOption {
        type = types.nullOr types.path;
        default = null;
        example = "/run/secrets/swarm-controller.creds";
        description = ''
          The controller's NATS credential (`controller.creds` from
          `swarm-controller nats init --out DIR`), handed to the unit with `LoadCredential=`; not in
          the Nix store. Unset only for a NATS without authentication (tests and local trials).
        '';
      };
      signingDir = mkOption {
        type = types.nullOr types.path;
        default = null;
        example = "/var/lib/swarm-nats";
        description = ''
          The directory `swarm-controller nats init --out DIR` wrote, with the account signing keys
          (`SWARM_NATS_DIR`): the controller mints and revokes credentials with them, rewrites
          files in it when it adds an agent's account or revokes a destroyed agent's credential,
          and gives each new or changed account to the running nats-server with its `system.creds`
          (the server runs the full account resolver, so no reload). So it is not handed over with
          `LoadCredential=` but made writable for the unit (`ReadWritePaths=`): it must exist,
          belong to the user `swarm-controller` (mode 0700) and not be in the Nix store. Unset, the
          controller can neither mint nor revoke credentials.
        '';
      };
    };

    secretsKeyFile = mkOption {
      type = types.nullOr types.path;
      default = null;
      example = "/run/secrets/swarm-secrets.key";
      description = ''
        The secret store's key (`SWARM_SECRETS_KEY_FILE`, made by
        `swarm-controller secrets-key --out FILE`): every password, token and key of a provisioned
        agent is sealed under it in the `swarm-secrets` bucket. Handed to the unit with
        `LoadCredential=`; not in the Nix store. Keep a copy offline: a lost key loses every stored
        secret. Unset, the controller cannot provision agents.
      '';
    };

    reconcileInterval = mkOption {
      type = types.ints.positive;
      default = 60;
      example = 30;
      description = ''
        Seconds between reconcile passes (`SWARM_RECONCILE_SECS`), which rewrite any per-agent
        schedule key that differs from the definitions.
      '';
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      (hyperhive.notInStore "services.hyperhive.deploy.swarm-controller.nats.credentialsFile" cfg.nats.credentialsFile)
      (hyperhive.notInStore "services.hyperhive.deploy.swarm-controller.nats.signingDir" cfg.nats.signingDir)
      (hyperhive.notInStore "services.hyperhive.deploy.swarm-controller.secretsKeyFile" cfg.secretsKeyFile)
      {
        assertion = !(lib.elem socketDir sharedSocketDirs) && !lib.hasPrefix "/run/hyperhive/" socketDir;
        message = ''
          services.hyperhive.deploy.swarm-controller.socketPath is ${cfg.socketPath}, but ${socketDir}
          is a directory other sockets share. The socket is mode 0666 and its directory is its only
          access control, so give it a directory of its own, e.g. the default
          /run/swarm-controller/controller.sock.
        '';
      }
      {
        assertion = sharingUnits == [ ];
        message = ''
          services.hyperhive.deploy.swarm-controller.socketPath is ${cfg.socketPath}, but ${socketDir}
          is also the runtime directory of ${lib.concatStringsSep ", " sharingUnits}. The socket's
          directory must hold nothing else: give it a directory of its own, e.g. the default
          /run/swarm-controller/controller.sock.
        '';
      }
    ];

    environment.systemPackages = [ swarmctl ];

    users.users.swarm-controller = {
      isSystemUser = true;
      inherit (cfg) group;
      description = "hyperhive swarm daemon";
    };
    users.groups = lib.mkIf (cfg.group == "swarm-controller") { swarm-controller = { }; };

    systemd.services.swarm-controller = hyperhive.service // {
      description = "hyperhive swarm daemon (swarm-controller)";

      environment = lib.mapAttrs (_: hyperhive.literalForSystemd) {
        SWARM_CONTROLLER_SOCKET = cfg.socketPath;
        SWARM_NATS_URL = cfg.nats.url;
        SWARM_RECONCILE_SECS = toString cfg.reconcileInterval;
      }
      // lib.optionalAttrs (cfg.nats.credentialsFile != null) {
        # LoadCredential below puts the credential here, readable by this unit only.
        SWARM_NATS_CREDS = "%d/nats-creds";
      }
      // lib.optionalAttrs (cfg.nats.signingDir != null) {
        SWARM_NATS_DIR = hyperhive.literalForSystemd (toString cfg.nats.signingDir);
      }
      // lib.optionalAttrs (cfg.secretsKeyFile != null) { SWARM_SECRETS_KEY_FILE = "%d/secrets-key"; }
      // lib.optionalAttrs (hives != { }) { SWARM_HIVES_FILE = "${hivesFile}"; };

      serviceConfig = hyperhive.serviceConfig // {
        ExecStart = "${lib.getExe cfg.package} serve";
        # A static user, so the socket's directory can belong to `group` and operators in it can
        # reach the socket.
        DynamicUser = false;
        User = "swarm-controller";
        Group = cfg.group;
        LoadCredential =
          lib.optional (cfg.nats.credentialsFile != null) "nats-creds:${cfg.nats.credentialsFile}"
          ++ lib.optional (cfg.secretsKeyFile != null) "secrets-key:${cfg.secretsKeyFile}";
        # The socket's directory: created by systemd, group-traversable, and kept across restarts so
        # clients holding its path never see it vanish; the daemon unlinks its own stale socket at
        # start (services/swarm-controller/README.md).
        RuntimeDirectory = runtimeDirectory;
        RuntimeDirectoryMode = "0750";
        RuntimeDirectoryPreserve = "yes";
        # The signing directory is rewritten when a credential is revoked; the rest of the
        # system stays read-only.
        ReadWritePaths = lib.optional (cfg.nats.signingDir != null) (toString cfg.nats.signingDir);
      };
    };
  };
}
