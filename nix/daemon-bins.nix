# `daemonBins`, the hive-side daemons: what every hive (host) runs, bundled as the default of
# `services.hyperhive.c0re.package`. swarm-controller is deliberately not here: it runs once per
# swarm, is its own package (`nix build .#swarm-controller`) and is enabled on its own
# (`services.hyperhive.deploy.swarm-controller.enable`). hive-c0re joins this list when it exists.
packages: [
  packages.hive-agent
]
