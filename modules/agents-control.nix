# services.hyperhive.deploy.agents-control: one copy of the control plane. Run it on two
# or more hosts with the same store and key, behind a TLS load balancer whose health check is
# /readyz (docs/nixos.md has a whole example).
{
  config,
  lib,
  pkgs,
  ...
}:
let
  cfg = config.services.hyperhive.deploy.agents-control;
  hyperhive = import ./lib.nix { inherit lib pkgs; };
  inherit (lib) mkOption types;

  # The settings that are not secret. The unit gets them as its environment, and the
  # `agents-control` command installed for administrators exports the same ones.
  settings = lib.filterAttrs (_: value: value != null) {
    AGENTS_STORE = cfg.store.url;
    AGENTS_STORE_ENDPOINT = cfg.store.endpoint;
    AGENTS_STORE_REGION = cfg.store.region;
    AGENTS_STORE_PATH_STYLE = if cfg.store.pathStyle then "1" else "0";
    AGENTS_CONTROL_URL = cfg.url;
    AGENTS_CONTROL_PEER_URL = cfg.peerUrl;
    AGENTS_CONTROL_NAME = cfg.name;
    AGENTS_CONTROL_PIN = cfg.pin;
    AGENTS_CONTROL_LISTEN = hyperhive.hostPort cfg.listenAddress cfg.port;
    AGENTS_CONTROL_MAX_CONNECTIONS = toString cfg.maxConnections;
    AGENTS_CONTROL_MAX_CONNECTIONS_PER_ADDRESS = toString cfg.maxConnectionsPerAddress;
  };

  fileStoreDir = lib.removePrefix "file://" cfg.store.url;
  isFileStore = lib.hasPrefix "file://" cfg.store.url;

  # `sudo agents-control code --client`, `clients`, `hosts`, `forget`, `store check` on this host
  # use this copy's store and key, as the unit does. Root only: the key and the bucket keys are.
  adminCommand = pkgs.writeShellScriptBin "agents-control" ''
    set -euo pipefail
    set -a
    ${lib.toShellVars settings}
    ${lib.optionalString (cfg.environmentFile != null) ''. ${lib.escapeShellArg cfg.environmentFile}''}
    set +a
    export AGENTS_CONTROL_KEY_FILE=${lib.escapeShellArg cfg.keyFile}
    ${lib.optionalString (cfg.store.credentialsFile != null) ''export AWS_SHARED_CREDENTIALS_FILE=${lib.escapeShellArg cfg.store.credentialsFile}''}
    exec ${lib.getExe cfg.package} "$@"
  '';
