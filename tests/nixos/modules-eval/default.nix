# Evaluates the hyperhive NixOS modules (modules/*.nix) with nixpkgs' own lib and module system
# (lib.evalModules: types, merging, priorities), beside the NixOS options they use as
# ../model declares them, with ../model/pkgs.nix's packages, and checks what they produce: the
# environment each daemon reads (the fixed names of docs/architecture.md), the credentials, the
# socket directory, the hardening, hive-c0re's declared agents file and the controller's hive
# directory file (their JSON content, as crates/hive-proto reads it, from the files Nix built), the
# NATS node's generated nats-server configuration (one server, a cluster member) and its unit beside
# nixpkgs' own services.nats, that every option has a description and an example and a row in
# docs/nixos.md, and that each assertion refuses the bad configuration it is written for.
# ./broken.nix holds the configurations nixpkgs' module system itself must refuse.
#
# It builds the files it reads (import from derivation), so it runs against a store of its own:
#
#   python3 tests/nixos/modules-eval/run.py     # prints true, or the failures
#
# With flake-outputs.nix it also evaluates flake.nix's outputs (packages, overlay, modules, checks
# and the three VM tests' definitions, dev shell, formatter) against a stand-in package set.
let
  b = builtins;
  lib = import ../model/nixpkgs-lib.nix;
  pkgs = import ../model/pkgs.nix { inherit lib; };
  evalMachine = import ../model/eval.nix;

  # Every module with `values` under services.hyperhive, the given other units, and more modules.
  evaluate =
    {
      values,
      otherUnits ? { },
      modules ? [ ],
    }:
    let
      machine = evalMachine {
        hostName = "cp1";
        modules = [
          ../../../modules
          {
            services.hyperhive = values;
            systemd.services = otherUnits;
          }
        ]
        ++ modules;
      };
      inherit (machine) config;
    in
    {
      inherit config;
      inherit (machine) options;
      # NixOS gives every unit a PATH (its `path` packages and coreutils, findutils, grep, sed,
      # systemd); the checks below compare what the modules set, and read PATH on its own.
      units = b.mapAttrs (_: unit: unit // { environment = b.removeAttrs unit.environment [ "PATH" ]; }) config.systemd.services;
      paths = b.mapAttrs (_: unit: unit.environment.PATH) config.systemd.services;
      packages = config.environment.systemPackages;
      failed = map (a: a.message) (b.filter (a: !a.assertion) config.assertions);
      ports = config.networking.firewall.allowedTCPPorts;
      inherit (config) users;
    };

  copy = {
    enable = true;
    store = {
      url = "s3://hyperhive/control";
      endpoint = "http://minio:9000";
      pathStyle = true;
    };
    keyFile = "/run/secrets/control-key";
    environmentFile = "/run/secrets/bucket.env";
    url = "https://agents.example.com";
    name = "100% test";
    openFirewall = true;
  };
  controller = {
    enable = true;
    nats = {
      url = "nats://nats:4222";
      credentialsFile = "/run/secrets/controller.creds";
    };
  };
  # The controller with every provisioning setting (the CA's certificate is public, so a store
  # path is accepted for it), and a helper changing some of them.
  provisioning = {
    sso = {
      url = "http://127.0.0.1:9092";
      tokenFile = "/run/secrets/authelia-bridge-token";
    };
    forge = {
      url = "https://forge.example";
      adminTokenFile = "/run/secrets/forge-admin-token";
      templateRepo = "hyperhive/agent-config";
      org = "hyperhive";
      webhookUrl = "https://swarm.example/api/forge/webhook";
      reconcileEvery = "2m";
    };
    matrix = {
      url = "https://matrix.example";
      sharedSecretFile = "/run/secrets/synapse-registration-secret";
    };
    storeCa = {
      keyFile = "/run/secrets/store-ca.key";
      certFile = "${b.storeDir}/00000000000000000000000000000000-store-ca.pem";
    };
    storeCertLifetime = "12h";
    queueCredsLifetime = "6h";
    credentialCheckEvery = "1m";
    jobConcurrency = 4;
    jobMaxAttempts = 3;
  };
  provisioner = controller // {
    nats = controller.nats // { signingDir = "/var/lib/swarm-nats"; };
    secretsKeyFile = "/run/secrets/swarm-secrets.key";
    deployKeyFile = "/run/secrets/swarm-deploy.key";
    inherit provisioning;
  };
  provisionedWith = settings: { deploy.swarm-controller = provisioner // { provisioning = lib.recursiveUpdate provisioning settings; }; };
  # The start of each provisioning refusal.
  prov = "swarm-controller.provisioning";
  agent = {
    nats.url = "nats://nats:4222";
    credentialsFile = "/run/secrets/alpha.creds";
    turnCommand = "printf '%s\\n' done";
  };
  bridge = {
    enable = true;
    tokenFile = "/run/secrets/authelia-bridge-token";
  };
  gateway = {
    enable = true;
    serverName = "swarm.example.com";
    sso = {
      authRequestUrl = "http://127.0.0.1:9091/api/authz/auth-request";
      signInUrl = "https://auth.example.com/";
    };
    roles = {
      swarm-viewers = "viewer";
      swarm-admins = "admin";
    };
  };
  # The gateway without SSO: no SSO user, so no roles.
  openGateway = gateway // {
    sso = {
      authRequestUrl = null;
      signInUrl = null;
    };
    roles = { };
  };
  good = {
    deploy.agents-control = copy;
    deploy.swarm-controller = controller;
    deploy.authelia-bridge = bridge;
    deploy.hive-gateway = gateway;
    agents.alpha = agent;
    agents.off = agent // { enable = false; };
  };

  # The controller's public deploy key, as `swarm-controller deploy-key` prints one.
  deployKey = "VA3TQBLDJYOGC2ZHIJY7MHVY2WANZ2JEWN5DDHE2KR53AYNXSUMBLT2G";
  # A hive under hive-c0re: the agents above, one more with packages and its own timings.
  hiveController = {
    enable = true;
    hive = "hive1";
    nats = {
      url = "nats://nats:4222";
      credentialsFile = "/run/secrets/hive1.creds";
    };
    xkeyFile = "/run/secrets/hive1.xk";
    controllerKeys = [ deployKey ];
  };
  beta = agent // {
    credentialsFile = "/run/secrets/beta.creds";
    turnCommand = "claude --print";
    scheduleTick = "2s";
    turnTimeout = "3h";
    path = [ pkgs.git ];
    environmentFile = "/run/secrets/beta.env";
  };
  hived = good // {
    deploy = good.deploy // { hive-controller = hiveController; };
    agents = good.agents // { inherit beta; };
  };
  # The controller with a hive directory and its signing directory.
  hiveKey = "XCYG6V7IERXDY7O2N64AXQWT2EYE4MCVS2LHP3QYHHHCBPOVEQZXPZYU";
  directory = good // {
    swarm.hives = {
      hive1 = {
        description = "GPU box";
        labels.gpu = "yes";
        xkey = hiveKey;
      };
      hive2 = { };
    };
    deploy = good.deploy // {
      swarm-controller = controller // { nats = controller.nats // { signingDir = "/var/lib/swarm-nats"; }; };
    };
  };

  # A NATS node of the swarm: on its own, and the second of a three-node cluster.
  # A fragment as `swarm-controller nats init` writes one (its text does not matter here).
  fragmentText = "# the fragment: operator, system account, resolver, accounts\n";
  fragment = pkgs.writeText "nats-server.conf" fragmentText;
  natsNode = {
    enable = true;
    inherit fragment;
  };
  routes = [
    "nats-route://nats1:6222"
    "nats-route://nats2:6222"
    "nats-route://nats3:6222"
  ];
  natsClustered = natsNode // {
    serverName = "nats2";
    cluster.routes = routes;
    openFirewall = true;
  };

  # One bad setting on top of `good` (or of `base`), and a text the refusal must contain.
  refusals = [
    {
      change.deploy = good.deploy // {
        hive-gateway = gateway // { sso = gateway.sso // { authRequestUrl = null; }; roles = { }; };
      };
      expect = "sso.authRequestUrl and sso.signInUrl go together";
    }
    {
      change.deploy = good.deploy // { hive-gateway = gateway // { roles = { }; }; };
      expect = "hive-gateway.roles is empty: behind SSO every user's role comes";
    }
    {
      change.deploy = good.deploy // { hive-gateway = openGateway // { inherit (gateway) roles; }; };
      expect = "hive-gateway.roles maps SSO groups, but sso.authRequestUrl is";
    }
    {
      change.deploy = good.deploy // { hive-gateway = gateway // { roles."swarm admins" = "admin"; }; };
      expect = "`_`, `-` or `.`: swarm admins.";
    }
    {
      change.deploy = good.deploy // { swarm-controller = controller // { enable = false; }; };
      expect = "hive-gateway proxies the swarm-controller's socket";
    }
    {
      change.deploy.authelia-bridge = bridge // { tokenFile = ./default.nix; };
      expect = "authelia-bridge.tokenFile is in the Nix store, or is a Nix path literal";
    }
    {
      change.deploy.authelia-bridge = bridge // { usersFile = "${b.storeDir}/00000000000000000000000000000000-users.yml"; };
      expect = "authelia-bridge.usersFile is ${b.storeDir}/";
    }
    {
      change.deploy.authelia-bridge = bridge // { user = "root"; };
      expect = "authelia-bridge.user is root";
    }
    {
      change.deploy.agents-control = copy // { keyFile = "${b.storeDir}/00000000000000000000000000000000-key"; };
      expect = "agents-control.keyFile is in the Nix store";
    }
    {
      change.deploy.agents-control = copy // { environmentFile = ./default.nix; };
      expect = "agents-control.environmentFile is in the Nix store, or is a Nix path literal";
    }
    {
      change.deploy.agents-control = copy // {
        store = copy.store // { credentialsFile = "${b.storeDir}/00000000000000000000000000000000-bucket"; };
      };
      expect = "agents-control.store.credentialsFile is in the Nix store";
    }
    {
      change.deploy.agents-control = copy // { store.url = "file:///srv/agents"; };
      expect = "must be below /var/lib/agents-control/";
    }
    {
      change.deploy.swarm-controller = controller // { socketPath = "/run/hyperhive/controller.sock"; };
      expect = "/run/hyperhive\nis a directory other sockets share";
    }
    {
      change.deploy.swarm-controller = controller // { socketPath = "/run/nats/controller.sock"; };
      otherUnits.nats.serviceConfig.RuntimeDirectory = "nats";
      expect = "is also the runtime directory of nats";
    }
    {
      change.deploy.swarm-controller = controller // { nats.credentialsFile = ./default.nix; };
      expect = "nats.credentialsFile is in the Nix store";
    }
    {
      change.agents.Alpha = agent;
      expect = "\"Alpha\" is not an agent name";
    }
    {
      change.agents.alpha = agent // { credentialsFile = "${b.storeDir}/00000000000000000000000000000000-alpha.creds"; };
      expect = "agents.alpha.credentialsFile is in the Nix store";
    }
    {
      base = hived;
      change.deploy.hive-controller = hiveController // { hive = "Hive1"; };
      expect = "hive-controller.hive: \"Hive1\" is not a hive name";
    }
    {
      base = hived;
      change.deploy.hive-controller = hiveController // {
        nats = hiveController.nats // { credentialsFile = "${b.storeDir}/00000000000000000000000000000000-hive1.creds"; };
      };
      expect = "hive-controller.nats.credentialsFile is in the Nix store";
    }
    {
      base = hived;
      change.deploy.hive-controller = hiveController // { xkeyFile = ./default.nix; };
      expect = "hive-controller.xkeyFile is in the Nix store, or is a Nix path literal";
    }
    {
      base = hived;
      change.deploy.hive-controller = hiveController // { controllerKeys = [ ]; };
      expect = "hive-controller.xkeyFile is set but controllerKeys is empty";
    }
    {
      base = hived;
      change.deploy.hive-controller = hiveController // { statusInterval = 31; };
      expect = "hive-controller.statusInterval is 31 seconds; it must be 1 to 30";
    }
    {
      base = hived;
      change.agents.alpha = agent // { environmentFile = "${b.storeDir}/00000000000000000000000000000000-alpha.env"; };
      expect = "agents.alpha.environmentFile is in the Nix store";
    }
    {
      base = hived;
      change.agents.alpha = agent // { nats.url = "nats://elsewhere:4222"; };
      expect = "agents.alpha.nats.url is nats://elsewhere:4222, but under hive-c0re every";
    }
    {
      change.swarm.hives.Hive1 = { };
      expect = "swarm.hives.Hive1: \"Hive1\" is not a hive name";
    }
    {
      change.deploy.swarm-controller = controller // {
        nats = controller.nats // { signingDir = "${b.storeDir}/00000000000000000000000000000000-nats"; };
      };
      expect = "swarm-controller.nats.signingDir is in the Nix store";
    }
    {
      change.deploy.swarm-controller = controller // { secretsKeyFile = ./default.nix; };
      expect = "swarm-controller.secretsKeyFile is in the Nix store";
    }
    {
      change.deploy = good.deploy // {
        swarm-controller = controller // { controlPlane.identityFile = ./default.nix; };
      };
      expect = "swarm-controller.controlPlane.identityFile is in the Nix store";
    }
    {
      change.deploy = good.deploy // { swarm-controller = provisioner // { deployKeyFile = null; }; };
      expect = "swarm-controller.deployKeyFile is not set: hives apply only deploy";
    }
    {
      change = provisionedWith { sso.tokenFile = null; };
      expect = "${prov}.sso.url is set, but services.hyperhive.deploy.${prov}.sso.tokenFile is not";
    }
    {
      change = provisionedWith { forge.adminTokenFile = null; };
      expect = "${prov}.forge.url is set, but services.hyperhive.deploy.${prov}.forge.adminTokenFile is not";
    }
    {
      change = provisionedWith { forge.templateRepo = null; };
      expect = "${prov}.forge.url is set, but services.hyperhive.deploy.${prov}.forge.templateRepo is not";
    }
    {
      change = provisionedWith { matrix.sharedSecretFile = null; };
      expect = "${prov}.matrix.url is set, but services.hyperhive.deploy.${prov}.matrix.sharedSecretFile is not";
    }
    {
      change = provisionedWith { storeCa.certFile = null; };
      expect = "${prov}.storeCa.keyFile is set, but services.hyperhive.deploy.${prov}.storeCa.certFile is not";
    }
    {
      change = provisionedWith { forge.templateRepo = "agent-config"; };
      expect = "${prov}.forge.templateRepo is \"agent-config\", not\nowner/name";
    }
    {
      change = provisionedWith { forge.templateRepo = "hyperhive/agent config"; };
      expect = "${prov}.forge.templateRepo is \"hyperhive/agent config\", not\nowner/name";
    }
    {
      change = provisionedWith { forge.url = null; forge.adminTokenFile = null; forge.templateRepo = null; };
      expect = "${prov}.forge.org or forge.webhookUrl is set, but services.hyperhive.deploy.${prov}.forge.url is not";
    }
    {
      change = provisionedWith { forge.reconcileEvery = "often"; };
      expect = "${prov}.forge.reconcileEvery is \"often\": give a number and s, m, h or d";
    }
    {
      change = provisionedWith { storeCertLifetime = "1 day"; };
      expect = "${prov}.storeCertLifetime is \"1 day\": give a number and s, m, h or d";
    }
    {
      change = provisionedWith { queueCredsLifetime = "24"; };
      expect = "${prov}.queueCredsLifetime is \"24\": give a number and s, m, h or d";
    }
    {
      change = provisionedWith { credentialCheckEvery = "5min"; };
      expect = "${prov}.credentialCheckEvery is \"5min\": give a number and s, m, h or d";
    }
    {
      change.deploy.swarm-controller = provisioner // { secretsKeyFile = null; };
      expect = "provisioning is configured, but\nservices.hyperhive.deploy.swarm-controller.secretsKeyFile is not set";
    }
    {
      change.deploy.swarm-controller = provisioner // { nats = controller.nats; };
      expect = "provisioning is configured, but\nservices.hyperhive.deploy.swarm-controller.nats.signingDir is not set";
    }
    {
      change = provisionedWith { sso.tokenFile = ./default.nix; };
      expect = "${prov}.sso.tokenFile is in the Nix store, or is a Nix path literal";
    }
    {
      change = provisionedWith { forge.adminTokenFile = "${b.storeDir}/00000000000000000000000000000000-forge-token"; };
      expect = "${prov}.forge.adminTokenFile is in the Nix store";
    }
    {
      change = provisionedWith { matrix.sharedSecretFile = "${b.storeDir}/00000000000000000000000000000000-synapse-secret"; };
      expect = "${prov}.matrix.sharedSecretFile is in the Nix store";
    }
    {
      change = provisionedWith { storeCa.keyFile = ./default.nix; };
      expect = "${prov}.storeCa.keyFile is in the Nix store, or is a Nix path literal";
    }
    {
      change.deploy = good.deploy // { nats = natsClustered // { cluster.routes = b.tail routes; }; };
      expect = "nats.cluster.routes lists 2 node(s): a\nJetStream cluster needs a majority of its nodes up";
    }
    {
      change.deploy = good.deploy // { nats = natsClustered // { cluster.routes = [ "nats-route://nats1:6222" ]; }; };
      expect = "nats.cluster.routes lists 1 node(s)";
    }
    {
      change.deploy = good.deploy // { nats = natsNode // { serverName = ""; }; };
      expect = "services.hyperhive.deploy.nats.serverName is empty";
    }
  ];

  ok = evaluate { values = good; };
  copyUnit = ok.units.agents-control;
  # The bucket keys as a shared credentials file instead of an environment file.
  withKeyFile = evaluate {
    values = good // {
      deploy.agents-control = copy // {
        environmentFile = null;
        store = copy.store // { credentialsFile = "/run/secrets/bucket"; };
      };
    };
  };
  keyFileUnit = withKeyFile.units.agents-control;
  adminText = result: (b.head (b.filter (p: p.name == "agents-control") result.packages)).text;
  controllerUnit = ok.units.swarm-controller;
  quickLinks = [
    {
      title = "Forge";
      url = "https://forge.example.com/swarm";
    }
  ];
  withLinks = evaluate { values = good // { deploy = good.deploy // { swarm-controller = controller // { inherit quickLinks; }; }; }; };
  withSecretsKey = evaluate {
    values = good // {
      deploy.swarm-controller = controller // { secretsKeyFile = "/run/secrets/swarm-secrets.key"; };
    };
  };
  provisioned = evaluate { values = good // { deploy.swarm-controller = provisioner; }; };
  provisionedUnit = provisioned.units.swarm-controller;
  # Only the store CA: the other systems' variables and files stay out.
  storeOnly = evaluate {
    values = good // provisionedWith {
      sso.url = null;
      sso.tokenFile = null;
      forge.url = null;
      forge.adminTokenFile = null;
      forge.templateRepo = null;
      forge.org = null;
      forge.webhookUrl = null;
      matrix.url = null;
      matrix.sharedSecretFile = null;
    };
  };
  bridgeUnit = ok.units.swarm-authelia-bridge;
  agentUnit = ok.units.hive-agent-alpha;
  swarmctl = b.head (b.filter (p: p.name == "swarmctl-0.1.0") ok.packages);

  # A file a unit is given: its store path and its JSON, read from the file Nix built.
  written = value: {
    path = value;
    json = b.fromJSON (b.unsafeDiscardStringContext (b.readFile value));
  };
  hiveOk = evaluate { values = hived; };
  c0reUnit = hiveOk.units.hive-c0re;
  agentsFile = written c0reUnit.environment.HIVE_C0RE_AGENTS_FILE;
  withHive = settings: evaluate { values = hived // { deploy.hive-controller = hiveController // settings; }; };
  directoryOk = evaluate { values = directory; };

  # The NATS node's unit, and its configuration file's text (runCommand above: what follows the
  # store path in ExecStart is the build script, with the settings file's text inside it).
  natsAlone = evaluate { values.deploy.nats = natsNode; };
  natsMember = evaluate { values.deploy.nats = natsClustered; };
  natsCommand = result: result.units.hyperhive-nats.serviceConfig.ExecStart;
  natsConf = result: b.readFile (lib.last (lib.splitString " " (natsCommand result)));
  directoryUnit = directoryOk.units.swarm-controller;
  hivesFile = written directoryUnit.environment.SWARM_HIVES_FILE;

  # Every option declared under services.hyperhive, an agent's submodule options included
  # (`<name>` in their path), as nixpkgs' manual lists them.
  declared = b.filter (o: lib.hasPrefix "services.hyperhive." o.name && o.visible && !o.internal) (
    lib.optionAttrSetToDocList ok.options
  );
  isSubmodules = o: lib.hasSuffix "(submodule)" o.type;
  # Options the manual would show without a description or an example (each must be documented
  # with both).
  undocumented = map (o: o.name) (b.filter (o: (o.description or null) == null || o.description == "" || !(o ? example)) declared);

  # docs/nixos.md has a table row for every option, named relative to its section's prefix.
  sections = [
    "services.hyperhive.deploy.agents-control."
    "services.hyperhive.deploy.swarm-controller."
    "services.hyperhive.deploy.nats."
    "services.hyperhive.deploy.hive-controller."
    "services.hyperhive.swarm.hives.<name>."
    "services.hyperhive.agents.<name>."
    "services.hyperhive.c0re."
    "services.hyperhive.deploy.authelia-bridge."
    "services.hyperhive.deploy.hive-gateway."
  ];
  relative = path: b.foldl' (rest: prefix: lib.removePrefix prefix rest) path sections;
  guide = b.readFile ../../../docs/nixos.md;
  # An attribute set of submodules (the agents) is the heading of its own section instead.
  listed =
    o:
    if isSubmodules o then
      lib.hasInfix "`${o.name}.<name>`" guide
    else
      lib.hasInfix "| `${relative o.name}` |" guide;
  unlisted = map (o: o.name) (b.filter (o: !listed o) declared);

  checks = {
    "a good configuration passes every assertion" = ok.failed == [ ];
    "every option has a description and an example${
      lib.optionalString (undocumented != [ ]) " (lacking: ${b.concatStringsSep ", " undocumented})"
    }" = undocumented == [ ];
    "docs/nixos.md lists every option${
      lib.optionalString (unlisted != [ ]) " (not: ${b.concatStringsSep ", " unlisted})"
    }" = unlisted == [ ];
    "agents-control gets exactly the documented settings" =
      b.attrNames copyUnit.environment == [
        "AGENTS_CONTROL_KEY_FILE"
        "AGENTS_CONTROL_LISTEN"
        "AGENTS_CONTROL_MAX_CONNECTIONS"
        "AGENTS_CONTROL_MAX_CONNECTIONS_PER_ADDRESS"
        "AGENTS_CONTROL_NAME"
        "AGENTS_CONTROL_PEER_URL"
        "AGENTS_CONTROL_URL"
        "AGENTS_STORE"
        "AGENTS_STORE_ENDPOINT"
        "AGENTS_STORE_PATH_STYLE"
        "AGENTS_STORE_REGION"
      ];
    "the control key arrives through LoadCredential" =
      copyUnit.environment.AGENTS_CONTROL_KEY_FILE == "%d/control-key"
      && copyUnit.serviceConfig.LoadCredential == [ "control-key:/run/secrets/control-key" ];
    "a copy listens on 0.0.0.0:8791 and its peer URL is its host name" =
      copyUnit.environment.AGENTS_CONTROL_LISTEN == "0.0.0.0:8791"
      && copyUnit.environment.AGENTS_CONTROL_PEER_URL == "http://cp1:8791";
    "openFirewall opens the copy's port only" = ok.ports == [ 8791 ];
    "a copy may hold its connections: LimitNOFILE above AGENTS_CONTROL_MAX_CONNECTIONS" =
      copyUnit.environment.AGENTS_CONTROL_MAX_CONNECTIONS == "50000"
      && copyUnit.serviceConfig.LimitNOFILE == 54096;
    "% is doubled in Environment= values" = copyUnit.environment.AGENTS_CONTROL_NAME == "100%% test";
    "the admin command exports the settings unescaped" = lib.hasInfix "AGENTS_CONTROL_NAME='100% test'" (adminText ok);
    "no bucket key file, no AWS_SHARED_CREDENTIALS_FILE" =
      !(copyUnit.environment ? AWS_SHARED_CREDENTIALS_FILE) && !(lib.hasInfix "AWS_SHARED_CREDENTIALS_FILE" (adminText ok));
    "the bucket key file arrives through LoadCredential, named by AWS_SHARED_CREDENTIALS_FILE" =
      withKeyFile.failed == [ ]
      && keyFileUnit.environment.AWS_SHARED_CREDENTIALS_FILE == "%d/store-credentials"
      && keyFileUnit.serviceConfig.LoadCredential == [
        "control-key:/run/secrets/control-key"
        "store-credentials:/run/secrets/bucket"
      ]
      && keyFileUnit.serviceConfig.EnvironmentFile == [ ]
      && lib.hasInfix "export AWS_SHARED_CREDENTIALS_FILE=/run/secrets/bucket" (adminText withKeyFile);
    "swarm-controller gets its five variables and the provisioning lifetimes' defaults, no provisioning system" =
      controllerUnit.environment == {
        SWARM_CONTROLLER_SOCKET = "/run/swarm-controller/controller.sock";
        SWARM_NATS_URL = "nats://nats:4222";
        SWARM_NATS_REPLICAS = "1";
        SWARM_NATS_CREDS = "%d/nats-creds";
        SWARM_RECONCILE_EVERY = "60s";
        SWARM_STATE_DIR = "/var/lib/swarm-controller";
        SWARM_REMOTE_RATE = "20";
        SWARM_GATEWAY_USER = "nginx";
        SWARM_GATEWAY_ROLES = "swarm-admins=admin,swarm-viewers=viewer";
        SWARM_STORE_CERT_LIFETIME = "24h";
        SWARM_QUEUE_CREDS_LIFETIME = "24h";
        SWARM_CREDENTIAL_CHECK_EVERY = "5m";
        SWARM_JOBQ_CONCURRENCY = "8";
        SWARM_JOBQ_MAX_ATTEMPTS = "6";
      }
      && controllerUnit.serviceConfig.LoadCredential == [ "nats-creds:/run/secrets/controller.creds" ];
    "without SSO the gateway names no user to the controller" =
      let
        open = evaluate { values = good // { deploy = good.deploy // { hive-gateway = openGateway; }; }; };
      in
      open.failed == [ ]
      && !(open.units.swarm-controller.environment ? SWARM_GATEWAY_USER)
      && !(open.units.swarm-controller.environment ? SWARM_GATEWAY_ROLES);
    "a paired controller's identity arrives through LoadCredential, with its request rate" =
      let
        paired = evaluate {
          values = good // {
            deploy = good.deploy // {
              swarm-controller = controller // {
                controlPlane = {
                  identityFile = "/run/secrets/swarm-control-identity.json";
                  requestsPerSecond = 50;
                };
              };
            };
          };
        };
        unit = paired.units.swarm-controller;
      in
      paired.failed == [ ]
      && unit.environment.SWARM_CONTROL_IDENTITY == "%d/control-identity"
      && unit.environment.SWARM_REMOTE_RATE == "50"
      && unit.serviceConfig.LoadCredential == [
        "nats-creds:/run/secrets/controller.creds"
        "control-identity:/run/secrets/swarm-control-identity.json"
      ]
      && !(controllerUnit.environment ? SWARM_CONTROL_IDENTITY);
    "quick links reach the controller as a JSON file" =
      withLinks.failed == [ ]
      && (written withLinks.units.swarm-controller.environment.SWARM_QUICK_LINKS_FILE).json == quickLinks
      && !(controllerUnit.environment ? SWARM_QUICK_LINKS_FILE);
    "a controller with every provisioning setting passes every assertion (the CA's certificate may be in the store)" =
      provisioned.failed == [ ];
    "provisioning reaches the documented variables, each secret file as %d/<name>" =
      provisionedUnit.environment == {
        SWARM_CONTROLLER_SOCKET = "/run/swarm-controller/controller.sock";
        SWARM_NATS_URL = "nats://nats:4222";
        SWARM_NATS_REPLICAS = "1";
        SWARM_NATS_CREDS = "%d/nats-creds";
        SWARM_NATS_DIR = "/var/lib/swarm-nats";
        SWARM_RECONCILE_EVERY = "60s";
        SWARM_SECRETS_KEY_FILE = "%d/secrets-key";
        SWARM_DEPLOY_KEY_FILE = "%d/deploy-key";
        SWARM_SSO_BRIDGE_URL = "http://127.0.0.1:9092";
        SWARM_SSO_BRIDGE_TOKEN_FILE = "%d/sso-bridge-token";
        SWARM_FORGE_URL = "https://forge.example";
        SWARM_FORGE_ADMIN_TOKEN_FILE = "%d/forge-admin-token";
        SWARM_FORGE_TEMPLATE_REPO = "hyperhive/agent-config";
        SWARM_FORGE_ORG = "hyperhive";
        SWARM_FORGE_WEBHOOK_URL = "https://swarm.example/api/forge/webhook";
        SWARM_FORGE_RECONCILE_EVERY = "2m";
        SWARM_STATE_DIR = "/var/lib/swarm-controller";
        SWARM_REMOTE_RATE = "20";
        SWARM_MATRIX_URL = "https://matrix.example";
        SWARM_MATRIX_SHARED_SECRET_FILE = "%d/matrix-shared-secret";
        SWARM_STORE_CA_KEY_FILE = "%d/store-ca-key";
        SWARM_STORE_CA_CERT_FILE = "%d/store-ca-cert";
        SWARM_STORE_CERT_LIFETIME = "12h";
        SWARM_QUEUE_CREDS_LIFETIME = "6h";
        SWARM_CREDENTIAL_CHECK_EVERY = "1m";
        SWARM_JOBQ_CONCURRENCY = "4";
        SWARM_JOBQ_MAX_ATTEMPTS = "3";
      };
    "provisioning's files arrive through LoadCredential" =
      provisionedUnit.serviceConfig.LoadCredential == [
        "nats-creds:/run/secrets/controller.creds"
        "secrets-key:/run/secrets/swarm-secrets.key"
        "deploy-key:/run/secrets/swarm-deploy.key"
        "sso-bridge-token:/run/secrets/authelia-bridge-token"
        "forge-admin-token:/run/secrets/forge-admin-token"
        "matrix-shared-secret:/run/secrets/synapse-registration-secret"
        "store-ca-key:/run/secrets/store-ca.key"
        "store-ca-cert:${b.storeDir}/00000000000000000000000000000000-store-ca.pem"
      ];
    "with only the store CA, only its variables and files" =
      let
        unit = storeOnly.units.swarm-controller;
      in
      storeOnly.failed == [ ]
      && b.filter (lib.hasPrefix "SWARM_S") (b.attrNames unit.environment) == [
        "SWARM_SECRETS_KEY_FILE"
        "SWARM_STATE_DIR"
        "SWARM_STORE_CA_CERT_FILE"
        "SWARM_STORE_CA_KEY_FILE"
        "SWARM_STORE_CERT_LIFETIME"
      ]
      && !(unit.environment ? SWARM_FORGE_URL)
      && !(unit.environment ? SWARM_MATRIX_URL)
      && !(unit.environment ? SWARM_FORGE_TEMPLATE_REPO)
      && !(unit.environment ? SWARM_FORGE_RECONCILE_EVERY)
      && !(unit.environment ? SWARM_FORGE_WEBHOOK_URL)
      && unit.serviceConfig.LoadCredential == [
        "nats-creds:/run/secrets/controller.creds"
        "secrets-key:/run/secrets/swarm-secrets.key"
        "deploy-key:/run/secrets/swarm-deploy.key"
        "store-ca-key:/run/secrets/store-ca.key"
        "store-ca-cert:${b.storeDir}/00000000000000000000000000000000-store-ca.pem"
      ];
    "% in a provisioning URL is doubled" =
      (evaluate { values = good // provisionedWith { forge.url = "https://forge.example/%7Eforge"; }; })
      .units.swarm-controller.environment.SWARM_FORGE_URL or null == "https://forge.example/%%7Eforge";
    "the secret store's key arrives through LoadCredential" =
      withSecretsKey.units.swarm-controller.environment.SWARM_SECRETS_KEY_FILE == "%d/secrets-key"
      && withSecretsKey.units.swarm-controller.serviceConfig.LoadCredential == [
        "nats-creds:/run/secrets/controller.creds"
        "secrets-key:/run/secrets/swarm-secrets.key"
      ];
    "the socket's directory is the unit's own, group-traversable and preserved" =
      controllerUnit.serviceConfig.RuntimeDirectory == "swarm-controller"
      && controllerUnit.serviceConfig.RuntimeDirectoryMode == "0750"
      && controllerUnit.serviceConfig.RuntimeDirectoryPreserve == "yes"
      && controllerUnit.serviceConfig.Group == "swarm-controller"
      && ok.users.groups ? swarm-controller;
    "the controller keeps its webhook secret in its own state directory" =
      controllerUnit.serviceConfig.StateDirectory == "swarm-controller"
      && controllerUnit.serviceConfig.StateDirectoryMode == "0700"
      && controllerUnit.environment.SWARM_STATE_DIR == "/var/lib/swarm-controller";
    "swarmctl on PATH defaults to the socket" =
      lib.hasInfix "--set-default SWARM_CONTROLLER_SOCKET /run/swarm-controller/controller.sock" swarmctl.buildCommand;
    "one unit per enabled agent" =
      b.filter (lib.hasPrefix "hive-agent-") (b.attrNames ok.units) == [ "hive-agent-alpha" ];
    "an agent gets the HIVE_AGENT_* variables, its own state directory and credential" =
      agentUnit.environment == {
        HIVE_AGENT_NAME = "alpha";
        HIVE_AGENT_NATS_URL = "nats://nats:4222";
        HIVE_AGENT_CREDS = "%d/nats-creds";
        HIVE_AGENT_STATE_DIR = "/var/lib/hive-agent-alpha";
        HIVE_AGENT_SCHEDULE_TICK = "10s";
        HIVE_AGENT_TURN_COMMAND = "printf '%%s\\n' done";
        HIVE_AGENT_TURN_TIMEOUT = "1h";
        HOME = "/var/lib/hive-agent-alpha";
      }
      && agentUnit.serviceConfig.StateDirectory == "hive-agent-alpha"
      && agentUnit.serviceConfig.LoadCredential == [ "nats-creds:/run/secrets/alpha.creds" ];
    "an agent's turn timeout reaches HIVE_AGENT_TURN_TIMEOUT" =
      (evaluate { values = good // { agents.alpha = agent // { turnTimeout = "90m"; }; }; })
      .units.hive-agent-alpha.environment.HIVE_AGENT_TURN_TIMEOUT == "90m";
    "agents run hive-agent from the c0re bundle" =
      agentUnit.serviceConfig.ExecStart == "${pkgs.hyperhive.daemon-bins}/bin/hive-agent";
    "every unit starts at boot, keeps retrying, and is hardened" = b.all (
      unit:
      unit.wantedBy == [ "multi-user.target" ]
      && unit.startLimitIntervalSec == 0
      && unit.serviceConfig.Restart == "on-failure"
      && unit.serviceConfig.ProtectSystem == "strict"
      && (unit.serviceConfig.DynamicUser || (unit.serviceConfig.User or "root") != "root")
      && unit.serviceConfig.NoNewPrivileges
      && unit.serviceConfig.PrivateTmp
      && unit.serviceConfig.UMask == "0077"
      && b.elem "AF_UNIX" unit.serviceConfig.RestrictAddressFamilies
      && unit.serviceConfig.SystemCallFilter != [ ]
    ) [ copyUnit controllerUnit agentUnit bridgeUnit ];
    "swarm-authelia-bridge gets exactly its four variables, the token through LoadCredential" =
      bridgeUnit.environment == {
        AUTHELIA_BRIDGE_LISTEN = "127.0.0.1:9092";
        AUTHELIA_BRIDGE_USERS_FILE = "/var/lib/authelia-main/users_database.yml";
        AUTHELIA_BRIDGE_TOKEN_FILE = "%d/token";
        AUTHELIA_BRIDGE_MANAGED_GROUP = "hyperhive-agents";
      }
      && bridgeUnit.serviceConfig.LoadCredential == [ "token:/run/secrets/authelia-bridge-token" ];
    "swarm-authelia-bridge runs as the users file's owner and may write only its directory" =
      bridgeUnit.serviceConfig.ExecStart == "${pkgs.hyperhive.swarm-authelia-bridge}/bin/swarm-authelia-bridge"
      && bridgeUnit.serviceConfig.DynamicUser == false
      && bridgeUnit.serviceConfig.User == "authelia-main"
      && bridgeUnit.serviceConfig.Group == "authelia-main"
      && bridgeUnit.serviceConfig.ReadWritePaths == [ "/var/lib/authelia-main" ]
      && bridgeUnit.serviceConfig.CapabilityBoundingSet == ""
      && bridgeUnit.serviceConfig.ProtectSystem == "strict";
    "swarm-authelia-bridge's settings reach its variables; openFirewall opens its port" =
      let
        result = evaluate {
          values = good // {
            deploy = good.deploy // {
              authelia-bridge = bridge // {
                listenAddress = "::1";
                port = 9100;
                usersFile = "/srv/authelia/users.yml";
                managedGroup = "swarm-agents";
                user = "authelia";
                group = "authelia";
                openFirewall = true;
              };
            };
          };
        };
        unit = result.units.swarm-authelia-bridge;
      in
      result.failed == [ ]
      && unit.environment.AUTHELIA_BRIDGE_LISTEN == "[::1]:9100"
      && unit.environment.AUTHELIA_BRIDGE_USERS_FILE == "/srv/authelia/users.yml"
      && unit.environment.AUTHELIA_BRIDGE_MANAGED_GROUP == "swarm-agents"
      && unit.serviceConfig.User == "authelia"
      && unit.serviceConfig.ReadWritePaths == [ "/srv/authelia" ]
      && lib.sort lib.lessThan result.ports == [
        8791
        9100
      ];
    "hive-c0re gets the HIVE_C0RE_* variables by name and value" =
      b.removeAttrs c0reUnit.environment [ "HIVE_C0RE_AGENTS_FILE" ] == {
        HIVE_C0RE_HIVE = "hive1";
        HIVE_C0RE_NATS_URL = "nats://nats:4222";
        HIVE_C0RE_NATS_CREDS = "%d/nats-creds";
        HIVE_C0RE_XKEY_FILE = "%d/xkey";
        HIVE_C0RE_CONTROLLER_KEYS = deployKey;
        HIVE_C0RE_STATE_DIR = "/var/lib/hive-c0re";
        HIVE_C0RE_RUNNER = "systemd";
        HIVE_C0RE_AGENT_BIN = "${pkgs.hyperhive.daemon-bins}/bin/hive-agent";
        HIVE_C0RE_STATUS_EVERY = "15s";
      };
    "hive-c0re's credential and xkey arrive through LoadCredential" =
      c0reUnit.serviceConfig.LoadCredential == [
        "nats-creds:/run/secrets/hive1.creds"
        "xkey:/run/secrets/hive1.xk"
      ];
    "without an xkey file, no HIVE_C0RE_XKEY_FILE and no xkey credential" =
      let
        unit = (withHive { xkeyFile = null; }).units.hive-c0re;
      in
      !(unit.environment ? HIVE_C0RE_XKEY_FILE)
      && !(unit.environment ? HIVE_C0RE_CONTROLLER_KEYS)
      && unit.serviceConfig.LoadCredential == [ "nats-creds:/run/secrets/hive1.creds" ];
    "runner and status interval reach HIVE_C0RE_RUNNER and HIVE_C0RE_STATUS_EVERY" =
      let
        unit = (withHive { runner = "process"; statusInterval = 5; }).units.hive-c0re;
      in
      unit.environment.HIVE_C0RE_RUNNER == "process" && unit.environment.HIVE_C0RE_STATUS_EVERY == "5s";
    "a hive under hive-c0re passes every assertion" = hiveOk.failed == [ ];
    "hive-c0re runs `hive-c0re run` from the c0re bundle, as root, with its state directory and systemd on PATH" =
      c0reUnit.serviceConfig.ExecStart == "${pkgs.hyperhive.daemon-bins}/bin/hive-c0re run"
      && c0reUnit.serviceConfig.DynamicUser == false
      && !(c0reUnit.serviceConfig ? User)
      && c0reUnit.serviceConfig.StateDirectory == "hive-c0re"
      && lib.head c0reUnit.path == pkgs.systemd
      && c0reUnit.wantedBy == [ "multi-user.target" ]
      && c0reUnit.serviceConfig.Restart == "on-failure";
    "hive-c0re is hardened but for the documented relaxations" =
      let
        c = c0reUnit.serviceConfig;
      in
      c.ProtectSystem == "strict"
      && c.ReadWritePaths == [ "/var/lib" ]
      && c.CapabilityBoundingSet == [
        "CAP_CHOWN"
        "CAP_DAC_OVERRIDE"
        "CAP_FOWNER"
      ]
      && c.SystemCallFilter == [
        "@system-service"
        "~@privileged"
        "@chown"
        "~@resources"
      ]
      && c.ProcSubset == "all"
      && c.NoNewPrivileges
      && c.PrivateTmp
      && c.ProtectHome
      && c.PrivateDevices
      && c.RestrictSUIDSGID
      && c.MemoryDenyWriteExecute
      && c.UMask == "0077"
      && b.elem "AF_UNIX" c.RestrictAddressFamilies;
    "with the process runner the turn commands may use writable executable memory" =
      !(withHive { runner = "process"; }).units.hive-c0re.serviceConfig.MemoryDenyWriteExecute;
    "under hive-c0re the agents get no static units" =
      b.filter (lib.hasPrefix "hive-agent-") (b.attrNames hiveOk.units) == [ ];
    "the declared agents file holds each enabled agent's spec, credential path and environment file" =
      lib.hasPrefix "${b.storeDir}/" agentsFile.path
      && lib.hasInfix "-hive-c0re-agents.json" agentsFile.path
      && agentsFile.json == {
        alpha = {
          spec = {
            turn_command = "printf '%s\\n' done";
            schedule_tick = "10s";
            turn_timeout = "1h";
            env.PATH = "${pkgs.bash}/bin:${pkgs.coreutils}/bin";
          };
          creds_file = "/run/secrets/alpha.creds";
        };
        beta = {
          spec = {
            turn_command = "claude --print";
            schedule_tick = "2s";
            turn_timeout = "3h";
            env.PATH = "${pkgs.bash}/bin:${pkgs.coreutils}/bin:${pkgs.git}/bin";
          };
          creds_file = "/run/secrets/beta.creds";
          environment_file = "/run/secrets/beta.env";
        };
      };
    # What crates/hive-proto/src/spec.rs (parse_declared) refuses: names that are not agent names,
    # environment names outside [A-Z_][A-Z0-9_]* or under HIVE_, a relative credential path.
    "the declared agents file passes hive-proto's checks" = b.all (
      name:
      let
        entry = agentsFile.json.${name};
      in
      b.match "[a-z][a-z0-9-]{0,31}" name != null
      && lib.hasPrefix "/" entry.creds_file
      && entry.spec.turn_command != ""
      && b.all (env: b.match "[A-Z_][A-Z0-9_]*" env != null && !(lib.hasPrefix "HIVE_" env)) (
        b.attrNames entry.spec.env
      )
    ) (b.attrNames agentsFile.json);
    "the hive directory reaches the controller as SWARM_HIVES_FILE, xkey left out when unset" =
      directoryOk.failed == [ ]
      && lib.hasInfix "-swarm-hives.json" hivesFile.path
      && hivesFile.json == {
        hive1 = {
          description = "GPU box";
          labels.gpu = "yes";
          xkey = hiveKey;
        };
        hive2 = {
          description = "";
          labels = { };
        };
      };
    "the signing directory is SWARM_NATS_DIR and writable for the controller" =
      directoryUnit.environment.SWARM_NATS_DIR == "/var/lib/swarm-nats"
      && directoryUnit.serviceConfig.ReadWritePaths == [ "/var/lib/swarm-nats" ];
    "a NATS node runs nats-server -c with its generated configuration, its state in /var/lib/nats" =
      natsAlone.failed == [ ]
      && lib.hasPrefix "${pkgs.nats-server}/bin/nats-server -c ${b.storeDir}/" (natsCommand natsAlone)
      && lib.hasInfix "-nats-server.conf" (natsCommand natsAlone)
      && natsAlone.units.hyperhive-nats.serviceConfig.StateDirectory == "nats"
      && natsAlone.units.hyperhive-nats.serviceConfig.DynamicUser
      && natsAlone.units.hyperhive-nats.wantedBy == [ "multi-user.target" ]
      && natsAlone.units.hyperhive-nats.serviceConfig.Restart == "on-failure"
      && natsAlone.units.hyperhive-nats.serviceConfig.ProtectSystem == "strict"
      && natsAlone.units.hyperhive-nats.serviceConfig.NoNewPrivileges
      && natsAlone.units.hyperhive-nats.serviceConfig.SystemCallFilter != [ ]
      && b.elem "AF_INET6" natsAlone.units.hyperhive-nats.serviceConfig.RestrictAddressFamilies
      && natsAlone.ports == [ ];
    "a single NATS node: its name, client port, JetStream in the state directory, the fragment after them, no cluster" =
      let
        conf = natsConf natsAlone;
      in
      b.all (text: lib.hasInfix text conf) [
        "server_name: \"cp1\"\n"
        "listen: \"0.0.0.0:4222\"\n"
        "jetstream {\n  store_dir: \"/var/lib/nats\"\n  max_file_store: 8GB\n}\n"
        fragmentText
      ]
      && !(lib.hasInfix "cluster" conf);
    "a cluster's NATS node: its own name, the cluster block with every route, both ports opened" =
      let
        conf = natsConf natsMember;
      in
      natsMember.failed == [ ]
      && lib.hasInfix "server_name: \"nats2\"\n" conf
      && lib.hasInfix ''
        cluster {
          name: "hyperhive"
          listen: "0.0.0.0:6222"
          routes: [
            "nats-route://nats1:6222"
            "nats-route://nats2:6222"
            "nats-route://nats3:6222"
          ]
        }
      '' conf
      && lib.hasSuffix fragmentText conf
      && natsMember.ports == [
        4222
        6222
      ];
    "a controller on a three-node cluster: every node in SWARM_NATS_URL, SWARM_NATS_REPLICAS 3" =
      let
        result = evaluate {
          values = good // {
            deploy = good.deploy // {
              swarm-controller = controller // {
                nats = controller.nats // {
                  url = "nats://nats1:4222,nats://nats2:4222,nats://nats3:4222";
                  replicas = 3;
                };
              };
            };
          };
        };
      in
      result.failed == [ ]
      && result.units.swarm-controller.environment.SWARM_NATS_URL == "nats://nats1:4222,nats://nats2:4222,nats://nats3:4222"
      && result.units.swarm-controller.environment.SWARM_NATS_REPLICAS == "3";
    "a unit is written as NixOS writes it: [Unit] from its dependencies, Environment= JSON-quoted, lists repeated, booleans true/false, [Install]" =
      let
        example = {
          description = "an example";
          after = [
            "a.target"
            "b.target"
          ];
          wantedBy = [ "multi-user.target" ];
          path = lib.mkForce [ ];
          environment.GREETING = "say \"hi\"";
          serviceConfig = {
            ExecStart = "/bin/true";
            NoNewPrivileges = true;
            PrivateUsers = false;
            SystemCallFilter = [
              "@system-service"
              "~@privileged"
            ];
          };
        };
        result = evaluate {
          values = { };
          modules = [ { systemd.services.example = example; } ];
        };
      in
      result.config.systemd.units."example.service".text == ''
        [Unit]
        After=a.target b.target
        Description=an example

        [Service]
        Environment="GREETING=say \"hi\""
        ExecStart=/bin/true
        NoNewPrivileges=true
        PrivateUsers=false
        SystemCallFilter=@system-service
        SystemCallFilter=~@privileged

        [Install]
        WantedBy=multi-user.target
      '';
    "a unit's script runs as a script of its own, with set -e" =
      let
        result = evaluate {
          values = { };
          modules = [ { systemd.services.example.script = "echo hello"; } ];
        };
        start = result.config.systemd.services.example.serviceConfig.ExecStart;
      in
      lib.hasSuffix "/bin/example-start" start && lib.hasInfix "set -e\n\necho hello\n" (b.readFile start);
    "nixpkgs' services.nats beside the swarm's NATS: two units, each running its own configuration" =
      let
        result = evaluate {
          values.deploy.nats = natsNode;
          modules = [
            {
              services.nats = {
                enable = true;
                port = 4223;
                dataDir = "/var/lib/other-nats";
              };
            }
          ];
        };
        theirs = result.units.nats.serviceConfig;
        theirConf = b.fromJSON (b.unsafeDiscardStringContext (b.readFile (lib.last (lib.splitString " " theirs.ExecStart))));
      in
      result.failed == [ ]
      && theirs.User == "nats"
      && !(theirs ? StateDirectory)
      && theirConf.port == 4223
      && lib.hasInfix fragmentText (natsConf result)
      && !(lib.hasInfix fragmentText (b.toJSON theirConf));
    "lib.mkForce overrides a unit's setting, as docs/nixos.md says; a plain definition beside it conflicts" =
      (evaluate {
        values = good;
        modules = [ { systemd.services.hive-agent-alpha.serviceConfig.RestrictNamespaces = lib.mkForce false; } ];
      }).units.hive-agent-alpha.serviceConfig.RestrictNamespaces == false
      && !(b.tryEval (evaluate {
        values = good;
        modules = [ { systemd.services.hive-agent-alpha.serviceConfig.RestrictNamespaces = false; } ];
      }).units.hive-agent-alpha.serviceConfig.RestrictNamespaces).success;
    "an agent's PATH is its packages, then NixOS's default ones" =
      lib.hasPrefix "${pkgs.bash}/bin:${pkgs.coreutils}/bin:" ok.paths.hive-agent-alpha;
    "no hives and no signing directory: neither variable, nothing writable" =
      !(controllerUnit.environment ? SWARM_HIVES_FILE)
      && !(controllerUnit.environment ? SWARM_NATS_DIR)
      && controllerUnit.serviceConfig.ReadWritePaths == [ ];
  }
  // b.listToAttrs (
    map (
      refusal:
      let
        result = evaluate {
          values = (refusal.base or good) // refusal.change;
          otherUnits = refusal.otherUnits or { };
        };
      in
      {
        name = "refused: ${refusal.expect}";
        value = b.length result.failed == 1 && lib.hasInfix refusal.expect (b.head result.failed);
      }
    ) refusals
  )
  # The flake's outputs, with nixpkgs' lib against a stand-in package set (flake-outputs.nix).
  // import ./flake-outputs.nix;

  failures = b.filter (name: !checks.${name}) (b.attrNames checks);
in
if failures == [ ] then
  true
else
  throw "modules-eval: these checks failed:\n  ${b.concatStringsSep "\n  " failures}"
