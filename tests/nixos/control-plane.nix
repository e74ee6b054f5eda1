# VM test `control-plane` (a flake check: `nix build .#checks.x86_64-linux.vm-control-plane`):
# MinIO, three agents-control copies from the NixOS module, Caddy with TLS in front (the very
# deploy/Caddyfile), and a client machine running headless devices. It pairs a host and a client
# with codes made on a copy, relays messages between them, stops each copy in turn while they keep
# talking, then stops MinIO: pairing and making codes are refused, /readyz fails, the relay carries
# on, a device whose copy dies meanwhile comes back on another, and everything works again once
# MinIO is back. tests/nixos/README.md names the end-to-end
# tests this mirrors.
{ self }:
{ pkgs, lib, ... }:
let
  agents-control = self.packages.${pkgs.stdenv.hostPlatform.system}.agents-control;

  # Test-only secrets, deliberately in the Nix store: this VM test is their only user. The module
  # refuses store paths for its own secret options, so the nodes copy them to /etc first, as a
  # secret manager would deliver real ones.
  controlKey = pkgs.runCommand "test-control-key" { } ''
    echo 'TGm-tmaJMFvUjY605DGGe2LFHuwwrADMG2g4wuy_gY8=' | tr '_-' '/+' | base64 -d > "$out"
  '';
  # The bucket node and its keys (tests/nixos/minio.nix, shared with the swarm test).
  minio = import ./minio.nix { inherit pkgs; };

  # fixtures/proxy.crt is self-signed for the name `proxy`; this is its pin (the base64url SHA-256
  # of its SubjectPublicKeyInfo, as `agents-control pin --cert fixtures/proxy.crt` prints it).
  pin = "A-zveJJH17Iw_n8pwahPVvbGxARouRoPpCXqiy1xfO4";

  # deploy/Caddyfile itself, with this network's name and the fixture certificate, so the test
  # checks the file users deploy. Every replaced text must be there: a changed Caddyfile fails here.
  caddyfile =
    let
      text = builtins.readFile ../../deploy/Caddyfile;
      replacements = {
        "https://127.0.0.1:8443 {" = "https://proxy {";
        "default_sni 127.0.0.1" = "default_sni proxy";
        "{$PROXY_CERT:/secrets/proxy.crt}" = "${./fixtures/proxy.crt}";
        "{$PROXY_KEY:/secrets/proxy.key}" = "${./fixtures/proxy.key}";
      };
      missing = lib.filter (needle: !lib.hasInfix needle text) (lib.attrNames replacements);
    in
    assert lib.assertMsg (missing == [ ])
      "tests/nixos/control-plane.nix: deploy/Caddyfile no longer contains ${lib.concatStringsSep ", " missing}";
    pkgs.writeText "Caddyfile" (
      builtins.replaceStrings (lib.attrNames replacements) (lib.attrValues replacements) text
    );

  copy =
    { ... }:
    {
      imports = [ self.nixosModules.default ];
      environment.etc."hyperhive/control-key" = {
        source = controlKey;
        mode = "0400";
      };
      environment.etc."hyperhive/bucket-credentials" = {
        source = minio.credentials;
        mode = "0400";
      };
      environment.systemPackages = [ pkgs.curl ];
      services.hyperhive.deploy.agents-control = {
        enable = true;
        openFirewall = true;
        store = {
          url = "s3://hyperhive/control";
          endpoint = "http://minio:9000";
          pathStyle = true;
          credentialsFile = "/etc/hyperhive/bucket-credentials";
        };
        keyFile = "/etc/hyperhive/control-key";
        url = "https://proxy";
        name = "VM test";
        inherit pin;
      };
    };
