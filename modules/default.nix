# Every hyperhive NixOS module; each daemon does nothing until enabled (docs/nixos.md).
{
  imports = [
    ./agents-control.nix
    ./swarm.nix
    ./swarm-controller.nix
    ./swarm-nats.nix
    ./c0re.nix
    ./hive-agent.nix
    ./hive-c0re.nix
    ./swarm-authelia-bridge.nix
    ./hive-gateway.nix
  ];
}
