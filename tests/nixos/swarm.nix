# VM test `swarm` (a flake check: `nix build .#checks.x86_64-linux.vm-swarm`): NATS in JWT mode
# from `swarm-controller nats init`, swarm-controller from its NixOS module, and two hives running
# one agent each (services.hyperhive.agents). A schedule added with `swarmctl` fires in both
# agents; an agent killed and restarted refires nothing; an agent's credential reads its own
# schedules and not another agent's; only root and the socket's group reach the API.
# tests/nixos/README.md names the end-to-end tests this mirrors.
{ self }:
{ pkgs, lib, ... }:
let
  swarm-controller = self.packages.${pkgs.stdenv.hostPlatform.system}.swarm-controller;

  # The swarm's NATS credentials, made at build time by the program itself. Test-only secrets,
  # deliberately in the Nix store; the nodes copy what they need to /etc, as a secret manager
  # would deliver real ones (the modules refuse store paths). A long TTL: a cached build of this
  # must not hand out expired credentials.
  nats-init = pkgs.runCommand "swarm-nats-init" { nativeBuildInputs = [ swarm-controller ]; } ''
    swarm-controller nats init --out "$out"
    for agent in alpha beta; do
      swarm-controller nats agent-creds "$agent" --from "$out" --out "$out/$agent.creds" --ttl 3650d
    done
  '';

  # `nats init` and `nats agent-creds` write a fragment (operator, accounts, memory resolver); the server's own
  # config adds listen and JetStream.
  nats-conf = pkgs.runCommand "nats.conf" { } ''
    {
      echo 'listen: "0.0.0.0:4222"'
      echo 'jetstream { store_dir: "/var/lib/nats", max_file_store: 4GB }'
      cat ${nats-init}/nats-server.conf
    } > "$out"
  '';

  secret = file: {
    source = "${nats-init}/${file}";
    mode = "0400";
  };

  hive =
    agent:
    { ... }:
    {
      imports = [ self.nixosModules.default ];
      environment.etc."hyperhive/${agent}.creds" = secret "${agent}.creds";
      environment.systemPackages = [ pkgs.natscli ];
      services.hyperhive.agents.${agent} = {
        nats.url = "nats://nats:4222";
        credentialsFile = "/etc/hyperhive/${agent}.creds";
        # A harmless turn: record which todo ran, and its body.
        turnCommand = ''printf 'source=%s id=%s\n' "$HIVE_TODO_SOURCE" "$HIVE_TODO_ID" >> turns.log; cat >> turns.log; echo >> turns.log'';
        scheduleTick = "2s";
      };
    };
in
{
  name = "hyperhive-swarm";

  defaults.documentation.enable = false;

  nodes = {
    nats =
      { ... }:
      {
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
      };

    controller =
      { ... }:
      {
        imports = [ self.nixosModules.default ];
        environment.etc."hyperhive/controller.creds" = secret "controller.creds";
        services.hyperhive.deploy.swarm-controller = {
          enable = true;
          nats = {
            url = "nats://nats:4222";
            credentialsFile = "/etc/hyperhive/controller.creds";
          };
          reconcileInterval = 5;
        };
        # An operator in the socket's group, and a user who is not.
        users.users.swarm-operator = {
          isNormalUser = true;
          extraGroups = [ "swarm-controller" ];
        };
        users.users.outsider.isNormalUser = true;
      };

    hive1 = hive "alpha";
    hive2 = hive "beta";
  };

  testScript = ''
    import json

    def turns(hive, agent, source):
        out = hive.succeed(f"grep -c -F 'source={source} ' /var/lib/hive-agent-{agent}/turns.log || true")
        return int(out.strip() or "0")

    def wait_turns(hive, agent, source, count):
        hive.wait_until_succeeds(
            f"test \"$(grep -c -F 'source={source} ' /var/lib/hive-agent-{agent}/turns.log)\" -ge {count}",
            timeout=120,
        )

    def add_schedule(args):
        # Anchored a few seconds ahead, so the first slot falls after the schedule exists.
        anchor = controller.succeed("date -u -d '+5 seconds' +%Y-%m-%dT%H:%M:%SZ").strip()
        return json.loads(controller.succeed(f"swarmctl schedule add --json --anchor {anchor} {args}"))["id"]

    nats_as = "nats --server nats://nats:4222 --creds /etc/hyperhive/alpha.creds --inbox-prefix _INBOX_alpha --timeout 5s"
    direct_get = "req '$JS.API.DIRECT.GET.KV_agent-schedules.$KV.agent-schedules.{}' '''"

    start_all()

    with subtest("NATS, the controller and both agents come up"):
        nats.wait_for_unit("nats.service")
        nats.wait_for_open_port(4222)
        controller.wait_for_unit("swarm-controller.service")
        controller.wait_for_file("/run/swarm-controller/controller.sock")
        controller.succeed("test -S /run/swarm-controller/controller.sock")
        hive1.wait_for_unit("hive-agent-alpha.service")
        hive2.wait_for_unit("hive-agent-beta.service")

    with subtest("only root and the socket's group reach the API"):
        controller.succeed("swarmctl schedule list")
        controller.succeed("su swarm-operator -c 'swarmctl schedule list'")
        controller.fail("su outsider -c 'swarmctl schedule list'")

    with subtest("a schedule for both agents fires in both"):
        daily = add_schedule("--name daily --agent alpha --agent beta --body 'hello from the VM test' --every 1h")
        wait_turns(hive1, "alpha", f"schedule:{daily}", 1)
        wait_turns(hive2, "beta", f"schedule:{daily}", 1)
        hive1.succeed("grep -F 'hello from the VM test' /var/lib/hive-agent-alpha/turns.log")

    with subtest("an agent killed and restarted refires nothing"):
        hive1.succeed("systemctl kill --signal=KILL hive-agent-alpha.service")
        hive1.wait_until_succeeds("systemctl is-active hive-agent-alpha.service", timeout=60)
        # A later one-shot firing proves the restarted agent has ticked over `daily` since.
        witness = add_schedule("--name witness --agent alpha --body 'witness' --once")
        wait_turns(hive1, "alpha", f"schedule:{witness}", 1)
        assert turns(hive1, "alpha", f"schedule:{daily}") == 1, "the restarted agent refired a slot"
        assert turns(hive1, "alpha", f"schedule:{witness}") == 1

    with subtest("the controller restarts onto the same socket directory"):
        controller.succeed("systemctl restart swarm-controller.service")
        controller.wait_until_succeeds("swarmctl schedule list", timeout=60)

    with subtest("an agent's credential reads its own schedules and nothing else"):
        own = hive1.succeed(f"{nats_as} {direct_get.format('alpha')}")
        assert "hello from the VM test" in own, own
        hive1.fail(f"{nats_as} {direct_get.format('beta')}")
        status, watched = hive1.execute(f"timeout 10 {nats_as} kv watch agent-schedules 2>&1")
        assert status != 0 and "hello from the VM test" not in watched, watched
  '';
}
