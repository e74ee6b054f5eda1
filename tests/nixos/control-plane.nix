# VM test `control-plane` (a flake check: `nix build .#checks.x86_64-linux.vm-control-plane`):
# MinIO, three agents-control copies from the NixOS module, Caddy with TLS in front (the very
# deploy/Caddyfile), and a client machine running headless devices. It pairs a host and a client
# with codes made on a copy, relays messages between them, stops each copy in turn while they keep
# talking, then stops MinIO: pairing and making codes are refused, /readyz fails, the relay carries
# on, and everything works again once MinIO is back. tests/nixos/README.md names the end-to-end
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
  bucketUser = "hyperhive-test";
  bucketPassword = "hyperhive-test-secret";
  minioEnv = pkgs.writeText "minio.env" ''
    MINIO_ROOT_USER=${bucketUser}
    MINIO_ROOT_PASSWORD=${bucketPassword}
  '';
  bucketEnv = pkgs.writeText "bucket.env" ''
    AWS_ACCESS_KEY_ID=${bucketUser}
    AWS_SECRET_ACCESS_KEY=${bucketPassword}
  '';

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
      environment.etc."hyperhive/bucket.env" = {
        source = bucketEnv;
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
        };
        keyFile = "/etc/hyperhive/control-key";
        environmentFile = "/etc/hyperhive/bucket.env";
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
    minio =
      { ... }:
      {
        environment.etc."minio.env".source = minioEnv;
        services.minio = {
          enable = true;
          rootCredentialsFile = "/etc/minio.env";
        };
        networking.firewall.allowedTCPPorts = [ 9000 ];
        virtualisation.diskSize = 2048;
        virtualisation.memorySize = 2048;
        # The bucket, made once MinIO answers.
        systemd.services.minio-bucket = {
          wantedBy = [ "multi-user.target" ];
          requires = [ "minio.service" ];
          after = [ "minio.service" ];
          path = [ pkgs.minio-client ];
          environment.HOME = "/run/minio-bucket";
          serviceConfig = {
            Type = "oneshot";
            RemainAfterExit = true;
            RuntimeDirectory = "minio-bucket";
            EnvironmentFile = "/etc/minio.env";
          };
          script = ''
            until mc alias set local http://127.0.0.1:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD"; do
              sleep 1
            done
            mc mb --ignore-existing local/hyperhive
          '';
        };
      };

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

    copies = [cp1, cp2, cp3]
    devices = "/root/devices"

    def readyz(node, code):
        node.wait_until_succeeds(
            f"test \"$(curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:8791/readyz)\" = {code}",
            timeout=60,
        )

    def connect(name):
        """A headless device (`device connect`, JSON lines in and out) as a transient unit: lines
        appended to DEVICES/NAME.in are its input, its output goes to DEVICES/NAME.out."""
        client.succeed(f"touch {devices}/{name}.in")
        client.succeed(
            f"systemd-run --unit=device-{name} --setenv=PATH=\"$PATH\" sh -c "
            f"'tail -f {devices}/{name}.in | agents-control device connect --identity {devices}/{name}.id "
            f"> {devices}/{name}.out 2>&1'"
        )

    def send(name, to, body):
        frame = json.dumps({"type": "send", "to": to, "id": body, "body": body})
        client.succeed(f"echo '{frame}' >> {devices}/{name}.in")

    def wait_received(name, body):
        client.wait_until_succeeds(f"grep -F '{body}' {devices}/{name}.out", timeout=60)

    def exchange(tag):
        """The client sends to the host and the host answers; both arrive."""
        send("client", host_id, f"to-host {tag}")
        wait_received("host", f"to-host {tag}")
        send("host", client_id, f"to-client {tag}")
        wait_received("client", f"to-client {tag}")

    def only_device(kind):
        """The id of the one device of this kind the store holds."""
        listed = json.loads(cp1.succeed(f"agents-control {kind} --json"))
        assert len(listed) == 1, listed
        return listed[0]["id"]

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

    with subtest("a host and a client pair with codes made on a copy"):
        client.succeed(f"mkdir -p {devices}")
        host_code = cp1.succeed("agents-control code --host --name vm-host").strip()
        client_code = cp1.succeed("agents-control code --client --name vm-client").strip()
        client.succeed(f"agents-control device pair {host_code} --identity {devices}/host.id")
        client.succeed(f"agents-control device pair {client_code} --identity {devices}/client.id")
        # A code redeems once.
        client.fail(f"agents-control device pair {client_code} --identity {devices}/again.id")
        host_id = only_device("hosts")
        client_id = only_device("clients")

    with subtest("they exchange messages through the proxy"):
        connect("host")
        connect("client")
        exchange("first")

    # Each copy in turn: whichever copy the devices are on is stopped at some point.
    for copy in copies:
        with subtest(f"{copy.name} stops: the devices carry on through the other copies"):
            copy.succeed("systemctl stop agents-control.service")
            exchange(f"without {copy.name}")
            copy.succeed("systemctl start agents-control.service")
            readyz(copy, 200)

    with subtest("MinIO stops: pairing is refused, the relay carries on"):
        spare_code = cp2.succeed("agents-control code --client --name spare").strip()
        minio.succeed("systemctl stop minio.service")
        for copy in copies:
            readyz(copy, 503)
        refused = cp1.fail("agents-control code --client 2>&1")
        assert "store unavailable" in refused, refused
        client.fail(f"agents-control device pair {spare_code} --identity {devices}/spare.id")
        exchange("while the bucket is down")

    with subtest("MinIO is back: pairing works again"):
        minio.succeed("systemctl start minio.service")
        for copy in copies:
            readyz(copy, 200)
        client.wait_until_succeeds(
            "curl -sf --cacert ${./fixtures/proxy.crt} https://proxy/readyz", timeout=60
        )
        client.succeed(f"agents-control device pair {spare_code} --identity {devices}/spare.id")
        exchange("after the bucket came back")
  '';
}
