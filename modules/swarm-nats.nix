# services.hyperhive.deploy.nats: one NATS node of the swarm (unit `hyperhive-nats.service`, so it
# never merges with nixpkgs' own services.nats, whose unit is `nats.service`), the swarm's
# bus and store: nats-server with JetStream, in decentralized JWT mode from the fragment
# `swarm-controller nats init` writes. One node on its own, or one of a cluster of three or more
# (`cluster.routes`), across which the controller keeps every stream and bucket in
# `services.hyperhive.deploy.swarm-controller.nats.replicas` copies.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  cfg = config.services.hyperhive.deploy.nats;
  hyperhive = import ./lib.nix { inherit lib pkgs; };
  inherit (lib) mkOption types;
  option = name: "services.hyperhive.deploy.nats.${name}";

  # JetStream's store and, in its `jwt` subdirectory, the full account resolver's directory: the
  # unit's StateDirectory, so both survive restarts. `nats init --resolver-dir` must name the
  # latter, since the fragment carries it.
  stateDir = "/var/lib/nats";
  resolverDir = "${stateDir}/jwt";

  clustered = cfg.cluster.routes != [ ];
  # nixpkgs' own NATS module, when the machine imports it.
  nixpkgsNats = config.services.nats or { };

  # The settings this module owns; the fragment (operator, system account, resolver, every
  # account preloaded) follows them in the same file.
  settings = pkgs.writeText "nats-server-settings.conf" (
    ''
      server_name: ${builtins.toJSON cfg.serverName}
      listen: "0.0.0.0:${toString cfg.port}"
      jetstream {
        store_dir: "${stateDir}"
        max_file_store: ${cfg.jetstream.maxFileStore}
      }
    ''
    + lib.optionalString clustered ''
      cluster {
        name: ${builtins.toJSON cfg.cluster.name}
        listen: "0.0.0.0:${toString cfg.cluster.port}"
        routes: [
      ${lib.concatStringsSep "\n" (map (route: "    ${builtins.toJSON route}") cfg.cluster.routes)}
        ]
      }
    ''
  );
  # Concatenated at build time: the fragment is usually a build output itself (reading it during
  # evaluation would be import from derivation), and nats-server's `include` takes only paths
  # relative to the including file.
  serverConf = pkgs.runCommand "nats-server.conf" { } ''
    cat ${settings} ${cfg.fragment} > "$out"
  '';
