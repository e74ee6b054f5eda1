# services.hyperhive.c0re: what every hive (host) runs. For now only the package the hive-side
# daemons come from (the `daemon-bins` bundle, nix/daemon-bins.nix); the hive-c0re daemon that
# applies a hive's wanted state adds its own options here when it exists. Each agent of
# services.hyperhive.agents runs `hive-agent` from this package.
{ lib, pkgs, ... }:
let
  hyperhive = import ./lib.nix { inherit lib pkgs; };
in
{
  options.services.hyperhive.c0re = {
    package = lib.mkPackageOption hyperhive.packages "daemon-bins" {
      pkgsText = "pkgs.hyperhive";
      example = "inputs.hyperhive.packages.\${pkgs.stdenv.hostPlatform.system}.daemon-bins";
      extraDescription = ''
        The bundle of hive-side daemons (hive-agent; hive-c0re later). swarm-controller is never
        in it: it is its own package, enabled with services.hyperhive.deploy.swarm-controller.
      '';
    };
  };

}
