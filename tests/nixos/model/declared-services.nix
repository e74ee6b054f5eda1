# nixpkgs services the VM tests' nodes and docs/nixos.md's example set, declared with nixpkgs'
# types so a wrong value fails here, but not implemented: MinIO, Forgejo and Synapse make no unit
# in this model (their units are only what NixOS itself builds; tests/nixos/README.md). Settings
# nixpkgs leaves free-form are free-form here too.
{ lib, pkgs, ... }:
let
  inherit (lib) mkOption types;
  freeform =
    options:
    mkOption {
      type = types.submodule {
        freeformType = types.attrsOf types.anything;
        inherit options;
      };
      default = { };
      description = "Settings (free-form, some typed).";
    };
in
{
  options.services = {
    minio = {
      enable = lib.mkEnableOption "MinIO";
      package = lib.mkPackageOption pkgs "minio" { };
      rootCredentialsFile = mkOption {
        type = types.nullOr types.path;
        default = null;
        description = "MINIO_ROOT_USER and MINIO_ROOT_PASSWORD.";
      };
      listenAddress = mkOption {
        type = types.str;
        default = ":9000";
        description = "The S3 API's address.";
      };
      dataDir = mkOption {
        type = types.listOf (types.either types.path types.str);
        default = [ "/var/lib/minio/data" ];
        description = "The data directories.";
      };
    };
    forgejo = {
      enable = lib.mkEnableOption "Forgejo";
      package = lib.mkPackageOption pkgs "forgejo" { };
      database.type = mkOption {
        type = types.enum [
          "sqlite3"
          "mysql"
          "postgres"
        ];
        default = "sqlite3";
        description = "The database.";
      };
      settings = mkOption {
        type = types.submodule { freeformType = types.attrsOf (types.attrsOf (types.oneOf [ types.bool types.int types.str ])); };
        default = { };
        description = "app.ini, by section.";
      };
    };
    matrix-synapse = {
      enable = lib.mkEnableOption "Synapse";
      settings = freeform {
        server_name = mkOption {
          type = types.str;
          description = "The homeserver's name.";
        };
        database.name = mkOption {
          type = types.enum [
            "sqlite3"
            "psycopg2"
          ];
          default = "psycopg2";
          description = "The database driver.";
        };
        registration_shared_secret_path = mkOption {
          type = types.nullOr types.str;
          default = null;
          description = "A file holding the registration shared secret.";
        };
      };
    };
  };
}
