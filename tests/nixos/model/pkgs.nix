# The `pkgs` the modules and the VM tests' nodes are evaluated with: the builders they call
# (writeText, writeShellScriptBin, runCommand with makeWrapper, symlinkJoin) and the packages they
# name, as real derivations that Nix builds in a local store (tests/nixos/render/nix_store.py makes
# one). nixpkgs' stdenv cannot be fetched here, so every builder is this machine's /bin/sh with its
# coreutils; a package is a directory whose bin/ holds the real program:
#
# - hyperhive's daemons: links to the project's build (`buildDir`, HYPERHIVE_BUILD_DIR, by default
#   target/debug of this checkout);
# - nats-server, caddy and Synapse (synapse_homeserver, register_new_matrix_user): links to
#   scripts/setup's tools (`toolsDir`, HYPERHIVE_TOOLS_DIR, by default .tools/bin); nginx, bash,
#   coreutils, systemd...: this machine's /usr/bin and /usr/sbin;
# - programs this machine does not have (minio, forgejo, natscli): an empty bin/, so a unit
#   naming one fails `systemd-analyze verify` instead of passing unseen.
{ lib }:
let
  root = toString ../../..;
  fromEnv = name: fallback: if builtins.getEnv name != "" then builtins.getEnv name else fallback;
  buildDir = fromEnv "HYPERHIVE_BUILD_DIR" "${root}/target/debug";
  toolsDir = fromEnv "HYPERHIVE_TOOLS_DIR" "${root}/.tools/bin";
  version = (lib.importTOML ../../../Cargo.toml).workspace.package.version;

  # A derivation built by `script` with the host's tools; `attrs` become its environment, except
  # meta and passthru, which stay on the result only (as with stdenv.mkDerivation).
  build =
    name: attrs: script:
    derivation (
      removeAttrs attrs [
        "meta"
        "passthru"
      ]
      // {
        inherit name;
        system = builtins.currentSystem;
        builder = "/bin/sh";
        args = [
          "-c"
          ''
            set -e
            PATH=/usr/bin:/bin
            for input in $nativeBuildInputs; do
              PATH="$input/bin:$PATH"
              if [ -f "$input/nix-support/setup-hook" ]; then . "$input/nix-support/setup-hook"; fi
            done
            ${script}
          ''
        ];
      }
    )
    // {
      meta = attrs.meta or { };
    }
    // attrs.passthru or { };

  # A directory whose bin/ is `dir` itself (a whole directory of this machine's programs).
  binDir =
    name: dir:
    build name { meta.mainProgram = name; } ''
      mkdir "$out"
      ln -s ${lib.escapeShellArg dir} "$out/bin"
    '';
  # A package of the given programs of `dir`.
  programs =
    name: dir: names:
    build "${name}-${version}"
      {
        pname = name;
        inherit version;
        meta.mainProgram = name;
      }
      ''
        mkdir -p "$out/bin"
        for program in ${lib.escapeShellArgs names}; do
          ln -s ${lib.escapeShellArg dir}/"$program" "$out/bin/$program"
        done
      '';
  absent =
    name:
    build name { meta.mainProgram = name; } ''
      mkdir -p "$out/bin"
    '';

  writeTextFile =
    {
      name,
      text,
      executable ? false,
      destination ? "",
      meta ? { },
    }:
    build name
      {
        inherit text meta;
        passAsFile = [ "text" ];
      }
      ''
        target="$out"${lib.escapeShellArg destination}
        mkdir -p "$(dirname "$target")"
        cp "$textPath" "$target"
        ${lib.optionalString executable ''chmod +x "$target"''}
      '';

  bash = binDir "bash" "/usr/bin";
  runtimeShell = "${bash}/bin/bash";

  hyperhive = rec {
    agents-control = programs "agents-control" buildDir [ "agents-control" ];
    swarm-controller = programs "swarm-controller" buildDir [
      "swarm-controller"
      "swarmctl"
    ];
    hive-agent = programs "hive-agent" buildDir [ "hive-agent" ];
    hive-c0re = programs "hive-c0re" buildDir [ "hive-c0re" ];
    swarm-authelia-bridge = programs "swarm-authelia-bridge" buildDir [ "swarm-authelia-bridge" ];
    daemon-bins = programs "daemon-bins" buildDir [
      "hive-agent"
      "hive-c0re"
    ];
  };
in
{
  inherit
    lib
    hyperhive
    bash
    runtimeShell
    writeTextFile
    ;
  stdenv.hostPlatform.system = builtins.currentSystem;

  writeText =
    name: text:
    writeTextFile {
      inherit name text;
    };
  writeShellScript =
    name: text:
    writeTextFile {
      inherit name;
      executable = true;
      text = "#!${runtimeShell}\n${text}";
    };
  writeShellScriptBin =
    name: text:
    writeTextFile {
      inherit name;
      executable = true;
      destination = "/bin/${name}";
      text = "#!${runtimeShell}\n${text}";
      meta.mainProgram = name;
    };
  runCommand =
    name: env: buildCommand:
    build name (env // { inherit buildCommand; }) ''eval "$buildCommand"'';
  symlinkJoin =
    {
      name,
      paths,
      meta ? { },
    }:
    build name {
      inherit paths meta;
    } ''
      mkdir -p "$out"
      for path in $paths; do cp -rs --no-preserve=mode "$path"/. "$out"/; done
    '';

  # nixpkgs' makeWrapper hook, for the flags the modules use: --set, --set-default, --prefix.
  makeWrapper = build "make-wrapper" { } ''
    mkdir -p "$out/nix-support"
    cat > "$out/nix-support/setup-hook" <<'HOOK'
    makeWrapper() {
      program=$1 wrapper=$2
      shift 2
      mkdir -p "$(dirname "$wrapper")"
      printf '#!/bin/sh\n' > "$wrapper"
      while [ $# -gt 0 ]; do
        case $1 in
          --set) printf '%s\n' "export $2='$3'" >> "$wrapper"; shift 3 ;;
          # As nixpkgs writes it: an unquoted assignment, the default in single quotes (inside
          # double quotes the single quotes would stay in the value).
          --set-default) printf '%s\n' "export $2=\''${$2-'$3'}" >> "$wrapper"; shift 3 ;;
          --prefix) printf '%s\n' "export $2='$4'\"\''${$2:+$3\$$2}\"" >> "$wrapper"; shift 4 ;;
          *) echo "makeWrapper: $1 is not supported here" >&2; return 1 ;;
        esac
      done
      printf 'exec %s "$@"\n' "$program" >> "$wrapper"
      chmod +x "$wrapper"
    }
    HOOK
  '';

  nats-server = programs "nats-server" toolsDir [ "nats-server" ];
  caddy = programs "caddy" toolsDir [ "caddy" ];
  nginx = programs "nginx" "/usr/sbin" [ "nginx" ];
  coreutils = binDir "coreutils" "/usr/bin";
  findutils = binDir "findutils" "/usr/bin";
  gnugrep = binDir "gnugrep" "/usr/bin";
  gnused = binDir "gnused" "/usr/bin";
  systemd = binDir "systemd" "/usr/bin";
  curl = programs "curl" "/usr/bin" [ "curl" ];
  jq = programs "jq" "/usr/bin" [ "jq" ];
  git = programs "git" "/usr/bin" [ "git" ];

  minio = absent "minio";
  minio-client = absent "mc";
  natscli = absent "nats";
  forgejo = absent "forgejo";
  matrix-synapse = programs "matrix-synapse" toolsDir [
    "synapse_homeserver"
    "register_new_matrix_user"
  ];
  harmonia = absent "harmonia";
}
