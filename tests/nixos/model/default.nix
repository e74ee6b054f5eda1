# The NixOS options the hyperhive modules, the VM tests' nodes and docs/nixos.md's example use,
# typed and (where a file on the machine follows) implemented as nixpkgs does: a stand-in for
# nixpkgs' nixos/ tree, which cannot be fetched here, evaluated with nixpkgs' own lib. Import it
# beside the modules in lib.evalModules, with `pkgs` from ./pkgs.nix.
{
  imports = [
    ./assertions.nix
    ./systemd.nix
    ./users-groups.nix
    ./environment.nix
    ./networking.nix
    ./nginx.nix
    ./nats.nix
    ./caddy.nix
    ./declared-services.nix
    ./machine.nix
    ./host.nix
  ];
}
