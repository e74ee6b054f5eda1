# `daemonBins`, the hive-side daemons: what every hive (host) runs, bundled as the default of
# `services.hyperhive.c0re.package`: hive-c0re, the hive's supervisor, and hive-agent, the harness
# it runs for each agent. swarm-controller is deliberately not here: it runs once per swarm, is its
# own package (`nix build .#swarm-controller`) and is enabled on its own
# (`services.hyperhive.deploy.swarm-controller.enable`).
packages: [
  packages.hive-agent
  packages.hive-c0re
]
