# The options of one systemd service or socket, typed and merged as nixpkgs declares them
# (nixos/lib/systemd-unit-options.nix): a unit setting defined twice with different plain values
# is a conflict, lists are concatenated, mkDefault/mkForce decide between priorities.
{ lib }:
let
  inherit (lib) mkOption types;

  # nixpkgs' `unitOption`: lists from every definition are joined; otherwise every definition must
  # agree (mergeEqualOption reports the conflicting ones with their files).
  unitOption = lib.mkOptionType {
    name = "systemd option";
    description = "systemd option";
    merge =
      loc: defs:
      let
        defs' = lib.filterOverrides defs;
      in
      if lib.any (def: lib.isList def.value) defs' then
        lib.concatMap (def: lib.toList def.value) defs'
      else
        lib.mergeEqualOption loc defs';
  };

  units = description: mkOption {
    type = types.listOf types.str;
    default = [ ];
    inherit description;
  };
  section =
    description:
    mkOption {
      type = types.attrsOf unitOption;
      default = { };
      inherit description;
    };
in
{
  # What every unit has: dependencies, ordering, [Unit] settings and where it is installed.
  common = {
    enable = mkOption {
      type = types.bool;
      default = true;
      description = "Whether the unit is made at all.";
    };
    description = mkOption {
      type = types.singleLineStr;
      default = "";
      description = "Description=.";
    };
    documentation = units "Documentation= URLs.";
    requires = units "Requires=.";
    wants = units "Wants=.";
    after = units "After=.";
    before = units "Before=.";
    bindsTo = units "BindsTo=.";
    partOf = units "PartOf=.";
    conflicts = units "Conflicts=.";
    requisite = units "Requisite=.";
    onFailure = units "OnFailure=.";
    wantedBy = units "Units that want this one (NixOS links it into <unit>.wants/; [Install] WantedBy=).";
    requiredBy = units "Units that require this one (linked into <unit>.requires/).";
    startLimitIntervalSec = mkOption {
      type = types.int;
      description = "StartLimitIntervalSec= in [Unit] (0: never stop restarting).";
    };
    startLimitBurst = mkOption {
      type = types.int;
      description = "StartLimitBurst= in [Unit].";
    };
    unitConfig = section "More [Unit] settings.";
  };

  service = {
    environment = mkOption {
      type =
        with types;
        attrsOf (
          nullOr (oneOf [
            str
            path
            package
          ])
        );
      default = { };
      description = "Environment= variables of the service.";
    };
    path = mkOption {
      type = with types; listOf (oneOf [ package str ]);
      default = [ ];
      description = "Packages whose bin/ and sbin/ make the service's PATH.";
    };
    serviceConfig = section "[Service] settings.";
    script = mkOption {
      type = types.lines;
      default = "";
      description = "Shell commands run as the service's ExecStart (a script of its own).";
    };
    scriptArgs = mkOption {
      type = types.str;
      default = "";
      description = "Arguments after the script in ExecStart.";
    };
    preStart = mkOption {
      type = types.lines;
      default = "";
      description = "Shell commands run before the service starts (ExecStartPre).";
    };
    postStart = mkOption {
      type = types.lines;
      default = "";
      description = "Shell commands run after the service started (ExecStartPost).";
    };
    reloadIfChanged = mkOption {
      type = types.bool;
      default = false;
      description = "Reload instead of restart on a configuration switch.";
    };
    restartIfChanged = mkOption {
      type = types.bool;
      default = true;
      description = "Restart on a configuration switch.";
    };
  };

  socket = {
    listenStreams = mkOption {
      type = types.listOf types.str;
      default = [ ];
      description = "ListenStream= addresses.";
    };
    socketConfig = section "[Socket] settings.";
  };
}
