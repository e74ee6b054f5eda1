# Evaluates flake.nix's `outputs` (and nix/*.nix, and the three VM tests' definitions) with nixpkgs'
# own lib against a stand-in package set whose builders only record their arguments
# (stand-in-pkgs.nix), and returns named checks of what the flake exposes: the outputs
# docs/nixos.md lists, the one workspace build and its cargo flags, each package copying its own
# programs out of it with `meta.mainProgram` (swarmctl with swarm-controller), the hive-side bundle
# (hive-agent and hive-c0re, its closure without swarm-controller), the overlay, the modules, the
# checks (every package, the cargo tests with their inputs and skips, the three VM tests with their
# nodes, the swarm test's NATS cluster and hives under hive-c0re, the provisioning test's services
# and controller settings), the dev shell's tools and the formatter. default.nix runs these with
# the module checks; nothing here builds anything.
let
  b = builtins;
  systems = [
    "x86_64-linux"
    "aarch64-linux"
  ];

  inherit (import ./stand-in-pkgs.nix) lib pkgsFor;

  nixpkgs = {
    inherit lib;
    legacyPackages = lib.genAttrs systems pkgsFor;
  };
  outputs = (import ../../../flake.nix).outputs {
    self = outputs;
    inherit nixpkgs;
  };

  names = set: b.attrNames set;
  hasArgs = list: sub: b.any (i: b.genList (j: b.elemAt list (i + j)) (b.length sub) == sub) (
    b.genList (i: i) (b.length list - b.length sub + 1)
  );
  names' = map (p: p.name);

  perSystem =
    system:
    let
      pkgs = nixpkgs.legacyPackages.${system};
      packages = outputs.packages.${system};
      checks = outputs.checks.${system};
      daemon = name: packages.${name}.attrs.cargoBuildFlags;
      vm = name: checks.${name}.test { inherit pkgs lib; };
      controlPlane = vm "vm-control-plane";
      swarm = vm "vm-swarm";
      provisioning = vm "vm-provisioning";
      proxyCaddyfile = ((controlPlane.nodes.proxy { }).services.caddy.configFile).text;
      shellTools = names' outputs.devShells.${system}.default.attrs.packages;
    in
    {
      "${system}: packages are exactly agents-control, swarm-controller, hive-agent, hive-c0re, swarm-authelia-bridge, daemon-bins, default" =
        names packages == [
          "agents-control"
          "daemon-bins"
          "default"
          "hive-agent"
          "hive-c0re"
          "swarm-authelia-bridge"
          "swarm-controller"
        ];
      "${system}: each package is its own derivation with meta.mainProgram" =
        b.all (name: packages.${name}.type == "derivation" && packages.${name}.meta ? mainProgram) (names packages)
        && packages.agents-control.meta.mainProgram == "agents-control"
        && packages.swarm-controller.meta.mainProgram == "swarm-controller"
        && packages.hive-agent.meta.mainProgram == "hive-agent"
        && packages.hive-c0re.meta.mainProgram == "hive-c0re"
        && packages.swarm-authelia-bridge.meta.mainProgram == "swarm-authelia-bridge";
      "${system}: one workspace build builds every program once; each package copies exactly its programs out of it and never refers to it; swarmctl ships with swarm-controller" =
        let
          build = packages.swarm-controller.workspaceBuild;
          flags = build.attrs.cargoBuildFlags;
          programs = name: packages.${name}.programs;
          copies = name: packages.${name}.env.buildCommand;
        in
        b.all (name: packages.${name}.workspaceBuild == build) [
          "agents-control"
          "hive-agent"
          "hive-c0re"
          "swarm-authelia-bridge"
        ]
        && build.name == "hyperhive-workspace-0.1.0"
        && !build.attrs.doCheck
        && b.all (program: hasArgs flags [ "--package" program "--bin" program ]) [
          "agents-control"
          "swarm-controller"
          "swarmctl"
          "hive-agent"
          "hive-c0re"
          "swarm-authelia-bridge"
        ]
        && b.length flags == 24
        && programs "swarm-controller" == [
          "swarm-controller"
          "swarmctl"
        ]
        && programs "hive-c0re" == [ "hive-c0re" ]
        && lib.hasInfix "cp ${build}/bin/swarmctl \"$out/bin/\"" (copies "swarm-controller")
        && !(lib.hasInfix "swarmctl" (copies "hive-agent"))
        && b.all (name: packages.${name}.env.disallowedReferences == [ build ]) [
          "agents-control"
          "swarm-controller"
          "hive-agent"
          "hive-c0re"
          "swarm-authelia-bridge"
        ];
      "${system}: daemon-bins holds the hive-side daemons, hive-agent and hive-c0re; its closure holds no swarm-controller, which Nix is told to refuse" =
        names' packages.daemon-bins.paths == [
          "hive-agent-0.1.0"
          "hive-c0re-0.1.0"
        ]
        && lib.concatMap (package: package.programs) packages.daemon-bins.paths == [
          "hive-agent"
          "hive-c0re"
        ]
        && names' packages.daemon-bins.env.disallowedRequisites == [
          "swarm-controller-0.1.0"
          "hyperhive-workspace-0.1.0"
        ];
      "${system}: default is every package" =
        names' packages.default.paths == [
          "agents-control-0.1.0"
          "swarm-controller-0.1.0"
          "hive-agent-0.1.0"
          "hive-c0re-0.1.0"
          "swarm-authelia-bridge-0.1.0"
        ];
      # The cargo tests' inputs are every program the tests run (the test kit's `Tool` list, which
      # crates/testkit/tests/nix_check_inputs.rs compares with them), and the sandbox's skips.
      "${system}: checks are every package, the cargo tests and the three VM tests" =
        names checks == [
          "agents-control"
          "cargo-tests"
          "daemon-bins"
          "hive-agent"
          "hive-c0re"
          "swarm-authelia-bridge"
          "swarm-controller"
          "vm-control-plane"
          "vm-provisioning"
          "vm-swarm"
        ]
        && checks.cargo-tests.attrs.doCheck
        && names' checks.cargo-tests.attrs.nativeCheckInputs == [
          "nats-server"
          "python3-with-moto"
          "seaweedfs"
          "caddy"
          "nginx"
          "matrix-synapse"
          "chromium"
          "chromedriver"
          "curl"
          "openssl"
          "procps"
        ]
        && lib.hasInfix "--skip needs_root:: --skip needs_nix::" checks.cargo-tests.attrs.checkPhase;
      "${system}: the control-plane VM test has minio, cp1..cp3, proxy and client" =
        names controlPlane.nodes == [
          "client"
          "cp1"
          "cp2"
          "cp3"
          "minio"
          "proxy"
        ];
      "${system}: its proxy runs deploy/Caddyfile, failing open, for the host proxy" =
        lib.hasInfix "https://proxy {" proxyCaddyfile
        && lib.hasInfix "health_uri /readyz" proxyCaddyfile
        && lib.hasInfix "handle_errors 503" proxyCaddyfile;
      "${system}: the swarm VM test has nats1, nats2, nats3, controller, hive1, hive2 and minio" =
        names swarm.nodes == [
          "controller"
          "hive1"
          "hive2"
          "minio"
          "nats1"
          "nats2"
          "nats3"
        ]
        && (swarm.nodes.controller { }).services.hyperhive.deploy.agents-control.store.endpoint == "http://minio:9000"
        && lib.hasInfix "agents-control code --host" swarm.testScript
        && lib.hasInfix "swarmctl schedule add" swarm.testScript
        && lib.hasInfix "start_all()" controlPlane.testScript;
      "${system}: its NATS is a three-node cluster (services.hyperhive.deploy.nats), every client lists the three, the controller keeps three copies" =
        let
          url = "nats://nats1:4222,nats://nats2:4222,nats://nats3:4222";
          routes = [
            "nats-route://nats1:6222"
            "nats-route://nats2:6222"
            "nats-route://nats3:6222"
          ];
          controller = (swarm.nodes.controller { }).services.hyperhive.deploy.swarm-controller;
          hive = name: (swarm.nodes.${name} { }).services.hyperhive;
        in
        b.all (
          name:
          let
            node = (swarm.nodes.${name} { }).services.hyperhive.deploy.nats;
          in
          node.enable
          && node.serverName == name
          && node.cluster.routes == routes
          && lib.hasInfix "-swarm-nats-init/nats-server.conf" node.fragment
        ) [
          "nats1"
          "nats2"
          "nats3"
        ]
        && controller.nats.url == url
        && controller.nats.replicas == 3
        && b.all (
          name:
          (hive name).deploy.hive-controller.nats.url == url
          && b.all (agent: agent.nats.url == url) (b.attrValues (hive name).agents)
        ) [
          "hive1"
          "hive2"
        ]
        && b.all (text: lib.hasInfix text swarm.testScript) [
          "stream info KV_agent-schedules --json"
          "succeed(\"systemctl stop hyperhive-nats.service\")"
          "succeed(\"systemctl start hyperhive-nats.service\")"
        ];
      "${system}: its hives run hive-c0re (systemd runner) with their agent declared, and the controller knows both hives" =
        let
          hive = name: (swarm.nodes.${name} { }).services.hyperhive;
          controller = (swarm.nodes.controller { }).services.hyperhive;
        in
        b.all (
          pair:
          let
            h = hive pair.node;
          in
          h.deploy.hive-controller.enable
          && h.deploy.hive-controller.hive == pair.node
          && h.deploy.hive-controller.runner == "systemd"
          && names h.agents == [ pair.agent ]
        ) [
          {
            node = "hive1";
            agent = "alpha";
          }
          {
            node = "hive2";
            agent = "beta";
          }
        ]
        && names controller.swarm.hives == [
          "hive1"
          "hive2"
        ]
        && controller.deploy.swarm-controller.nats.signingDir == "/var/lib/swarm-nats"
        && b.all (verb: lib.hasInfix verb swarm.testScript) [
          "swarmctl hives"
          "swarmctl hives status"
          "swarmctl agent state hive1 alpha paused"
          "swarmctl agent state hive1 alpha offline"
          "swarmctl agent state hive1 alpha up"
        ];
      "${system}: the provisioning VM test has controller, hive1 and services; services runs Forgejo, Synapse and the SSO bridge" =
        let
          services = provisioning.nodes.services { };
        in
        names provisioning.nodes == [
          "controller"
          "hive1"
          "services"
        ]
        && services.services.forgejo.enable
        && services.services.forgejo.database.type == "sqlite3"
        && services.services.matrix-synapse.enable
        && services.services.matrix-synapse.settings.database.name == "sqlite3"
        && services.services.matrix-synapse.settings.registration_shared_secret_path == "/etc/synapse/registration-secret"
        && services.services.hyperhive.deploy.authelia-bridge.enable
        && services.services.hyperhive.deploy.authelia-bridge.openFirewall;
      "${system}: its controller sets every provisioning option, its hive has an xkey, its script creates, checks and starts an agent" =
        let
          controller = (provisioning.nodes.controller { }).services.hyperhive;
          prov = controller.deploy.swarm-controller.provisioning;
          hive = (provisioning.nodes.hive1 { }).services.hyperhive.deploy.hive-controller;
        in
        prov.sso.url == "http://services:9092"
        && prov.sso.tokenFile != null
        && prov.forge.url == "http://services:3000"
        && prov.forge.adminTokenFile != null
        && prov.forge.templateRepo == "swarm-admin/agent-config"
        && prov.matrix.url == "http://services:8008"
        && prov.matrix.sharedSecretFile != null
        && prov.storeCa.keyFile != null
        && prov.storeCa.certFile != null
        && b.all (lifetime: b.match "[0-9]+[smhd]" lifetime != null) [
          prov.storeCertLifetime
          prov.queueCredsLifetime
          prov.credentialCheckEvery
        ]
        && controller.deploy.swarm-controller.secretsKeyFile != null
        && controller.deploy.swarm-controller.nats.signingDir == "/var/lib/swarm-nats"
        && controller.swarm.hives.hive1.xkey != null
        && hive.enable
        && hive.hive == "hive1"
        && hive.xkeyFile != null
        && b.all (text: lib.hasInfix text provisioning.testScript) [
          "swarmctl agent create gamma --hive hive1 --spec-file /etc/hyperhive/gamma-spec.json --wait"
          "swarmctl jobs --agent gamma --json"
          "\"template\": True"
          "/_synapse/admin/v2/users/@gamma:matrix.test"
          "swarmctl agents --json"
          "swarmctl agent state hive1 gamma up"
          "swarmctl schedule add --json"
        ];
      "${system}: the dev shell has the toolchain, nats-server, minio, caddy, seaweedfs, synapse and openssl" =
        b.all (t: b.elem t shellTools) [
          "cargo"
          "rustc"
          "nats-server"
          "minio"
          "caddy"
          "seaweedfs"
          "matrix-synapse"
          "openssl"
        ];
      "${system}: a formatter" = outputs.formatter.${system}.name == "nixfmt-tree";
      "${system}: the overlay gives pkgs.hyperhive built with the nixpkgs it is applied to" =
        let
          applied = outputs.overlays.default pkgs pkgs;
        in
        applied.hyperhive.agents-control.meta.mainProgram == "agents-control"
        && names' applied.hyperhive.daemon-bins.paths == [
          "hive-agent-0.1.0"
          "hive-c0re-0.1.0"
        ];
    };
in
{
  "the flake's outputs are packages, overlays, nixosModules, checks, devShells, formatter" =
    names outputs == [
      "checks"
      "devShells"
      "formatter"
      "nixosModules"
      "overlays"
      "packages"
    ];
  "nixosModules are agents-control, swarm-controller, swarm-nats, hive-agent, hive-c0re, swarm-authelia-bridge, hive-gateway and default, each a file here" =
    names outputs.nixosModules == [
      "agents-control"
      "default"
      "hive-agent"
      "hive-c0re"
      "hive-gateway"
      "swarm-authelia-bridge"
      "swarm-controller"
      "swarm-nats"
    ]
    && b.all (name: b.pathExists outputs.nixosModules.${name}) (names outputs.nixosModules);
  "the flake's only input is nixpkgs" = names (import ../../../flake.nix).inputs == [ "nixpkgs" ];
}
// b.foldl' (all: system: all // perSystem system) { } systems