in
{
  name = "hyperhive-control-plane";

  defaults.documentation.enable = false;

  nodes = {
    minio = minio.node;

    cp1 = copy;
    cp2 = copy;
    cp3 = copy;

    proxy =
      { ... }:
      {
        services.caddy = {
          enable = true;
          configFile = caddyfile;
          # deploy/Caddyfile closes Caddy's admin endpoint, which a reload would need.
          enableReload = false;
        };
        networking.firewall.allowedTCPPorts = [ 443 ];
      };

    client =
      { ... }:
      {
        environment.systemPackages = [
          agents-control
          pkgs.curl
        ];
      };
  };

  testScript = ''
    import json
    import shlex
    import time

    copies = [cp1, cp2, cp3]
    devices = "/root/devices"
    cli = "${lib.getExe agents-control}"

    def readyz(node, code):
        node.wait_until_succeeds(
            f"test \"$(curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:8791/readyz)\" = {code}",
            timeout=60,
        )

    def pair(code, name):
        # `device pair` prints one JSON line: {"device_id", "kind", "name"}.
        paired = json.loads(client.succeed(f"{cli} device pair {code} --identity {devices}/{name}.id --name {name}"))
        assert paired["name"] == name, paired
        return paired["device_id"]

    def listed(kind):
        return [d["id"] for d in json.loads(cp1.succeed(f"agents-control {kind} --json"))]

    def node_of(copy_id):
        # A `connected` event names the copy by its id, which the copy logs when it starts serving
        # (other copies log it too, as their peer: only the `serving` line says whose it is).
        # (`grep -F`, not `grep -qF`: the driver runs commands with `set -o pipefail`, and a grep
        # that stops reading at its first match can fail journalctl with SIGPIPE.)
        for node in copies:
            if node.execute(f"journalctl -u agents-control.service -o cat | grep serving | grep -F {copy_id} >/dev/null")[0] == 0:
                return node
        raise Exception(f"no copy logged the id {copy_id}")

    class Device:
        # `agents-control device connect` in a transient unit on the client machine: JSON-line
        # commands written to NAME.in (a FIFO the unit's shell also holds open for writing, so the
        # device never reads end of file), events read from NAME.out, its stderr and exit status
        # in NAME.err.

        def __init__(self, name, device_id):
            self.name = name
            self.id = device_id
            self.path = f"{devices}/{name}"
            self.sent = {}

        def start(self):
            p = self.path
            runner = (
                f"exec 3<>{p}.in; {cli} device connect --identity {p}.id <{p}.in >{p}.out 2>{p}.err; "
                f"echo exit $? >>{p}.err"
            )
            # NAME.out exists before the unit runs, so reading events never races its creation.
            client.succeed(
                f"mkfifo {p}.in && touch {p}.out && "
                f"systemd-run --unit=device-{self.name} ${pkgs.runtimeShell} -c {shlex.quote(runner)}"
            )

        def command(self, command):
            line = json.dumps(command)
            client.succeed(f"echo {shlex.quote(line)} > {self.path}.in")

        def events(self):
            # Only complete lines: the last one may still be being written.
            text = client.succeed(f"cat {self.path}.out")
            return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]

        def wait_for(self, what, probe, timeout=60):
            # Polls the events until PROBE returns something other than None, and returns that.
            deadline = time.monotonic() + timeout
            while True:
                found = probe(self.events())
                if found is not None:
                    return found
                if time.monotonic() > deadline:
                    print(client.execute(f"tail -n 30 {self.path}.out {self.path}.err")[1])
                    raise Exception(f"{self.name}: no {what} within {timeout} s")
                time.sleep(0.5)

        def wait_event(self, what, matches, timeout=60):
            return self.wait_for(what, lambda events: next((e for e in reversed(events) if matches(e)), None), timeout)

        def connections(self):
            return [e for e in self.events() if e["event"] == "connected"]

        def wait_connected(self, after=0):
            # The copy id of the first `connected` event beyond the first AFTER ones.
            def probe(events):
                connected = [e for e in events if e["event"] == "connected"]
                return connected[after]["copy"] if len(connected) > after else None

            return self.wait_for("connection", probe)

        def send(self, to, body):
            self.command({"command": "send", "to": to.id, "body": body})
            self.sent[to.id] = self.sent.get(to.id, 0) + 1
            return self.sent[to.id]

        def wait_acked(self, to, seq):
            self.wait_event(
                f"ack of message {seq} to {to.name}",
                lambda e: e["event"] == "acked" and e["to"] == to.id and e["seq"] >= seq,
            )

        def wait_message(self, sender, body):
            self.wait_event(
                f"message {body} from {sender.name}",
                lambda e: e["event"] == "message" and e["from"] == sender.id and e["body"] == body,
            )

        def assert_once(self, sender, body):
            count = sum(
                1 for e in self.events() if e["event"] == "message" and e["from"] == sender.id and e["body"] == body
            )
            assert count == 1, f"{self.name} got {body} {count} times"

        def request(self, request_id, request, timeout=60):
            self.command({"command": "request", "id": request_id, "request": request})
            return self.wait_event(
                f"answer to request {request_id}",
                lambda e: e["event"] in ("reply", "request_failed") and e["id"] == request_id,
                timeout,
            )

    def deliver(sender, receiver, body):
        # Sent, delivered exactly once, and acked end to end.
        seq = sender.send(receiver, body)
        receiver.wait_message(sender, body)
        sender.wait_acked(receiver, seq)
        receiver.assert_once(sender, body)

    def exchange(tag):
        # The client sends to the host and the host answers.
        deliver(window, host, {"prompt": f"to the host {tag}"})
        deliver(host, window, {"reply": f"to the client {tag}"})

    def store_lists(node):
        # How many LISTs of the store the copy has made: each registry refresh makes some.
        metrics = node.succeed("curl -sf http://127.0.0.1:8791/metrics")
        line = 'agents_control_store_operations_total{operation="list",result="ok"}'
        return sum(float(l.split()[-1]) for l in metrics.splitlines() if l.startswith(line))

    def wait_registry_read():
        # Every copy has refreshed its registry since now: four more LISTs hold a whole refresh
        # (devices, then members) that began after this call, as three_copies.rs waits. Only
        # devices a copy has read are known to it while the bucket is away.
        targets = [(node, store_lists(node) + 4) for node in copies]
        for node, target in targets:
            node.wait_until_succeeds(
                "curl -sf http://127.0.0.1:8791/metrics | awk "
                "'/^agents_control_store_operations_total[{]operation=\"list\",result=\"ok\"[}]/ { n = $2 } "
                f"END {{ exit !(n >= {target}) }}'",
                timeout=60,
            )

    def host_online(event):
        hosts = [h for h in event.get("hosts", []) if h["device_id"] == host.id]
        return event["event"] == "presence" and hosts != [] and hosts[0]["online"]

    start_all()

    with subtest("the bucket, three copies and the proxy come up"):
        minio.wait_for_unit("minio-bucket.service")
        for copy in copies:
            copy.wait_for_unit("agents-control.service")
            copy.wait_for_open_port(8791)
            readyz(copy, 200)
        proxy.wait_for_unit("caddy.service")
        proxy.wait_for_open_port(443)
        client.wait_until_succeeds(
            "curl -sf --cacert ${./fixtures/proxy.crt} https://proxy/readyz", timeout=60
        )

    with subtest("a host and a client pair through the proxy with codes made on a copy"):
        client.succeed(f"mkdir -p {devices}")
        host_code = cp1.succeed("agents-control code --host --name vm-host").strip()
        client_code = cp1.succeed("agents-control code --client --role admin --name vm-client").strip()
        host = Device("host", pair(host_code, "host"))
        window = Device("window", pair(client_code, "window"))
        # A code redeems once.
        client.fail(f"{cli} device pair {client_code} --identity {devices}/again.id --name again")
        assert listed("hosts") == [host.id], listed("hosts")
        assert listed("clients") == [window.id], listed("clients")

    with subtest("both connect through the proxy; the client sees the host online"):
        host.start()
        window.start()
        host.wait_connected()
        window.wait_connected()
        window.wait_event("presence with the host online", host_online)

    with subtest("they exchange messages both ways, each acked end to end"):
        exchange("first")

    with subtest("the copy the host is on is killed: the host reconnects to another, nothing is lost"):
        before = len(host.connections())
        dead = node_of(host.connections()[-1]["copy"])
        # In flight while its copy dies: kept by the client's outbox until the host acks it.
        seq = window.send(host, {"prompt": f"sent as {dead.name} dies"})
        dead.succeed("systemctl kill --signal=SIGKILL agents-control.service")
        # Stopped as well, so systemd does not restart it on the same machine meanwhile.
        dead.succeed("systemctl stop agents-control.service")
        moved_to = node_of(host.wait_connected(after=before))
        assert moved_to != dead, f"the host reconnected to {moved_to.name}, which was killed"
        host.wait_message(window, {"prompt": f"sent as {dead.name} dies"})
        window.wait_acked(host, seq)
        host.assert_once(window, {"prompt": f"sent as {dead.name} dies"})
        exchange(f"after {dead.name} was killed")
        dead.succeed("systemctl start agents-control.service")
        readyz(dead, 200)

    # Each copy in turn: whichever copy the devices are on is stopped at some point.
    for copy in copies:
        with subtest(f"{copy.name} stops: the devices carry on through the other copies"):
            copy.succeed("systemctl stop agents-control.service")
            exchange(f"without {copy.name}")
            copy.succeed("systemctl start agents-control.service")
            readyz(copy, 200)

    with subtest("MinIO stops: pairing and forgetting are refused, the relay carries on"):
        spare_code = cp2.succeed("agents-control code --client --name spare").strip()
        wait_registry_read()
        minio.succeed("systemctl stop minio.service")
        for copy in copies:
            readyz(copy, 503)
        refused = cp1.fail("agents-control code --client 2>&1")
        assert "store unavailable" in refused, refused
        client.fail(f"{cli} device pair {spare_code} --identity {devices}/spare.id --name spare")
        # A copy gives up on an unreachable bucket after its own retries: allow for them.
        answer = window.request(1, {"op": "forget_device", "device_id": host.id}, timeout=120)
        assert answer["event"] == "request_failed" and answer["retry"], answer
        exchange("while the bucket is down")

    with subtest("the host's copy dies while MinIO is down: the host is back on another copy"):
        # Every copy fails /readyz now, so the proxy's checked route has no upstream and its
        # fail-open route (deploy/Caddyfile's handle_errors) takes the host to a live copy, which
        # knows it from its in-memory registry.
        before = len(host.connections())
        outage_dead = node_of(host.connections()[-1]["copy"])
        outage_dead.succeed("systemctl kill --signal=SIGKILL agents-control.service")
        outage_dead.succeed("systemctl stop agents-control.service")
        moved_to = node_of(host.wait_connected(after=before))
        assert moved_to != outage_dead, f"the host reconnected to {moved_to.name}, which was killed"
        exchange(f"after {outage_dead.name} died during the outage")

    with subtest("MinIO is back: pairing works again"):
        minio.succeed("systemctl start minio.service")
        outage_dead.succeed("systemctl start agents-control.service")
        for copy in copies:
            readyz(copy, 200)
        client.wait_until_succeeds(
            "curl -sf --cacert ${./fixtures/proxy.crt} https://proxy/readyz", timeout=60
        )
        pair(spare_code, "spare")
        exchange("after the bucket came back")

    with subtest("the client forgets the host over its link: the host is cut off everywhere"):
        answer = window.request(2, {"op": "forget_device", "device_id": host.id})
        assert answer == {"event": "reply", "id": 2, "reply": {"op": "forgotten", "device_id": host.id}}, answer
        # The host's link is closed with 4004 (forgotten) and `device connect` stops for good.
        client.wait_until_succeeds(f"grep -q '^exit [1-9]' {host.path}.err", timeout=30)
        client.succeed(f"grep -q 4004 {host.path}.err")
        window.wait_event(
            "presence saying the host is gone",
            lambda e: e["event"] == "presence"
            and e["changed"]
            and any(h["device_id"] == host.id and not h["paired"] for h in e["hosts"]),
        )
        assert host.id not in listed("hosts"), listed("hosts")
        # Its identity is refused as unknown (4001), and `device connect` stops instead of retrying.
        # A copy hears of the forget over its peer links, or at the latest at its next registry
        # refresh (2 s): one whose peer link to the forgetting copy is still forming after the
        # restarts above would let the host in and then close it with 4004. The refusal is
        # asserted once every copy has read the registry since the forget.
        wait_registry_read()
        # (Its exit status read apart: under the driver's `set -o pipefail` a pipe into grep would
        # fail on that non-zero status however the output reads.)
        status, refused = client.execute(f"timeout 30 {cli} device connect --identity {host.path}.id </dev/null 2>&1")
        assert status not in (0, 124) and "4001" in refused, (status, refused)
  '';
}
