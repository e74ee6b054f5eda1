# The workspace's packages: one derivation per daemon package, all built from the one Cargo
# workspace and its Cargo.lock, plus the hive-side bundle (`daemon-bins`) and the workspace's test
# suite (`cargo-tests`, a flake check).
{
  lib,
  rustPlatform,
  symlinkJoin,
  nats-server,
  caddy,
  seaweedfs,
  openssl,
  python3,
  matrix-synapse,
}:
let
  workspace = (lib.importTOML ../Cargo.toml).workspace.package;

  # Only what cargo reads, so an edit to docs, deploy/ or a Nix file rebuilds nothing.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../Cargo.toml
      ../Cargo.lock
      ../crates
      ../services
    ];
  };

  common = {
    inherit src;
    inherit (workspace) version;
    cargoLock.lockFile = ../Cargo.lock;
  };

  meta = {
    homepage = workspace.repository;
    license = with lib.licenses; [
      mit
      asl20
    ];
    platforms = lib.platforms.linux;
  };

  # One derivation, building only the named binaries of its cargo packages (by default the one
  # named like it; swarm-controller's `bench` binary is a benchmark, not something to install).
  daemon =
    {
      pname,
      bins,
      description,
      packages ? [ pname ],
    }:
    rustPlatform.buildRustPackage (
      common
      // {
        inherit pname;
        cargoBuildFlags =
          lib.concatMap (package: [
            "--package"
            package
          ]) packages
        ++ lib.concatMap (bin: [
          "--bin"
          bin
        ]) bins;
        # The workspace's tests start real servers and run other packages' binaries: they run
        # once, for the whole workspace, in `cargo-tests` below.
        doCheck = false;
        meta = meta // {
          inherit description;
          mainProgram = builtins.head bins;
        };
      }
    );

  # The S3 server the test kit starts (moto speaks the S3 wire protocol with conditional writes).
  moto = python3.withPackages (
    ps: [ ps.moto ] ++ (ps.moto.optional-dependencies.server or [ ps.flask ps.flask-cors ])
  );
in
lib.fix (self: {
  agents-control = daemon {
    pname = "agents-control";
    bins = [ "agents-control" ];
    description = "hyperhive control plane: pairing, the device registry in a shared bucket, the relay";
  };

  swarm-controller = daemon {
    pname = "swarm-controller";
    # swarmctl ships with the daemon it drives; it is a cargo package of its own.
    packages = [
      "swarm-controller"
      "swarmctl"
    ];
    bins = [
      "swarm-controller"
      "swarmctl"
    ];
    description = "hyperhive swarm daemon (schedules in NATS, API on a unix socket) and swarmctl";
  };

  hive-agent = daemon {
    pname = "hive-agent";
    bins = [ "hive-agent" ];
    description = "hyperhive agent harness: todo queue, turns, schedule ticker";
  };

  hive-c0re = daemon {
    pname = "hive-c0re";
    bins = [ "hive-c0re" ];
    description = "hyperhive hive supervisor: runs a hive's agents in the state the swarm wants, reports its status";
  };

  swarm-authelia-bridge = daemon {
    pname = "swarm-authelia-bridge";
    bins = [ "swarm-authelia-bridge" ];
    description = "hyperhive SSO bridge: the swarm's agent users in Authelia's file user database, behind a bearer token";
  };

  # The hive-side daemons (nix/daemon-bins.nix), and their bundle: the default of
  # services.hyperhive.c0re.package.
  daemonBins = import ./daemon-bins.nix self;
  daemon-bins = symlinkJoin {
    name = "hyperhive-daemon-bins-${workspace.version}";
    paths = self.daemonBins;
    meta = meta // {
      description = "The hive-side hyperhive daemons (services.hyperhive.c0re.package)";
      mainProgram = "hive-c0re";
    };
  };

  # Every package, for `nix build` / `nix profile install` of the whole system.
  all = symlinkJoin {
    name = "hyperhive-${workspace.version}";
    paths = [
      self.agents-control
      self.swarm-controller
      self.hive-agent
      self.hive-c0re
      self.swarm-authelia-bridge
    ];
    meta = meta // {
      description = "Every hyperhive program: agents-control, swarm-controller, swarmctl, hive-agent, hive-c0re, swarm-authelia-bridge";
      mainProgram = "swarmctl";
    };
  };

  # The workspace's whole test suite, exactly as scripts/test runs it: the end-to-end tests start
  # real nats-server, moto, SeaweedFS (`weed`), Caddy and Synapse (`synapse_homeserver`, the
  # provisioning adapters' matrix server) on free loopback ports (the sandbox has a loopback
  # interface), run `openssl` (the pin test compares with it) and run other packages'
  # binaries from target/debug, so every binary is built first. `sh`, `sleep`, `true`, `tr` and
  # `base64` come with the build environment.
  cargo-tests = rustPlatform.buildRustPackage (
    common
    // {
      pname = "hyperhive-cargo-tests";
      nativeCheckInputs = [
        nats-server
        caddy
        moto
        seaweedfs
        openssl
        matrix-synapse
      ];
      buildPhase = ''
        runHook preBuild
        cargo build --workspace --bins --frozen -j "$NIX_BUILD_CORES"
        runHook postBuild
      '';
      doCheck = true;
      checkPhase = ''
        runHook preCheck
        export HOME="$TMPDIR"
        cargo test --workspace --frozen -j "$NIX_BUILD_CORES" -- --test-threads="$NIX_BUILD_CORES"
        runHook postCheck
      '';
      installPhase = ''
        runHook preInstall
        touch "$out"
        runHook postInstall
      '';
      meta = meta // {
        description = "The hyperhive workspace's tests against real servers";
      };
    }
  );
})
