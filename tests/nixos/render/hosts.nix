# Every machine the renderer writes, by "<group>/<name>": the nodes of the three VM tests
# (../control-plane.nix, ../swarm.nix, ../provisioning.nix), the whole swarm of docs/nixos.md
# ("A whole swarm, declared", extracted by render_hosts.py into HYPERHIVE_DOCS_EXAMPLE with the
# files its commands make), a machine running the swarm's NATS beside nixpkgs' own services.nats,
# one with the hive-gateway behind SSO (its auth_request locations), and the anchor the hardening
# is measured against (anchor-harmonia.nix).
# Each value is the machine's evaluated configuration.
let
  lib = import ../model/nixpkgs-lib.nix;
  pkgs = import ../model/pkgs.nix { inherit lib; };
  evalMachine = import ../model/eval.nix;
  system = builtins.currentSystem;

  # The flake's outputs a VM test uses: the packages (prebuilt, ../model/pkgs.nix) and the modules.
  self = {
    packages.${system} = pkgs.hyperhive;
    nixosModules.default = ../../../modules;
  };

  # A VM test's nodes, each with the test's `defaults` and its name as host name, as nixpkgs'
  # test driver gives them.
  vmTest =
    group: file:
    let
      test = import file { inherit self; } { inherit pkgs lib; };
    in
    lib.mapAttrs' (
      name: node:
      lib.nameValuePair "${group}/${name}" (evalMachine {
        hostName = name;
        modules = [
          node
          (test.defaults or { })
        ];
      })
    ) test.nodes;

  docsDir = builtins.getEnv "HYPERHIVE_DOCS_EXAMPLE";
  docsExample =
    let
      flake = import (/. + docsDir + "/flake.nix");
      outputs = flake.outputs {
        nixpkgs.lib = lib // {
          nixosSystem = { system, modules }: evalMachine { inherit modules; };
        };
        hyperhive = self;
      };
    in
    lib.optionalAttrs (docsDir != "") (
      lib.mapAttrs' (name: lib.nameValuePair "docs-example/${name}") outputs.nixosConfigurations
    );
in
vmTest "control-plane" ../control-plane.nix
// vmTest "swarm" ../swarm.nix
// vmTest "provisioning" ../provisioning.nix
// docsExample
// lib.optionalAttrs (docsDir != "") {
  # Two nats-servers, two units (hyperhive-nats.service and nats.service), each on its own
  # directory and ports; the fragment is the docs example's, from `swarm-controller init`.
  "together/nats-beside-nixpkgs-nats" = evalMachine {
    hostName = "nats";
    modules = [
      ../../../modules
      {
        services.hyperhive.deploy.nats = {
          enable = true;
          fragment = /. + docsDir + "/swarm/nats/nats-server.conf";
        };
        services.nats = {
          enable = true;
          port = 4223;
          dataDir = "/var/lib/other-nats";
          jetstream = true;
        };
      }
    ];
  };
}
// {
  "together/gateway-with-sso" = evalMachine {
    hostName = "swarm";
    modules = [
      ../../../modules
      {
        services.hyperhive.deploy.swarm-controller.enable = true;
        services.hyperhive.deploy.hive-gateway = {
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
      }
    ];
  };
  "anchor/harmonia" = evalMachine {
    hostName = "anchor";
    modules = [ ./anchor-harmonia.nix ];
  };
}
