# VM test `provisioning` (a flake check: `nix build .#checks.x86_64-linux.vm-provisioning`): an
# agent made with `swarmctl agent create` gets every account and credential from real services.
#
# Nodes: `services` runs a real Forgejo (sqlite), a real Synapse (sqlite, its
# registration_shared_secret read from a file) and swarm-authelia-bridge
# (services.hyperhive.deploy.authelia-bridge) on a users file in Authelia's default place (Authelia
# itself is not run); `controller` runs NATS in JWT mode and swarm-controller with every
# `provisioning` option set (the bridge, the forge with an administrator's token and a template
# repository, Synapse's shared secret, a store CA made by `swarm-controller store-ca`, the secret
# store's key from `swarm-controller secrets-key`); `hive1` runs hive-c0re with no declared agents.
#
# The script makes a forge administrator, its token and the template repository through the API,
# delivers the token to the controller, creates the agent `gamma` on hive1, and checks: every job
# of the agent succeeded, the forge has the user and a config repository in the swarm's
# organisation with the template's content and the agent its only collaborator, Synapse has the user, the bridge has the SSO user (managed), the agent is deployed to
# hive1 and `paused`; then `up`, it runs a one-shot todo once. tests/nixos/README.md says what it
# mirrors and how it runs without Nix (on systemd-nspawn hosts, the forge a stand-in).
{ self }:
{ pkgs, lib, ... }:
let
  swarm-controller = self.packages.${pkgs.stdenv.hostPlatform.system}.swarm-controller;

  agent = "gamma";
  hive = "hive1";
  matrixServer = "matrix.test";

  # The swarm's NATS credentials, the secret store's key and the store CA, made at build time by
  # the program itself. Test-only secrets, deliberately in the Nix store; the controller copies
  # them to /etc (the modules refuse store paths), as a secret manager would deliver real ones. A
  # long TTL: a cached build of this must not hand out an expired hive credential. The hive's
  # credential names no agent: the controller adds the agent it deploys there to the hive's account
  # while it runs.
  swarm-init = pkgs.runCommand "provisioning-swarm-init" { nativeBuildInputs = [ swarm-controller ]; } ''
    swarm-controller nats init --out "$out" --resolver-dir /var/lib/nats/jwt
    swarm-controller nats hive-creds ${hive} --from "$out" --out "$out/${hive}.creds" --ttl 3650d
    swarm-controller secrets-key --out "$out/secrets.key"
    mkdir "$out/store-ca"
    swarm-controller store-ca --out-dir "$out/store-ca"
  '';

  nats-conf = pkgs.runCommand "nats.conf" { } ''
    {
      echo 'listen: "0.0.0.0:4222"'
      echo 'jetstream { store_dir: "/var/lib/nats", max_file_store: 4GB }'
      cat ${swarm-init}/nats-server.conf
    } > "$out"
  '';

  # The hive's sealing key: a seed made by `hive-c0re keygen` for this test only, kept as a fixture
  # so its public key can be given to the controller's hive directory (making it in a derivation
  # would need import from derivation, which flake checks forbid).
  hiveXkeySeed = ./fixtures/provisioning-hive1.xk;
  hiveXkey = "XAZTNPWSYEYWH5ICW2HR5U4M26LI66W4XXNXELQPKMNGXMFZ5LJAOWXO";

  # The controller's deploy key, likewise a fixture (`swarm-controller deploy-key`), so the hive
  # can pin the public key it printed.
  deployKeySeed = ./fixtures/swarm-deploy.key;
  deployKey = "VA3TQBLDJYOGC2ZHIJY7MHVY2WANZ2JEWN5DDHE2KR53AYNXSUMBLT2G";

  # Test-only shared secrets, deliberately in the store.
  bridgeToken = pkgs.writeText "authelia-bridge-token" "provisioning-vm-test-bridge-token-0123456789";
  registrationSecret = pkgs.writeText "synapse-registration-secret" "provisioning-vm-test-registration-secret";

  # The agent's spec, as `swarmctl agent create --spec-file` reads it: a harmless turn recording
  # which todo ran, and its body; a shell and coreutils on PATH, as a declared agent gets them.
  spec = pkgs.writeText "${agent}-spec.json" (
    builtins.toJSON {
      turn_command = ''printf 'source=%s id=%s\n' "$HIVE_TODO_SOURCE" "$HIVE_TODO_ID" >> turns.log; cat >> turns.log; echo >> turns.log'';
      schedule_tick = "2s";
      env.PATH = lib.makeBinPath [
        pkgs.bash
        pkgs.coreutils
      ];
    }
  );

  etcSecret = source: {
    inherit source;
    mode = "0400";
  };