in
{
  options.services.hyperhive.deploy.nats = {
    enable = lib.mkEnableOption "one NATS node of the hyperhive swarm (nats-server with JetStream, JWT mode)";

    package = lib.mkPackageOption pkgs "nats-server" {
      example = "pkgs.nats-server";
    };

    serverName = mkOption {
      type = types.str;
      default = config.networking.hostName;
      defaultText = lib.literalExpression "config.networking.hostName";
      example = "nats1";
      description = ''
        The server's name (`server_name`), unique in the cluster: JetStream's Raft groups and
        `nats stream info` name their leader and replicas by it.
      '';
    };

    port = mkOption {
      type = types.port;
      default = 4222;
      example = 4222;
      description = ''
        The client port, on every address. Clients (the controller, hive-c0re, agents) list every
        node: `nats://nats1:4222,nats://nats2:4222,nats://nats3:4222`.
      '';
    };

    fragment = mkOption {
      type = types.path;
      example = lib.literalExpression "./swarm-nats/nats-server.conf";
      description = ''
        The server configuration fragment `swarm-controller nats init --out DIR --resolver-dir
        /var/lib/nats/jwt` wrote (`DIR/nats-server.conf`): the operator, the system account, the
        full account resolver and every account preloaded. It holds public JWTs only, so it may
        be in the Nix store (a path literal is copied there). Its resolver directory must be
        `/var/lib/nats/jwt`, inside this unit's state directory; the same fragment on every node.
      '';
    };

    jetstream.maxFileStore = mkOption {
      type = types.strMatching "[0-9]+([KMGT]B?)?";
      default = "8GB";
      example = "100GB";
      description = ''
        The most disk JetStream may use on this node (`max_file_store`), below /var/lib/nats. At
        least what swarm-controller's streams and buckets reserve on every node that holds a copy
        of them: 3.84 GiB (the TODO queue 1 GiB; DEPLOY, RELAY, TURNS and eight buckets 256 MiB
        each; AUDIT 64 MiB; forge-deliveries 32 MiB). A stream whose reservation does not fit is refused, and the controller does not
        start. A reservation, not disk in use.
      '';
    };

    cluster = {
      name = mkOption {
        type = types.str;
        default = "hyperhive";
        example = "swarm-eu";
        description = "The cluster's name, the same on every node (only with `cluster.routes`).";
      };
      port = mkOption {
        type = types.port;
        default = 6222;
        example = 6222;
        description = ''
          The port the nodes reach each other on (only with `cluster.routes`). Routes are not
          authenticated: keep this port reachable by the other nodes only (a private network or
          firewall rules).
        '';
      };
      routes = mkOption {
        type = types.listOf types.str;
        default = [ ];
        example = [
          "nats-route://nats1:6222"
          "nats-route://nats2:6222"
          "nats-route://nats3:6222"
        ];
        description = ''
          Every node of the cluster, this one included (nats-server skips its own route), the same
          list on every node. Empty: a single server, no cluster. Otherwise at least three: a
          JetStream cluster keeps working while a majority of its nodes is up, so only three or
          more survive losing one.
        '';
      };
    };

    openFirewall = mkOption {
      type = types.bool;
      default = false;
      example = true;
      description = "Open `port`, and `cluster.port` when clustered, in the firewall.";
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      {
        assertion = cfg.serverName != "";
        message = ''
          ${option "serverName"} is empty: give every NATS node a unique name (the default is
          networking.hostName, which is empty here).
        '';
      }
      {
        assertion = !clustered || builtins.length cfg.cluster.routes >= 3;
        message = ''
          ${option "cluster.routes"} lists ${toString (builtins.length cfg.cluster.routes)} node(s): a
          JetStream cluster needs a majority of its nodes up, so one or two nodes survive losing
          none, and two are worse than one. List three or more nodes (this one included, the same
          list on each), or none for a single server.
        '';
      }
      {
        # nixpkgs' services.nats may run beside this node (its own unit, nats.service), but not on
        # the same store directory or port.
        assertion =
          !(nixpkgsNats.enable or false)
          || (nixpkgsNats.dataDir != stateDir && !lib.elem nixpkgsNats.port ([ cfg.port ] ++ lib.optional clustered cfg.cluster.port));
        message = ''
          ${option "enable"} and services.nats.enable are both set, and services.nats uses
          ${if (nixpkgsNats.dataDir or "") == stateDir then "the same state directory, ${stateDir}" else "the same port, ${toString (nixpkgsNats.port or "")}"}:
          two nats-servers would share it. Give services.nats another dataDir and port, or run one NATS per machine.
        '';
      }
    ];

    networking.firewall.allowedTCPPorts =
      if cfg.openFirewall then [ cfg.port ] ++ lib.optional clustered cfg.cluster.port else [ ];

    systemd.services.hyperhive-nats = hyperhive.service // {
      description = "NATS node of the hyperhive swarm (nats-server ${cfg.serverName})";

      serviceConfig = hyperhive.serviceConfig // {
        ExecStart = "${lib.getExe cfg.package} -c ${serverConf}";
        # A reload re-reads the configuration (a new fragment restarts the unit: ExecStart changes).
        ExecReload = "${pkgs.coreutils}/bin/kill -HUP $MAINPID";
        # /var/lib/nats: JetStream's store and the resolver's directory jwt/, which nats-server
        # creates; the only place the server writes.
        StateDirectory = "nats";
        StateDirectoryMode = "0700";
        # JetStream keeps files open per stream and consumer (nixpkgs' services.nats sets the same).
        LimitNOFILE = 800000;
      };
    };
  };
}
