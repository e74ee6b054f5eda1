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

  # Agent provisioning (`POST /api/agents`): each external system is on when its URL (the store
  # CA: its key) is set.
  prov = cfg.provisioning;
  provisions = prov.sso.url != null || prov.forge.url != null || prov.matrix.url != null || prov.storeCa.keyFile != null;
  # Its files, each handed to the unit with LoadCredential= under `name` and named to the daemon
  # by `variable` as %d/<name>. `secret`: refused in the Nix store (the CA's certificate is public).
  provisioningFiles = [
    {
      name = "sso-bridge-token";
      option = "sso.tokenFile";
      file = prov.sso.tokenFile;
      variable = "SWARM_SSO_BRIDGE_TOKEN_FILE";
      secret = true;
    }
    {
      name = "forge-admin-token";
      option = "forge.adminTokenFile";
      file = prov.forge.adminTokenFile;
      variable = "SWARM_FORGE_ADMIN_TOKEN_FILE";
      secret = true;
    }
    {
      name = "matrix-shared-secret";
      option = "matrix.sharedSecretFile";
      file = prov.matrix.sharedSecretFile;
      variable = "SWARM_MATRIX_SHARED_SECRET_FILE";
      secret = true;
    }
    {
      name = "store-ca-key";
      option = "storeCa.keyFile";
      file = prov.storeCa.keyFile;
      variable = "SWARM_STORE_CA_KEY_FILE";
      secret = true;
    }
    {
      name = "store-ca-cert";
      option = "storeCa.certFile";
      file = prov.storeCa.certFile;
      variable = "SWARM_STORE_CA_CERT_FILE";
      secret = false;
    }
  ];
  givenFiles = builtins.filter (f: f.file != null) provisioningFiles;
  provisioningOption = name: "services.hyperhive.deploy.swarm-controller.provisioning.${name}";

  # "<n>s", "<n>m", "<n>h" or "<n>d", as the daemon reads its lifetimes and intervals.
  lifetimes = {
    storeCertLifetime = prov.storeCertLifetime;
    queueCredsLifetime = prov.queueCredsLifetime;
    credentialCheckEvery = prov.credentialCheckEvery;
    "forge.reconcileEvery" = prov.forge.reconcileEvery;
  };
  isLifetime = value: builtins.match "[0-9]+[smhd]" value != null;
  # Forgejo's owner and repository names.
  isRepo = value: builtins.match "[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+" value != null;

  # A setting that needs another: refused with both named.
  needs = present: option: missing: hint: {
    assertion = !present || missing;
    message = ''
      ${provisioningOption option} is set, but ${hint}.
    '';
  };

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

    socketRoles = mkOption {
      type = types.attrsOf (types.enum [ "viewer" "operator" "admin" ]);
      default = { };
      example = {
        swarm-viewers = "viewer";
        swarm-controller = "operator";
        wheel = "admin";
      };
      description = ''
        The role of each user of the socket by unix group (`SWARM_SOCKET_ROLES`): `viewer` reads,
        `operator` also gives agents work, pauses and schedules them, `admin` also creates and
        destroys agents, sets their secrets and reads the audit log. A user has the highest role
        of the groups listed that it is in, and none when it is in none of them; root and the
        controller's own user are admin. Empty (the default): everyone who can reach the socket
        (root and members of `group`) is admin.
      '';
    };

    nats = {
      url = mkOption {
        type = types.strMatching "(nats|tls|ws|wss)://[^[:space:]]+";
        default = "nats://127.0.0.1:4222";
        example = "nats://nats1:4222,nats://nats2:4222,nats://nats3:4222";
        description = ''
          The swarm's NATS server (`SWARM_NATS_URL`); for a cluster, every node, comma-separated
          (the client reconnects to another when one goes away).
        '';
      };
      replicas = mkOption {
        type = types.ints.between 1 5;
        default = 1;
        example = 3;
        description = ''
          The copies of every JetStream stream and key-value bucket (`SWARM_NATS_REPLICAS`); the
          controller changes existing ones to it at start. 1 for a single server; 3 on a
          three-node cluster (services.hyperhive.deploy.nats with `cluster.routes`), whose nodes
          `url` then lists. A single server refuses more than 1, and the controller stops at start
          saying so.
        '';
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

    deployKeyFile = mkOption {
      type = types.nullOr types.path;
      default = null;
      example = "/run/secrets/swarm-deploy.key";
      description = ''
        The key deploy and credentials messages are signed with (`SWARM_DEPLOY_KEY_FILE`, made by
        `swarm-controller deploy-key --out FILE`, which prints the public key every hive pins as
        `services.hyperhive.deploy.hive-controller.controllerKeys`). Whoever holds it can run code
        on every hive: handed to the unit with `LoadCredential=`, never in the Nix store. Unset,
        the controller cannot provision agents.
      '';
    };

    quickLinks = mkOption {
      type = types.listOf (types.attrsOf types.str);
      default = [ ];
      example = [
        {
          title = "Forge";
          url = "https://forge.example.com/swarm";
          description = "the agents' repositories";
        }
      ];
      description = ''
        The swarm UI's quick links (`SWARM_QUICK_LINKS_FILE`, written to the store as JSON): each a
        `title` (1 to 100 characters), an http(s) `url` and an optional `description`; at most 100.
        The controller refuses to start on a malformed list, saying which link is wrong.
      '';
    };

    provisioning = {
      sso = {
        url = mkOption {
          type = types.nullOr (types.strMatching "https?://[^[:space:]]+");
          default = null;
          example = "http://127.0.0.1:9092";
          description = ''
            The base URL of swarm-authelia-bridge (`SWARM_SSO_BRIDGE_URL`), through which the
            controller creates each agent's SSO user. Unset, agents get no SSO user.
          '';
        };
        tokenFile = mkOption {
          type = types.nullOr types.path;
          default = null;
          example = "/run/secrets/authelia-bridge-token";
          description = ''
            The bridge's bearer token, the same file as the bridge's
            `services.hyperhive.deploy.authelia-bridge.tokenFile`. Handed to the unit with
            `LoadCredential=` (`SWARM_SSO_BRIDGE_TOKEN_FILE`); not in the Nix store. Required with
            `url`.
          '';
        };
      };

      forge = {
        url = mkOption {
          type = types.nullOr (types.strMatching "https?://[^[:space:]]+");
          default = null;
          example = "https://forge.example";
          description = ''
            The Forgejo (or Gitea) base URL (`SWARM_FORGE_URL`), where the controller creates each
            agent's forge user, its config repository and its token. Unset, agents get no forge
            account.
          '';
        };
        adminTokenFile = mkOption {
          type = types.nullOr types.path;
          default = null;
          example = "/run/secrets/forge-admin-token";
          description = ''
            A token of a forge site administrator, with the scopes `write:admin`, `read:user`,
            `write:repository` and `write:organization` (or `all`). Handed to the unit with `LoadCredential=`
            (`SWARM_FORGE_ADMIN_TOKEN_FILE`); not in the Nix store. Required with `url`.
          '';
        };
        templateRepo = mkOption {
          type = types.nullOr types.str;
          default = null;
          example = "hyperhive/agent-config";
          description = ''
            The template repository (`owner/name`, marked as a template in its settings) each
            agent's config repository is generated from (`SWARM_FORGE_TEMPLATE_REPO`). Required
            with `url`.
          '';
        };
        org = mkOption {
          type = types.nullOr (types.strMatching "[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?");
          default = null;
          example = "hyperhive";
          description = ''
            The swarm's organisation on the forge (`SWARM_FORGE_ORG`), made private by the controller
            when absent: agents' config repositories are generated in it (each agent the only
            collaborator of its own), and its one webhook covers them. Unset, the template
            repository's owner (docs/swarm/forge.md).
          '';
        };
        webhookUrl = mkOption {
          type = types.nullOr (types.strMatching "https?://[^[:space:]@]+/api/forge/webhook");
          default = null;
          example = "https://swarm.example/api/forge/webhook";
          description = ''
            The public URL the forge reaches the controller's `POST /api/forge/webhook` at, through
            a proxy in front of its socket (`SWARM_FORGE_WEBHOOK_URL`). The controller keeps one
            organisation webhook pointing there, signed with the secret in its state directory.
            Unset, no webhook: only the periodic listing updates config pull requests and issues.
          '';
        };
        reconcileEvery = mkOption {
          type = types.str;
          default = "5m";
          example = "1m";
          description = ''
            The interval of the forge pass (`SWARM_FORGE_RECONCILE_EVERY`): the organisation, team,
            labels and webhook reconciled, config pull requests and open issues listed. A number
            and s, m, h or d.
          '';
        };
      };

      matrix = {
        url = mkOption {
          type = types.nullOr (types.strMatching "https?://[^[:space:]]+");
          default = null;
          example = "https://matrix.example";
          description = ''
            The Synapse client API base URL (`SWARM_MATRIX_URL`), where the controller registers
            each agent's matrix account. Unset, agents get no matrix account.
          '';
        };
        sharedSecretFile = mkOption {
          type = types.nullOr types.path;
          default = null;
          example = "/run/secrets/synapse-registration-secret";
          description = ''
            A file holding Synapse's `registration_shared_secret` (and nothing else). Handed to the
            unit with `LoadCredential=` (`SWARM_MATRIX_SHARED_SECRET_FILE`); not in the Nix store.
            Required with `url`.
          '';
        };
      };

      storeCa = {
        keyFile = mkOption {
          type = types.nullOr types.path;
          default = null;
          example = "/run/secrets/store-ca.key";
          description = ''
            The store CA's private key (`store-ca.key` from `swarm-controller store-ca --out-dir DIR`,
            PEM, mode 0600), with which the controller issues each agent's store client certificate.
            Handed to the unit with `LoadCredential=` (`SWARM_STORE_CA_KEY_FILE`); not in the Nix
            store. Unset, agents get no store certificate.
          '';
        };
        certFile = mkOption {
          type = types.nullOr types.path;
          default = null;
          example = "/run/secrets/store-ca.pem";
          description = ''
            The store CA's certificate (`store-ca.pem` from the same command), which the stores
            trust. Handed to the unit with `LoadCredential=` (`SWARM_STORE_CA_CERT_FILE`) beside
            the key. Required with `keyFile`.
          '';
        };
      };

      storeCertLifetime = mkOption {
        type = types.str;
        default = "24h";
        example = "7d";
        description = ''
          The lifetime of an agent's store certificate (`SWARM_STORE_CERT_LIFETIME`): a number and
          `s`, `m`, `h` or `d`. Renewed after two thirds of it; there is no revocation list, so a
          removed agent keeps store access until its certificate ends.
        '';
      };

      queueCredsLifetime = mkOption {
        type = types.str;
        default = "24h";
        example = "12h";
        description = ''
          The lifetime of an agent's NATS credential (`SWARM_QUEUE_CREDS_LIFETIME`): a number and
          `s`, `m`, `h` or `d`.
        '';
      };

      credentialCheckEvery = mkOption {
        type = types.str;
        default = "5m";
        example = "15m";
        description = ''
          The interval of the credential health pass (`SWARM_CREDENTIAL_CHECK_EVERY`), which
          re-checks every agent's credentials and renews those due: a number and `s`, `m`, `h` or
          `d`.
        '';
      };

      jobConcurrency = mkOption {
        type = types.ints.positive;
        default = 8;
        example = 16;
        description = ''
          Job graph attempts in flight at once (`SWARM_JOBQ_CONCURRENCY`, 1 to 1024): how many
          provisioning, renewal and repair steps talk to the external systems at the same time.
        '';
      };

      jobMaxAttempts = mkOption {
        type = types.ints.positive;
        default = 6;
        example = 10;
        description = ''
          Attempts per job before it fails and blocks what depends on it
          (`SWARM_JOBQ_MAX_ATTEMPTS`, 1 to 100; the controller refuses more at start); waits
          between attempts double from 1 s.
        '';
      };
    };

    controlPlane = {
      identityFile = mkOption {
        type = types.nullOr types.path;
        default = null;
        example = "/run/secrets/swarm-control-identity.json";
        description = ''
          The host identity that makes the controller a host of an agents-control control plane
          (`SWARM_CONTROL_IDENTITY`), written once by `swarm-controller pair CODE --identity FILE`
          with a code from `agents-control code --host`. Handed to the unit with `LoadCredential=`;
          not in the Nix store. Unset, the identity `swarm-controller pair` writes into the state
          directory (`/var/lib/swarm-controller/control-identity.json`) is used when it is there;
          without either the API is reachable through the socket only (docs/swarm/remote.md).
        '';
      };

      requestsPerSecond = mkOption {
        type = types.ints.between 1 10000;
        default = 20;
        example = 50;
        description = ''
          Requests a second each paired client may send through the control plane
          (`SWARM_REMOTE_RATE`), with bursts of five seconds' worth; more are answered 429.
        '';
      };
    };

    reconcileInterval = mkOption {
      type = types.ints.positive;
      default = 60;
      example = 30;
      description = ''
        Seconds between reconcile passes (`SWARM_RECONCILE_EVERY`), which rewrite any per-agent
        schedule key that differs from the definitions.
      '';
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      (hyperhive.notInStore "services.hyperhive.deploy.swarm-controller.nats.credentialsFile" cfg.nats.credentialsFile)
      (hyperhive.notInStore "services.hyperhive.deploy.swarm-controller.nats.signingDir" cfg.nats.signingDir)
      (hyperhive.notInStore "services.hyperhive.deploy.swarm-controller.secretsKeyFile" cfg.secretsKeyFile)
      (hyperhive.notInStore "services.hyperhive.deploy.swarm-controller.deployKeyFile" cfg.deployKeyFile)
      (hyperhive.notInStore "services.hyperhive.deploy.swarm-controller.controlPlane.identityFile" cfg.controlPlane.identityFile)
    ]
    ++ map (f: hyperhive.notInStore (provisioningOption f.option) f.file) (builtins.filter (f: f.secret) provisioningFiles)
    ++ [
      (needs (prov.sso.url != null) "sso.url" (prov.sso.tokenFile != null)
        "${provisioningOption "sso.tokenFile"} is not: give the file holding swarm-authelia-bridge's bearer token (the bridge's own tokenFile)"
      )
      (needs (prov.forge.url != null) "forge.url" (prov.forge.adminTokenFile != null)
        "${provisioningOption "forge.adminTokenFile"} is not: give the file holding a forge site administrator's token"
      )
      (needs (prov.forge.url != null) "forge.url" (prov.forge.templateRepo != null)
        "${provisioningOption "forge.templateRepo"} is not: name the template repository (owner/name) agents' config repositories are generated from"
      )
      (needs (prov.matrix.url != null) "matrix.url" (prov.matrix.sharedSecretFile != null)
        "${provisioningOption "matrix.sharedSecretFile"} is not: give the file holding Synapse's registration_shared_secret"
      )
      (needs (prov.storeCa.keyFile != null) "storeCa.keyFile" (prov.storeCa.certFile != null)
        "${provisioningOption "storeCa.certFile"} is not: give the CA's certificate, store-ca.pem from `swarm-controller store-ca --out-dir DIR`"
      )
      (needs (prov.forge.org != null || prov.forge.webhookUrl != null) "forge.org or forge.webhookUrl"
        (prov.forge.url != null)
        "${provisioningOption "forge.url"} is not: the swarm's organisation and webhook are on that forge"
      )
      {
        assertion = prov.forge.templateRepo == null || isRepo prov.forge.templateRepo;
        message = ''
          ${provisioningOption "forge.templateRepo"} is "${toString prov.forge.templateRepo}", not
          owner/name: give the template repository as its owner and name, e.g. "hyperhive/agent-config".
        '';
      }
      {
        assertion = !provisions || cfg.secretsKeyFile != null;
        message = ''
          services.hyperhive.deploy.swarm-controller.provisioning is configured, but
          services.hyperhive.deploy.swarm-controller.secretsKeyFile is not set: every password, token
          and key the controller makes for an agent is sealed under that key. Make one with
          `swarm-controller secrets-key --out FILE` and set secretsKeyFile to it.
        '';
      }
      {
        assertion = !provisions || cfg.deployKeyFile != null;
        message = ''
          services.hyperhive.deploy.swarm-controller.provisioning is configured, but
          services.hyperhive.deploy.swarm-controller.deployKeyFile is not set: hives apply only deploy
          messages that key signed. Make one with `swarm-controller deploy-key --out FILE`, set
          deployKeyFile to it and pin the public key it prints on every hive (controllerKeys).
        '';
      }
      {
        assertion = !provisions || cfg.nats.signingDir != null;
        message = ''
          services.hyperhive.deploy.swarm-controller.provisioning is configured, but
          services.hyperhive.deploy.swarm-controller.nats.signingDir is not set: the controller mints
          each new agent's NATS credential with the signing keys there. Set it to the directory
          `swarm-controller nats init --out DIR` wrote.
        '';
      }
    ]
    ++ lib.mapAttrsToList (name: value: {
      assertion = isLifetime value;
      message = ''
        ${provisioningOption name} is "${value}": give a number and s, m, h or d, e.g. "24h".
      '';
    }) lifetimes
    ++ [
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
        SWARM_NATS_REPLICAS = toString cfg.nats.replicas;
        SWARM_RECONCILE_EVERY = "${toString cfg.reconcileInterval}s";
        # StateDirectory below: the controller's webhook secret, and the host identity when
        # `swarm-controller pair` wrote it there.
        SWARM_STATE_DIR = "/var/lib/swarm-controller";
        SWARM_REMOTE_RATE = toString cfg.controlPlane.requestsPerSecond;
      }
      // lib.optionalAttrs (cfg.socketRoles != { }) {
        SWARM_SOCKET_ROLES = lib.concatStringsSep "," (lib.mapAttrsToList (group: role: "${group}=${role}") cfg.socketRoles);
      }
      // lib.optionalAttrs (cfg.controlPlane.identityFile != null) {
        # LoadCredential below puts the identity here, readable by this unit only.
        SWARM_CONTROL_IDENTITY = "%d/control-identity";
      }
      // lib.optionalAttrs (cfg.nats.credentialsFile != null) {
        # LoadCredential below puts the credential here, readable by this unit only.
        SWARM_NATS_CREDS = "%d/nats-creds";
      }
      // lib.optionalAttrs (cfg.nats.signingDir != null) {
        SWARM_NATS_DIR = hyperhive.literalForSystemd (toString cfg.nats.signingDir);
      }
      // lib.optionalAttrs (cfg.secretsKeyFile != null) { SWARM_SECRETS_KEY_FILE = "%d/secrets-key"; }
      // lib.optionalAttrs (cfg.deployKeyFile != null) { SWARM_DEPLOY_KEY_FILE = "%d/deploy-key"; }
      // lib.optionalAttrs (hives != { }) { SWARM_HIVES_FILE = "${hivesFile}"; }
      // lib.optionalAttrs (cfg.quickLinks != [ ]) {
        SWARM_QUICK_LINKS_FILE = "${pkgs.writeText "swarm-quick-links.json" (builtins.toJSON cfg.quickLinks)}";
      }
      // lib.mapAttrs (_: hyperhive.literalForSystemd) (
        {
          SWARM_STORE_CERT_LIFETIME = prov.storeCertLifetime;
          SWARM_QUEUE_CREDS_LIFETIME = prov.queueCredsLifetime;
          SWARM_CREDENTIAL_CHECK_EVERY = prov.credentialCheckEvery;
          SWARM_JOBQ_CONCURRENCY = toString prov.jobConcurrency;
          SWARM_JOBQ_MAX_ATTEMPTS = toString prov.jobMaxAttempts;
        }
        // lib.optionalAttrs (prov.sso.url != null) { SWARM_SSO_BRIDGE_URL = prov.sso.url; }
        // lib.optionalAttrs (prov.forge.url != null) { SWARM_FORGE_URL = prov.forge.url; }
        // lib.optionalAttrs (prov.forge.templateRepo != null) { SWARM_FORGE_TEMPLATE_REPO = prov.forge.templateRepo; }
        // lib.optionalAttrs (prov.forge.url != null) { SWARM_FORGE_RECONCILE_EVERY = prov.forge.reconcileEvery; }
        // lib.optionalAttrs (prov.forge.org != null) { SWARM_FORGE_ORG = prov.forge.org; }
        // lib.optionalAttrs (prov.forge.webhookUrl != null) { SWARM_FORGE_WEBHOOK_URL = prov.forge.webhookUrl; }
        // lib.optionalAttrs (prov.matrix.url != null) { SWARM_MATRIX_URL = prov.matrix.url; }
      )
      # LoadCredential below puts each provisioning file here, readable by this unit only.
      // builtins.listToAttrs (map (f: lib.nameValuePair f.variable "%d/${f.name}") givenFiles);

      serviceConfig = hyperhive.serviceConfig // {
        ExecStart = "${lib.getExe cfg.package} serve";
        # A static user, so the socket's directory can belong to `group` and operators in it can
        # reach the socket.
        DynamicUser = false;
        User = "swarm-controller";
        Group = cfg.group;
        # It names each user of its socket from the kernel's peer credentials, and gives it a role
        # by its groups (`socketRoles`): in a private user namespace every other user reads as
        # nobody.
        PrivateUsers = false;
        LoadCredential =
          lib.optional (cfg.nats.credentialsFile != null) "nats-creds:${cfg.nats.credentialsFile}"
          ++ lib.optional (cfg.secretsKeyFile != null) "secrets-key:${cfg.secretsKeyFile}"
          ++ lib.optional (cfg.deployKeyFile != null) "deploy-key:${cfg.deployKeyFile}"
          ++ lib.optional (cfg.controlPlane.identityFile != null) "control-identity:${toString cfg.controlPlane.identityFile}"
          # A public file given as a Nix path literal (the CA's certificate) is copied to the store;
          # a secret never is (toString), and is refused as a path literal above.
          ++ map (f: "${f.name}:${if f.secret then toString f.file else "${f.file}"}") givenFiles;
        # The socket's directory: created by systemd, group-traversable, and kept across restarts so
        # clients holding its path never see it vanish; the daemon unlinks its own stale socket at
        # start (services/swarm-controller/README.md).
        RuntimeDirectory = runtimeDirectory;
        RuntimeDirectoryMode = "0750";
        RuntimeDirectoryPreserve = "yes";
        # /var/lib/swarm-controller: holds `webhook-secret` (32 bytes, 0600, made at the first
        # start and kept), which the forge's webhook deliveries are signed with.
        StateDirectory = "swarm-controller";
        StateDirectoryMode = "0700";
        # The signing directory is rewritten when a credential is revoked; the rest of the
        # system stays read-only.
        ReadWritePaths = lib.optional (cfg.nats.signingDir != null) (toString cfg.nats.signingDir);
      };
    };
  };
}
