# services.hyperhive.c0re: what every hive (host) runs: the package the hive-side daemons come
# from (the `daemon-bins` bundle, nix/daemon-bins.nix: hive-agent and hive-c0re). Each agent of
# services.hyperhive.agents runs `hive-agent` from it, and hive-c0re, the hive's supervisor, is
# enabled and configured by services.hyperhive.deploy.hive-controller (modules/hive-c0re.nix),
# running `hive-c0re` from it and handing it this package's `hive-agent`.
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
        The bundle of hive-side daemons (hive-agent and hive-c0re). swarm-controller is never in
        it: it is its own package, enabled with services.hyperhive.deploy.swarm-controller.
      '';
    };
  };

}
