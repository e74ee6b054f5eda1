# What render_hosts.py writes: every machine of hosts.nix as system.build.host (its unit files and
# /etc) in JSON, and the derivations those files need, which Nix's own string context names
# exactly, for `nix-store --realise`.
let
  hosts = builtins.mapAttrs (_: machine: machine.config.system.build.host) (import ./hosts.nix);
  json = builtins.toJSON hosts;
in
{
  hosts = builtins.unsafeDiscardStringContext json;
  needs = builtins.attrNames (builtins.getContext json);
}
