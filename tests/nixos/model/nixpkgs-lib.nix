# nixpkgs' own lib (lib.evalModules, lib.types, mkIf, mkDefault...), which the modules are evaluated
# with here. It is test input, not part of the project: HYPERHIVE_NIXPKGS_LIB names its directory,
# else it is ../shared/nixpkgs-lib/lib beside the repository (where CI puts it).
let
  fromEnv = builtins.getEnv "HYPERHIVE_NIXPKGS_LIB";
  beside = ../../../../shared/nixpkgs-lib/lib;
  dir =
    if fromEnv != "" then
      /. + fromEnv
    else
      beside;
in
if builtins.pathExists (dir + "/default.nix") then
  import dir
else
  throw "nixpkgs' lib is not at ${toString dir}: set HYPERHIVE_NIXPKGS_LIB to the lib/ directory of a nixpkgs checkout (26.11)"