in
{
  name = "hyperhive-provisioning";

  defaults.documentation.enable = false;

  nodes = {
    services =
      { ... }:
      {
        imports = [ self.nixosModules.default ];
        virtualisation.memorySize = 2048;
        virtualisation.diskSize = 4096;
        environment.systemPackages = [
          pkgs.curl
          pkgs.jq
          pkgs.forgejo
          pkgs.matrix-synapse
        ];

        services.forgejo = {
          enable = true;
          package = pkgs.forgejo;
          database.type = "sqlite3";
          settings = {
            server = {
              DOMAIN = "services";
              HTTP_PORT = 3000;
              ROOT_URL = "http://services:3000/";
            };
            service.DISABLE_REGISTRATION = true;
          };
        };

        environment.etc."synapse/registration-secret" = etcSecret registrationSecret // {
          user = "matrix-synapse";
        };
        services.matrix-synapse = {
          enable = true;
          settings = {
            server_name = matrixServer;
            database.name = "sqlite3";
            registration_shared_secret_path = "/etc/synapse/registration-secret";
            listeners = [
              {
                port = 8008;
                bind_addresses = [ "0.0.0.0" ];
                type = "http";
                tls = false;
                x_forwarded = false;
                resources = [
                  {
                    names = [ "client" ];
                    compress = false;
                  }
                ];
              }
            ];
          };
        };

        # The SSO bridge on Authelia's users file. Authelia's own user and state directory stand in
        # for services.authelia.instances.main, which would create them.
        users.users.authelia-main = {
          isSystemUser = true;
          group = "authelia-main";
        };
        users.groups.authelia-main = { };
        systemd.tmpfiles.rules = [ "d /var/lib/authelia-main 0700 authelia-main authelia-main -" ];
        environment.etc."hyperhive/authelia-bridge-token" = etcSecret bridgeToken;
        services.hyperhive.deploy.authelia-bridge = {
          enable = true;
          listenAddress = "0.0.0.0";
          openFirewall = true;
          tokenFile = "/etc/hyperhive/authelia-bridge-token";
        };

        networking.firewall.allowedTCPPorts = [
          3000
          8008
        ];
      };

    controller =
      { ... }:
      {
        imports = [ self.nixosModules.default ];
        environment.systemPackages = [
          pkgs.curl
          pkgs.jq
        ];

        # NATS in JWT mode, as in swarm.nix, on the controller's machine.
        systemd.services.nats = {
          wantedBy = [ "multi-user.target" ];
          after = [ "network.target" ];
          serviceConfig = {
            ExecStart = "${lib.getExe pkgs.nats-server} -c ${nats-conf}";
            DynamicUser = true;
            StateDirectory = "nats";
          };
        };
        networking.firewall.allowedTCPPorts = [ 4222 ];

        environment.etc = {
          "hyperhive/controller.creds" = etcSecret "${swarm-init}/controller.creds";
          "hyperhive/swarm-secrets.key" = etcSecret "${swarm-init}/secrets.key";
          "hyperhive/swarm-deploy.key" = etcSecret deployKeySeed;
          "hyperhive/store-ca.key" = etcSecret "${swarm-init}/store-ca/store-ca.key";
          "hyperhive/authelia-bridge-token" = etcSecret bridgeToken;
          "hyperhive/synapse-registration-secret" = etcSecret registrationSecret;
          "hyperhive/${agent}-spec.json".source = spec;
        };

        services.hyperhive.swarm.hives.${hive} = {
          description = "provisioning VM hive";
          xkey = hiveXkey;
        };
        services.hyperhive.deploy.swarm-controller = {
          enable = true;
          nats = {
            url = "nats://127.0.0.1:4222";
            credentialsFile = "/etc/hyperhive/controller.creds";
            signingDir = "/var/lib/swarm-nats";
          };
          secretsKeyFile = "/etc/hyperhive/swarm-secrets.key";
          deployKeyFile = "/etc/hyperhive/swarm-deploy.key";
          reconcileInterval = 5;
          provisioning = {
            sso = {
              url = "http://services:9092";
              tokenFile = "/etc/hyperhive/authelia-bridge-token";
            };
            forge = {
              url = "http://services:3000";
              # Made by the test script, once the forge is up: the controller's unit starts only
              # once this file exists, as with a secret delivered after boot.
              adminTokenFile = "/run/secrets/forge-admin-token";
              templateRepo = "swarm-admin/agent-config";
              # The template's owner is a user, so the swarm's organisation is named: the
              # controller makes it and generates config repositories in it.
              org = "swarm";
            };
            matrix = {
              url = "http://services:8008";
              sharedSecretFile = "/etc/hyperhive/synapse-registration-secret";
            };
            storeCa = {
              keyFile = "/etc/hyperhive/store-ca.key";
              # Public: straight from the store.
              certFile = "${swarm-init}/store-ca/store-ca.pem";
            };
            storeCertLifetime = "2h";
            # Short, so the queue credential is renewed while the test runs (at two thirds).
            queueCredsLifetime = "3m";
            credentialCheckEvery = "30s";
          };
        };

        # The signing directory, as a secret manager would deliver it: the controller's own,
        # writable, mode 0700. Test-only keys from the store, copied once.
        systemd.services.swarm-nats-dir = {
          description = "copy the test's NATS signing directory for swarm-controller";
          requiredBy = [ "swarm-controller.service" ];
          before = [ "swarm-controller.service" ];
          serviceConfig = {
            Type = "oneshot";
            RemainAfterExit = true;
          };
          script = ''
            if [ ! -d /var/lib/swarm-nats ]; then
              cp -r --no-preserve=mode ${swarm-init} /var/lib/swarm-nats
              rm -rf /var/lib/swarm-nats/store-ca /var/lib/swarm-nats/secrets.key
              chown -R swarm-controller:swarm-controller /var/lib/swarm-nats
              chmod -R u=rwX,go= /var/lib/swarm-nats
            fi
          '';
        };
      };

    ${hive} =
      { ... }:
      {
        imports = [ self.nixosModules.default ];
        environment.etc = {
          "hyperhive/${hive}.creds" = etcSecret "${swarm-init}/${hive}.creds";
          "hyperhive/${hive}.xk" = etcSecret hiveXkeySeed;
        };
        services.hyperhive.deploy.hive-controller = {
          enable = true;
          inherit hive;
          nats = {
            url = "nats://controller:4222";
            credentialsFile = "/etc/hyperhive/${hive}.creds";
          };
          xkeyFile = "/etc/hyperhive/${hive}.xk";
          controllerKeys = [ deployKey ];
          runner = "systemd";
          statusInterval = 5;
        };
      };
  };

  testScript = ''
    import json

    forge = "http://localhost:3000/api/v1"
    admin = "swarm-admin"
    admin_password = "swarm-admin-password-0123"
    bridge_token = "provisioning-vm-test-bridge-token-0123456789"
    registration_secret = "provisioning-vm-test-registration-secret"

    def forge_api(method, path, token, body=None):
        data = f"-H 'Content-Type: application/json' -d '{json.dumps(body)}'" if body is not None else ""
        return json.loads(services.succeed(
            f"curl -sf -X {method} -H 'Accept: application/json' -H 'Authorization: token {token}' {data} {forge}{path}"
        ))

    def turns(source):
        out = ${hive}.succeed(f"grep -c -F 'source={source} ' /var/lib/hive-agent-${agent}/turns.log || true")
        return int(out.strip() or "0")

    def fire_once(name, body):
        """A one-shot schedule five seconds from now; returns its id once its turn has run."""
        anchor = controller.succeed("date -u -d '+5 seconds' +%Y-%m-%dT%H:%M:%SZ").strip()
        schedule = json.loads(controller.succeed(
            f"swarmctl schedule add --json --anchor {anchor} --name {name} --agent ${agent} --body '{body}' --once"
        ))["id"]
        ${hive}.wait_until_succeeds(f"test \"$(grep -c -F 'source=schedule:{schedule} ' /var/lib/hive-agent-${agent}/turns.log)\" -ge 1", timeout=120)
        return schedule

    def agent_row():
        rows = json.loads(controller.succeed("swarmctl agents --json"))
        return next((row for row in rows if row["name"] == "${agent}"), None)

    start_all()

    with subtest("the forge, Synapse and the SSO bridge come up"):
        services.wait_for_unit("forgejo.service")
        services.wait_for_open_port(3000)
        services.wait_for_unit("matrix-synapse.service")
        services.wait_until_succeeds("curl -sf http://localhost:8008/_matrix/client/versions", timeout=120)
        services.wait_for_unit("swarm-authelia-bridge.service")
        services.wait_until_succeeds("curl -sf http://localhost:9092/healthz", timeout=60)

    with subtest("a forge administrator, its token and the template repository"):
        services.succeed(
            "su -l forgejo -c 'GITEA_WORK_DIR=/var/lib/forgejo forgejo admin user create --admin "
            + f"--username {admin} --password {admin_password} --email {admin}@example.test "
            + "--must-change-password=false'"
        )
        # The scopes docs/swarm/provisioning.md names for the controller's admin token.
        token = json.loads(services.succeed(
            f"curl -sf -X POST -u {admin}:{admin_password} -H 'Content-Type: application/json' "
            + """-d '{"name": "swarm-controller", "scopes": ["write:admin", "read:user", "write:repository", "write:organization"]}' """
            + f"{forge}/users/{admin}/tokens"
        ))["sha1"]
        template = forge_api("POST", "/user/repos", token, {
            "name": "agent-config",
            "description": "what the config repository of every agent starts from",
            "auto_init": True,
            "template": True,
            "private": False,
        })
        assert template["template"], template
        forge_api("GET", "/repos/swarm-admin/agent-config/contents/README.md", token)

    with subtest("the token delivered, the controller starts with every provisioning setting"):
        controller.succeed(f"install -d -m 0700 /run/secrets && (umask 077; printf %s {token} > /run/secrets/forge-admin-token)")
        controller.wait_for_unit("nats.service")
        controller.succeed("systemctl restart swarm-controller.service")
        controller.wait_for_unit("swarm-controller.service")
        controller.wait_until_succeeds("swarmctl hives", timeout=60)
        env = controller.succeed("systemctl show -p Environment swarm-controller.service")
        for variable in ("SWARM_SSO_BRIDGE_URL", "SWARM_FORGE_URL", "SWARM_FORGE_TEMPLATE_REPO", "SWARM_MATRIX_URL",
                         "SWARM_STORE_CA_KEY_FILE", "SWARM_STORE_CA_CERT_FILE", "SWARM_SECRETS_KEY_FILE"):
            assert variable in env, (variable, env)
        ${hive}.wait_for_unit("hive-c0re.service")
        controller.wait_until_succeeds("swarmctl hives status ${hive}", timeout=90)

    with subtest("swarmctl agent create provisions every account, each job succeeding"):
        controller.succeed(
            "swarmctl agent create ${agent} --hive ${hive} --spec-file /etc/hyperhive/${agent}-spec.json --wait",
            timeout=300,
        )
        jobs = json.loads(controller.succeed("swarmctl jobs --agent ${agent} --json"))
        assert jobs["nodes"], jobs
        unsettled = [(job["id"], job["state"], job["last_error"]) for job in jobs["nodes"] if job["state"] != "succeeded"]
        assert not unsettled, unsettled

    with subtest("the forge has the agent's user and its config repository in the swarm's organisation"):
        user = forge_api("GET", "/users/${agent}", token)
        assert user["login"] == "${agent}", user
        forge_api("GET", "/repos/swarm/${agent}-config/contents/README.md", token)
        collaborators = forge_api("GET", "/repos/swarm/${agent}-config/collaborators", token)
        assert [c["login"] for c in collaborators] == ["${agent}"], collaborators

    with subtest("Synapse has the agent's matrix user"):
        services.succeed(
            f"register_new_matrix_user -u synapse-admin -p synapse-admin-password -a -k {registration_secret} "
            + "http://localhost:8008"
        )
        login = json.loads(services.succeed(
            "curl -sf -X POST -H 'Content-Type: application/json' "
            + """-d '{"type": "m.login.password", "identifier": {"type": "m.id.user", "user": "synapse-admin"}, "password": "synapse-admin-password"}' """
            + "http://localhost:8008/_matrix/client/v3/login"
        ))
        matrix_user = json.loads(services.succeed(
            f"curl -sf -H 'Authorization: Bearer {login['access_token']}' "
            + "'http://localhost:8008/_synapse/admin/v2/users/@${agent}:${matrixServer}'"
        ))
        assert matrix_user["name"] == "@${agent}:${matrixServer}", matrix_user
        assert not matrix_user["deactivated"], matrix_user

    with subtest("the SSO bridge has the agent's user, in its managed group"):
        sso_user = json.loads(services.succeed(
            f"curl -sf -H 'Authorization: Bearer {bridge_token}' http://localhost:9092/v1/users/${agent}"
        ))
        assert sso_user["name"] == "${agent}" and sso_user["managed"], sso_user
        services.succeed("grep -q '${agent}' /var/lib/authelia-main/users_database.yml")

    with subtest("the agent is deployed to its hive, paused"):
        controller.wait_until_succeeds(
            "swarmctl agents --json | jq -e '.[] | select(.name == \"${agent}\") | .actual.actual == \"paused\"'",
            timeout=120,
        )
        row = agent_row()
        assert row["hive"] == "${hive}" and row["wanted"]["state"] == "paused", row
        # Paused is deployed and running, taking no todos.
        ${hive}.wait_until_succeeds("systemctl is-active hive-agent-${agent}.service", timeout=60)

    with subtest("up, the agent runs a todo once"):
        controller.succeed("swarmctl agent state ${hive} ${agent} up")
        controller.wait_until_succeeds(
            "swarmctl agents --json | jq -e '.[] | select(.name == \"${agent}\") | .actual.actual == \"running\"'",
            timeout=90,
        )
        once = fire_once("first", "hello, new agent")
        ${hive}.succeed("grep -F 'hello, new agent' /var/lib/hive-agent-${agent}/turns.log")
        ${hive}.sleep(6)
        assert turns(f"schedule:{once}") == 1, "the todo ran more than once"

    with subtest("a renewed queue credential reaches the running unit without a restart"):
        staged = "/var/lib/private/hive-agent-${agent}/credentials/nats-creds"
        pid = ${hive}.succeed("systemctl show -p MainPID --value hive-agent-${agent}.service").strip()
        first = ${hive}.succeed(f"sha256sum {staged}").split()[0]
        ${hive}.succeed(f"test \"$(stat -c %a {staged})\" = 400")
        ${hive}.wait_until_succeeds(f"test \"$(sha256sum {staged} | cut -d' ' -f1)\" != {first}", timeout=240)
        ${hive}.wait_until_succeeds(
            "journalctl -u hive-agent-${agent}.service | grep -q 'credential renewed, expires at'", timeout=60
        )
        assert ${hive}.succeed("systemctl show -p MainPID --value hive-agent-${agent}.service").strip() == pid, \
            "the unit was restarted for a renewal"
        fire_once("renewed", "after renewal")
  '';
}
