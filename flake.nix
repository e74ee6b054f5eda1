{
  description = "hyperhive: AI coding agents across many Linux and NixOS machines, scheduled prompts, and a control plane that survives losing a machine";

  # nixpkgs only: rustPlatform.buildRustPackage with the workspace's Cargo.lock builds every
  # package, so no Rust build helper earns its place. A release, whose rustc the offline build
  # checks the workspace's rust-version against (tests/offline-build/run.py).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.11";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;
      # The daemons are Linux programs (systemd units, unix sockets, NixOS modules).
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      hyperhiveFor = pkgs: pkgs.callPackage ./nix/packages.nix { };
    in
    {
      packages = forAllSystems (
        pkgs:
        let
          hyperhive = hyperhiveFor pkgs;
        in
        {
          inherit (hyperhive)
            agents-control
            swarm-controller
            hive-agent
            hive-c0re
            swarm-authelia-bridge
            daemon-bins
            ;
          default = hyperhive.all;
        }
      );

      # `pkgs.hyperhive.<package>`, built with the nixpkgs it is applied to; the modules' `package`
      # options default to these when the overlay is applied.
      overlays.default = final: _prev: { hyperhive = hyperhiveFor final; };

      # The modules build their default packages with the system's own pkgs, so they need neither
      # the overlay nor a writable `nixpkgs.overlays` (they work in pkgs.testers.runNixOSTest).
      nixosModules = {
        agents-control = ./modules/agents-control.nix;
        swarm-controller = ./modules/swarm-controller.nix;
        swarm-nats = ./modules/swarm-nats.nix;
        hive-agent = ./modules/hive-agent.nix;
        hive-c0re = ./modules/hive-c0re.nix;
        swarm-authelia-bridge = ./modules/swarm-authelia-bridge.nix;
        hive-gateway = ./modules/hive-gateway.nix;
        default = ./modules;
      };

      checks = forAllSystems (pkgs: import ./nix/checks.nix { inherit pkgs self; });

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          # The toolchain, and the real servers the tests and scripts/demo start (scripts/setup
          # installs the same ones from PyPI on machines without Nix).
          packages = [
            pkgs.cargo
            pkgs.rustc
            pkgs.clippy
            pkgs.rustfmt
            pkgs.rust-analyzer
            pkgs.nats-server
            pkgs.natscli
            pkgs.minio
            pkgs.minio-client
            pkgs.caddy
            pkgs.seaweedfs
            pkgs.matrix-synapse
            (pkgs.python3.withPackages (
              ps: [ ps.moto ] ++ (ps.moto.optional-dependencies.server or [ ps.flask ps.flask-cors ])
            ))
            pkgs.shellcheck
            pkgs.openssl
          ];
          RUST_SRC_PATH = "${pkgs.rustPlatform.rustLibSrc}";
        };
      });

      formatter = forAllSystems (pkgs: pkgs.nixfmt-tree);
    };
}
