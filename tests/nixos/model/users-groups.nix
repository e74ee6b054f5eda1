# users.users and users.groups as NixOS declares them (nixos/modules/config/users-groups.nix), with
# its checks: every user is exactly one of a system or a normal user, and has a group; written to
# /etc/sysusers.d/00-nixos.conf (sysusers.d(5)), as NixOS does with systemd.sysusers.enable.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  inherit (lib) mkOption types;

  user =
    { name, config, ... }:
    {
      options = {
        name = mkOption {
          type = types.passwdEntry types.str;
          default = name;
          description = "The user's name.";
        };
        uid = mkOption {
          type = types.nullOr types.int;
          default = null;
          description = "The user's id; null: allocated.";
        };
        isSystemUser = mkOption {
          type = types.bool;
          default = false;
          description = "A system user (uid below 1000, no home by default).";
        };
        isNormalUser = mkOption {
          type = types.bool;
          default = false;
          description = "A person's account: a home in /home, group `users`.";
        };
        group = mkOption {
          type = types.str;
          default = "";
          description = "The user's primary group.";
        };
        extraGroups = mkOption {
          type = types.listOf types.str;
          default = [ ];
          description = "The user's other groups.";
        };
        description = mkOption {
          type = types.passwdEntry types.str;
          default = "";
          description = "The GECOS field.";
        };
        home = mkOption {
          type = types.passwdEntry types.path;
          default = "/var/empty";
          description = "The home directory.";
        };
        createHome = mkOption {
          type = types.bool;
          default = false;
          description = "Whether to make the home directory.";
        };
        shell = mkOption {
          type = types.nullOr (types.passwdEntry types.path);
          default = null;
          description = ''
            The login shell; null: none (nixpkgs' nologin). A normal user gets bash, as NixOS's
            users.defaultUserShell gives it (there `/run/current-system/sw/bin/bash`, here the
            store's bash).
          '';
        };
      };
      config = lib.mkIf config.isNormalUser {
        group = lib.mkDefault "users";
        home = lib.mkDefault "/home/${config.name}";
        createHome = lib.mkDefault true;
        shell = lib.mkDefault "${pkgs.bash}/bin/bash";
      };
    };

  group =
    { name, ... }:
    {
      options = {
        name = mkOption {
          type = types.passwdEntry types.str;
          default = name;
          description = "The group's name.";
        };
        gid = mkOption {
          type = types.nullOr types.int;
          default = null;
          description = "The group's id; null: allocated.";
        };
        members = mkOption {
          type = types.listOf (types.passwdEntry types.str);
          default = [ ];
          description = "Users in the group besides those naming it.";
        };
      };
    };
in
{
  options.users = {
    users = mkOption {
      type = types.attrsOf (types.submodule user);
      default = { };
      description = "The machine's users.";
    };
    groups = mkOption {
      type = types.attrsOf (types.submodule group);
      default = { };
      description = "The machine's groups.";
    };
  };

  config = {
    # NixOS's fixed id of the group of normal users.
    users.groups.users.gid = 100;
    # What NixOS writes with systemd.sysusers.enable: groups, then users, then memberships.
    environment.etc."sysusers.d/00-nixos.conf".text = lib.concatLines (
      lib.mapAttrsToList (_: g: "g ${g.name} ${if g.gid == null then "-" else toString g.gid}") config.users.groups
      ++ lib.mapAttrsToList (
        _: u:
        "u ${u.name} ${if u.uid == null then "-" else toString u.uid}:${u.group} ${builtins.toJSON u.description} ${u.home}"
        + lib.optionalString (u.shell != null) " ${u.shell}"
      ) config.users.users
      ++ lib.concatLists (
        lib.mapAttrsToList (_: u: map (g: "m ${u.name} ${g}") u.extraGroups) config.users.users
        ++ lib.mapAttrsToList (_: g: map (u: "m ${u} ${g.name}") g.members) config.users.groups
      )
    );
    assertions = lib.concatLists (
      lib.mapAttrsToList (name: u: [
        {
          assertion = u.isSystemUser != u.isNormalUser;
          message = "Exactly one of users.users.${name}.isSystemUser and users.users.${name}.isNormalUser must be set.";
        }
        {
          assertion = u.group != "";
          message = "users.users.${name}.group is unset. This used to default to nogroup, but this is unsafe.";
        }
      ]) config.users.users
    );
  };
}