in
{
  options.services.hyperhive.deploy.agents-control = {
    enable = lib.mkEnableOption "a copy of the hyperhive control plane (agents-control)";

    package = lib.mkPackageOption hyperhive.packages "agents-control" {
      pkgsText = "pkgs.hyperhive";
      example = "inputs.hyperhive.packages.\${pkgs.stdenv.hostPlatform.system}.agents-control";
    };

    store = {
      url = mkOption {
        type = types.strMatching "(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?|file:///.*)";
        example = "s3://my-agents/control";
        description = ''
          The store every copy shares (`AGENTS_STORE`): `s3://bucket/prefix`, or `file:///path` for
          copies on this one machine. The bucket must honour conditional writes; check it first with
          `agents-control store check --store URL`.
        '';
      };
      endpoint = mkOption {
        type = types.nullOr (types.strMatching "https?://.+");
        default = null;
        example = "http://minio.internal:9000";
        description = "The S3 endpoint, when the bucket is not on Amazon S3 (MinIO, R2...) (`AGENTS_STORE_ENDPOINT`).";
      };
      region = mkOption {
        type = types.strMatching "[A-Za-z0-9-]+";
        default = "us-east-1";
        example = "eu-central-1";
        description = "The bucket's region (`AGENTS_STORE_REGION`).";
      };
      pathStyle = mkOption {
        type = types.bool;
        default = false;
        example = true;
        description = "Use path-style bucket addresses, as MinIO and most S3-compatible servers want (`AGENTS_STORE_PATH_STYLE`).";
      };
      credentialsFile = mkOption {
        type = types.nullOr types.path;
        default = null;
        example = "/run/secrets/agents-control-bucket";
        description = ''
          The bucket keys as an AWS shared credentials file, mode 0600, not in the Nix store:
          ```
          [default]
          aws_access_key_id = ...
          aws_secret_access_key = ...
          ```
          It is handed to the unit with `LoadCredential=` (readable by this unit only, never in
          its environment) and named by `AWS_SHARED_CREDENTIALS_FILE`, which the AWS SDK reads.
          The preferred way to give the keys; `environmentFile` is the other.
        '';
      };
    };

    keyFile = mkOption {
      type = types.path;
      example = "/run/secrets/agents-control.key";
      description = ''
        A file of exactly 32 random bytes: the control key, the same on every copy. It is handed to
        the unit with `LoadCredential=`, so it may be readable by root only, and must not be in the
        Nix store. Make it once with `head -c 32 /dev/urandom > agents-control.key`, and deliver it
        with your secret manager.
      '';
    };

    environmentFile = mkOption {
      type = types.nullOr types.path;
      default = null;
      example = "/run/secrets/agents-control.env";
      description = ''
        An environment file (systemd `EnvironmentFile=` syntax) with the bucket keys:
        `AWS_ACCESS_KEY_ID=...` and `AWS_SECRET_ACCESS_KEY=...`. Not in the Nix store. The keys
        then sit in the daemon's environment; `store.credentialsFile` keeps them out of it and is
        preferred. Leave both unset for a `file://` store, or when the host's AWS credential chain
        provides the keys.
      '';
    };

    url = mkOption {
      type = types.strMatching "https://[^[:space:]]+";
      example = "https://agents.example.com";
      description = ''
        The one public address every device is given: the load balancer's (`AGENTS_CONTROL_URL`).
        https only: every code carries it, and devices pair and link through it.
      '';
    };

    peerUrl = mkOption {
      type = types.strMatching "https?://[^[:space:]]+";
      default = "http://${config.networking.fqdnOrHostName}:${toString cfg.port}";
      defaultText = lib.literalExpression ''"http://''${config.networking.fqdnOrHostName}:''${toString cfg.port}"'';
      example = "http://cp2.internal:8791";
      description = "Where the other copies reach this one (`AGENTS_CONTROL_PEER_URL`).";
    };

    name = mkOption {
      type = types.nullOr types.str;
      default = null;
      example = "Example agents";
      description = "The name windows and phones show for this control plane (`AGENTS_CONTROL_NAME`).";
    };

    pin = mkOption {
      type = types.nullOr (types.strMatching "[A-Za-z0-9_-]{43}=?");
      default = null;
      example = "FQGTLFmicV4NnWvYQhSawf91IKz1z6el2U8lTRYOPhs";
      description = ''
        The pin of the load balancer's certificate when it is self-signed (`AGENTS_CONTROL_PIN`):
        the base64url SHA-256 of its SubjectPublicKeyInfo, printed by
        `agents-control pin --cert FILE`. Every code then carries it. Leave it unset for a
        publicly trusted certificate.
      '';
    };

    listenAddress = mkOption {
      type = types.str;
      default = "0.0.0.0";
      example = "10.0.0.11";
      description = "The address to listen on (plain HTTP: TLS is the load balancer's job).";
    };

    port = mkOption {
      type = types.port;
      default = 8791;
      example = 8080;
      description = "The port to listen on, for the load balancer and the other copies.";
    };

    maxConnections = mkOption {
      type = types.ints.positive;
      default = 50000;
      example = 100000;
      description = ''
        The most connections this copy holds at once: devices, peers and HTTP requests
        (`AGENTS_CONTROL_MAX_CONNECTIONS`). The unit's open-file limit (`LimitNOFILE`) is set above
        it; past it, new connections are closed at once.
      '';
    };

    maxConnectionsPerAddress = mkOption {
      type = types.ints.positive;
      default = 1000;
      example = 5000;
      description = ''
        The most connections from one address (one IPv6 /64) that have not yet proven to be a
        paired device (`AGENTS_CONTROL_MAX_CONNECTIONS_PER_ADDRESS`); a device's link stops
        counting once its handshake passes. Behind a load balancer every connection comes from
        the balancer: allow for the largest burst of reconnections (a copy's devices after it
        stops), and cap per client at the balancer.
      '';
    };

    openFirewall = lib.mkEnableOption "the firewall for `port`, so the load balancer and the other copies reach this copy";
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      (hyperhive.notInStore "services.hyperhive.deploy.agents-control.keyFile" cfg.keyFile)
      (hyperhive.notInStore "services.hyperhive.deploy.agents-control.environmentFile" cfg.environmentFile)
      (hyperhive.notInStore "services.hyperhive.deploy.agents-control.store.credentialsFile" cfg.store.credentialsFile)
      {
        # The unit runs as a dynamic user with a read-only system: the one directory it may
        # write is its StateDirectory.
        assertion = !isFileStore || lib.hasPrefix "/var/lib/agents-control/" fileStoreDir;
        message = ''
          services.hyperhive.deploy.agents-control.store.url is ${cfg.store.url}, but a file:// store
          must be below /var/lib/agents-control/ (the unit's own state directory), e.g.
          file:///var/lib/agents-control/store. Copies on several machines need an s3:// store.
        '';
      }
    ];

    environment.systemPackages = [ adminCommand ];

    networking.firewall.allowedTCPPorts = lib.mkIf cfg.openFirewall [ cfg.port ];

    systemd.services.agents-control = hyperhive.service // {
      description = "hyperhive control plane copy (agents-control)";

      # LoadCredential below puts the secrets in %d, readable by this unit only.
      environment =
        lib.mapAttrs (_: hyperhive.literalForSystemd) settings
        // {
          AGENTS_CONTROL_KEY_FILE = "%d/control-key";
        }
        // lib.optionalAttrs (cfg.store.credentialsFile != null) {
          AWS_SHARED_CREDENTIALS_FILE = "%d/store-credentials";
        };

      serviceConfig = hyperhive.serviceConfig // {
        ExecStart = "${lib.getExe cfg.package} serve";
        # On SIGTERM a copy fails /readyz, closes its sockets with "going away", then leaves.
        KillSignal = "SIGTERM";
        TimeoutStopSec = 30;
        LoadCredential = [
          "control-key:${cfg.keyFile}"
        ]
        ++ lib.optional (cfg.store.credentialsFile != null) "store-credentials:${cfg.store.credentialsFile}";
        EnvironmentFile = lib.optional (cfg.environmentFile != null) cfg.environmentFile;
        # A copy keeps nothing that matters on its disk; a file:// store lives here.
        StateDirectory = "agents-control";
        # Every connection is a socket: systemd's default soft limit (1,024) would cap a copy
        # near 1,000 devices. Room for every connection, and the store's and peers' sockets.
        LimitNOFILE = cfg.maxConnections + 4096;
      };
    };
  };
}
