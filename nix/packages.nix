# The workspace's packages: one build of the Cargo workspace (`workspaceBuild`, from Cargo.lock
# alone), one small package per daemon holding its programs copied out of that build, the
# hive-side bundle (`daemon-bins`) and the workspace's test suite (`cargo-tests`, a flake check).
{
  lib,
  rustPlatform,
  runCommand,
  symlinkJoin,
  nats-server,
  caddy,
  seaweedfs,
  openssl,
  python3,
  matrix-synapse,
  nginx,
  chromium,
  chromedriver,
  curl,
  procps,
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

  # The programs each package installs. Every one is the binary of the cargo package named like
  # it (swarmctl is a cargo package of its own, shipped with the daemon it drives); swarm-controller's
  # benchmarks are not programs.
  programs = {
    agents-control = [ "agents-control" ];
    swarm-controller = [
      "swarm-controller"
      "swarmctl"
    ];
    hive-agent = [ "hive-agent" ];
    hive-c0re = [ "hive-c0re" ];
    swarm-authelia-bridge = [ "swarm-authelia-bridge" ];
  };

  # The one build of the workspace: every program above, the dependency tree compiled once.
  # tests/offline-build runs this very build phase (these flags, vendored crates, no network).
  workspaceBuild = rustPlatform.buildRustPackage (
    common
    // {
      pname = "hyperhive-workspace";
      cargoBuildFlags = lib.concatMap (program: [
        "--package"
        program
        "--bin"
        program
      ]) (lib.concatLists (lib.attrValues programs));
      # The workspace's tests start real servers and run other packages' binaries: they run
      # once, in `cargo-tests` below.
      doCheck = false;
      meta = meta // {
        description = "Every hyperhive program, built once; the packages copy theirs out of it";
      };
    }
  );

  # A package: its programs copied out of the workspace build. Copies, not links, so a package's
  # closure is its own binaries and never the whole build (Nix refuses the build if a binary
  # still refers to it).
  package =
    name: description:
    runCommand "${name}-${workspace.version}"
      {
        passthru = {
          programs = programs.${name};
          inherit workspaceBuild;
        };
        disallowedReferences = [ workspaceBuild ];
        meta = meta // {
          inherit description;
          mainProgram = builtins.head programs.${name};
        };
      }
      ''
        mkdir -p "$out/bin"
        ${lib.concatMapStrings (program: ''
          cp ${workspaceBuild}/bin/${program} "$out/bin/"
        '') programs.${name}}
      '';

  # The tests the build sandbox cannot run, left out of `cargo-tests` by the module they are in
  # (docs/nixos.md): `needs_root::` tests run a program as another user, and the sandbox's builder
  # is one unprivileged user; `needs_nix::` tests evaluate this file with nix-instantiate, and a
  # build has no Nix store to evaluate in.
  sandboxSkips = [
    "needs_root::"
    "needs_nix::"
  ];

  # The S3 server the test kit starts (moto speaks the S3 wire protocol with conditional writes).
  moto = python3.withPackages (
    ps: [ ps.moto ] ++ (ps.moto.optional-dependencies.server or [ ps.flask ps.flask-cors ])
  );
in
lib.fix (self: {
  inherit workspaceBuild sandboxSkips;

  agents-control = package "agents-control" "hyperhive control plane: pairing, the device registry in a shared bucket, the relay";

  swarm-controller = package "swarm-controller" "hyperhive swarm daemon (schedules in NATS, API on a unix socket) and swarmctl";

  hive-agent = package "hive-agent" "hyperhive agent harness: todo queue, turns, schedule ticker";

  hive-c0re = package "hive-c0re" "hyperhive hive supervisor: runs a hive's agents in the state the swarm wants, reports its status";

  swarm-authelia-bridge = package "swarm-authelia-bridge" "hyperhive SSO bridge: the swarm's agent users in Authelia's file user database, behind a bearer token";

  # The hive-side daemons (nix/daemon-bins.nix), and their bundle: the default of
  # services.hyperhive.c0re.package.
  daemonBins = import ./daemon-bins.nix self;
  daemon-bins = symlinkJoin {
    name = "hyperhive-daemon-bins-${workspace.version}";
    paths = self.daemonBins;
    # Nix fails the build if anything in the bundle's closure is the swarm's daemon or the
    # whole workspace build.
    disallowedRequisites = [
      self.swarm-controller
      workspaceBuild
    ];
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

  # The workspace's whole test suite as scripts/test runs it, but for the tests the build sandbox
  # cannot run (`sandboxSkips`). The end-to-end tests start real servers on free loopback ports
  # (the sandbox has a loopback interface) and run other packages' binaries from target/debug, so
  # every binary is built first. The inputs are every program the tests run, each the nixpkgs
  # package of one entry of the test kit's list (`Tool` in crates/testkit/src/tools.rs; its
  # tests/nix_check_inputs.rs compares the two). `sh`, `sleep`, `true`, `tr` and `base64` come
  # with the build environment.
  cargo-tests = rustPlatform.buildRustPackage (
    common
    // {
      pname = "hyperhive-cargo-tests";
      nativeCheckInputs = [
        nats-server
        moto
        seaweedfs
        caddy
        nginx
        matrix-synapse
        chromium
        chromedriver
        curl
        openssl
        procps
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
        cargo test --workspace --frozen -j "$NIX_BUILD_CORES" -- --test-threads="$NIX_BUILD_CORES" ${
          lib.concatMapStringsSep " " (name: "--skip ${name}") sandboxSkips
        }
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
