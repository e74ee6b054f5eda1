# environment.etc and environment.systemPackages as NixOS declares them
# (nixos/modules/system/etc/etc.nix): a file under /etc is given by `text` or `source`, with a
# `mode` ("symlink", the default, or an octal mode for a copy), `user` and `group`.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  inherit (lib) mkOption types;

  file =
    {
      name,
      config,
      options,
      ...
    }:
    {
      options = {
        enable = mkOption {
          type = types.bool;
          default = true;
          description = "Whether the file is made.";
        };
        target = mkOption {
          type = types.str;
          default = name;
          description = "The path below /etc.";
        };
        text = mkOption {
          type = types.nullOr types.lines;
          default = null;
          description = "The file's text.";
        };
        source = mkOption {
          type = types.path;
          description = "The file's content.";
        };
        mode = mkOption {
          type = types.str;
          default = "symlink";
          example = "0600";
          description = "`symlink` (into the store), or the mode of a copy.";
        };
        user = mkOption {
          type = types.str;
          default = "+0";
          description = "The copy's owner.";
        };
        group = mkOption {
          type = types.str;
          default = "+0";
          description = "The copy's group.";
        };
      };
      config.source = lib.mkIf (config.text != null) (
        lib.mkDerivedConfig options.text (pkgs.writeText "etc-${baseNameOf name}")
      );
    };
in
{
  options.environment = {
    etc = mkOption {
      type = types.attrsOf (types.submodule file);
      default = { };
      description = "Files under /etc.";
    };
    systemPackages = mkOption {
      type = types.listOf types.package;
      default = [ ];
      description = "Packages on every user's PATH.";
    };
  };
}
