# systemd.services, systemd.sockets and systemd.tmpfiles.rules as NixOS declares them, and their
# unit files as NixOS writes them (nixos/lib/systemd-lib.nix): [Unit] from the dependency options
# and unitConfig, [Service] with one Environment= line per variable (JSON-quoted) then every
# serviceConfig key (a list repeats the key, booleans are written true/false), `script` and
# `preStart` as scripts of their own, and [Install] WantedBy= (NixOS also links the unit into
# <target>.wants/, which the renderer does).
{
  config,
  lib,
  pkgs,
  ...
}:
let
  inherit (lib) mkOption types;
  unitOptions = import ./systemd-unit-options.nix { inherit lib; };
  systemd = config.systemd.package;

  toValue =
    value:
    if value == true then
      "true"
    else if value == false then
      "false"
    else
      toString value;
  toSection =
    settings:
    lib.concatStrings (
      lib.mapAttrsToList (
        key: value: lib.concatMapStrings (one: "${key}=${toValue one}\n") (lib.toList value)
      ) settings
    );

  # The [Unit] settings every unit gets from its dependency options.
  unitSettings =
    { config, options, ... }:
    {
      config.unitConfig =
        lib.filterAttrs (_: value: value != "") {
            Requires = toString config.requires;
            Wants = toString config.wants;
            After = toString config.after;
            Before = toString config.before;
            BindsTo = toString config.bindsTo;
            PartOf = toString config.partOf;
            Conflicts = toString config.conflicts;
            Requisite = toString config.requisite;
            OnFailure = toString config.onFailure;
            Documentation = toString config.documentation;
          Description = config.description;
        }
        // lib.optionalAttrs options.startLimitIntervalSec.isDefined {
          StartLimitIntervalSec = toString config.startLimitIntervalSec;
        }
        // lib.optionalAttrs options.startLimitBurst.isDefined {
          StartLimitBurst = toString config.startLimitBurst;
        };
    };

  # A script of the unit's own, run with `set -e` as NixOS's makeJobScript does.
  jobScript =
    name: text:
    lib.getExe (
      pkgs.writeShellScriptBin (lib.replaceStrings [ "@" ] [ "_" ] name) ''
        set -e

        ${text}
      ''
    );

  service =
    { name, config, ... }:
    {
      imports = [ unitSettings ];
      options = unitOptions.common // unitOptions.service;
      config = {
        # NixOS's default PATH of every service, after the unit's own packages.
        path = lib.mkAfter [
          pkgs.coreutils
          pkgs.findutils
          pkgs.gnugrep
          pkgs.gnused
          systemd
        ];
        environment.PATH = lib.mkIf (config.path != [ ]) (
          lib.makeBinPath config.path + ":" + lib.makeSearchPathOutput "bin" "sbin" config.path
        );
        serviceConfig = lib.mkMerge [
          (lib.mkIf (config.preStart != "") { ExecStartPre = [ (jobScript "${name}-pre-start" config.preStart) ]; })
          (lib.mkIf (config.script != "") {
            ExecStart = jobScript "${name}-start" config.script + lib.optionalString (config.scriptArgs != "") " ${config.scriptArgs}";
          })
          (lib.mkIf (config.postStart != "") { ExecStartPost = [ (jobScript "${name}-post-start" config.postStart) ]; })
        ];
      };
    };

  socket = {
    imports = [ unitSettings ];
    options = unitOptions.common // unitOptions.socket;
  };

  unitText =
    def: body:
    "[Unit]\n${toSection def.unitConfig}\n"
    + body
    + lib.optionalString (def.wantedBy != [ ]) "\n[Install]\nWantedBy=${toString def.wantedBy}\n";

  serviceText =
    def:
    unitText def (
      "[Service]\n"
      + lib.concatMapStrings (
        name:
        lib.optionalString (def.environment.${name} != null) "Environment=${builtins.toJSON "${name}=${def.environment.${name}}"}\n"
      ) (lib.attrNames def.environment)
      + lib.optionalString def.reloadIfChanged "X-ReloadIfChanged=true\n"
      + lib.optionalString (!def.restartIfChanged) "X-RestartIfChanged=false\n"
      + toSection def.serviceConfig
    );

  socketText =
    def:
    unitText def (
      "[Socket]\n" + toSection def.socketConfig + lib.concatMapStrings (s: "ListenStream=${s}\n") def.listenStreams
    );

  unit = text: def: {
    text = text def;
    inherit (def) wantedBy requiredBy;
  };
  enabled = lib.filterAttrs (_: def: def.enable);
in
{
  options.systemd = {
    package = mkOption {
      type = types.package;
      default = pkgs.systemd;
      defaultText = lib.literalExpression "pkgs.systemd";
      description = "The systemd package.";
    };
    services = mkOption {
      type = types.attrsOf (types.submodule service);
      default = { };
      description = "systemd service units.";
    };
    sockets = mkOption {
      type = types.attrsOf (types.submodule socket);
      default = { };
      description = "systemd socket units.";
    };
    tmpfiles.rules = mkOption {
      type = types.listOf types.str;
      default = [ ];
      example = [ "d /var/lib/example 0700 example example -" ];
      description = "systemd-tmpfiles lines (tmpfiles.d(5)).";
    };
    units = mkOption {
      type = types.attrsOf types.unspecified;
      readOnly = true;
      internal = true;
      description = "Every unit file by name: its text and the units it is linked into.";
    };
  };

  config = {
    systemd.units =
      lib.mapAttrs' (name: def: lib.nameValuePair "${name}.service" (unit serviceText def)) (enabled config.systemd.services)
      // lib.mapAttrs' (name: def: lib.nameValuePair "${name}.socket" (unit socketText def)) (enabled config.systemd.sockets);

    environment.etc."tmpfiles.d/00-nixos.conf" = lib.mkIf (config.systemd.tmpfiles.rules != [ ]) {
      text = lib.concatLines config.systemd.tmpfiles.rules;
    };
  };
}
