# services.hyperhive.swarm: what the whole swarm is, declared once, as opposed to what one host
# runs. For now the hive directory (services.hyperhive.swarm.hives.<name>), which the
# swarm-controller serves (`GET /api/hives`) from the JSON file its module writes for it
# (SWARM_HIVES_FILE, modules/swarm-controller.nix). A module of its own because it describes the
# swarm, not the controller's unit: the controller's host imports it through swarm-controller.nix,
# and it can be shared verbatim by every host's configuration.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  hyperhive = import ./lib.nix { inherit lib pkgs; };
  inherit (lib) mkOption types;
  hives = config.services.hyperhive.swarm.hives;

  hiveOptions =
    { name, ... }:
    {
      options = {
        description = mkOption {
          type = types.str;
          default = "";
          example = "GPU box in the basement";
          description = "What the hive is for, as `swarmctl hives` shows it.";
        };

        labels = mkOption {
          type = types.attrsOf types.str;
          default = { };
          example = {
            gpu = "yes";
            site = "office";
          };
          description = "Free-form labels of the hive, as `swarmctl hives` shows them.";
        };

        xkey = mkOption {
          type = types.nullOr (types.strMatching "X[A-Z2-7]{55}");
          default = null;
          example = "XCYG6V7IERXDY7O2N64AXQWT2EYE4MCVS2LHP3QYHHHCBPOVEQZXPZYU";
          description = ''
            The hive's public curve key, printed by `hive-c0re keygen --out FILE` on the hive (the
            file is the hive's `deploy.hive-controller.xkeyFile`). The controller seals deploy
            messages for ${name} to it, so only that hive can read an agent's secrets. Public: it
            may be in the Nix store. Unset for a hive that only runs the agents its own
            configuration declares.
          '';
        };
      };
    };
in
{
  options.services.hyperhive.swarm.hives = mkOption {
    type = types.attrsOf (types.submodule hiveOptions);
    default = { };
    example = lib.literalExpression ''
      {
        hive1 = {
          description = "build machines";
          labels.site = "office";
          xkey = "XCYG6V7IERXDY7O2N64AXQWT2EYE4MCVS2LHP3QYHHHCBPOVEQZXPZYU";
        };
        hive2 = { };
      }
    '';
    description = ''
      The swarm's hives, by name (`^[a-z][a-z0-9-]{0,31}$`, the name each hive's
      `services.hyperhive.deploy.hive-controller.hive` gives itself). The swarm-controller serves
      them as its hive directory; a hive missing here cannot be given wanted state.
    '';
  };

  config = lib.mkIf (hives != { }) {
    assertions = lib.mapAttrsToList (name: _: {
      assertion = hyperhive.isAgentName name;
      message = ''
        services.hyperhive.swarm.hives.${name}: "${name}" is not a hive name. Names are 1 to 32
        characters: a lowercase letter, then lowercase letters, digits or "-" (they are NATS
        subject tokens and KV keys), e.g. "hive1".
      '';
    }) hives;
  };
}
