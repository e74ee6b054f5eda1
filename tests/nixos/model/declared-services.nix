# nixpkgs services the VM tests' nodes and docs/nixos.md's example set, declared with nixpkgs'
# types so a wrong value fails here. MinIO's unit is written as nixpkgs writes it (other units
# depend on it), though its program is not on this machine; Forgejo and Synapse make no unit in
# this model (tests/nixos/README.md). Settings nixpkgs leaves free-form are free-form here too.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  minio = config.services.minio;
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
      consoleAddress = mkOption {
        type = types.str;
        default = ":9001";
        description = "The web console's address.";
      };
      dataDir = mkOption {
        type = types.listOf (types.either types.path types.str);
        default = [ "/var/lib/minio/data" ];
        description = "The data directories.";
      };
      configDir = mkOption {
        type = types.path;
        default = "/var/lib/minio/config";
        description = "The configuration directory.";
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

  config = lib.mkIf minio.enable {
    systemd.tmpfiles.rules = map (dir: "d '${dir}' - minio minio - -") ([ minio.configDir ] ++ minio.dataDir);
    systemd.services.minio = {
      description = "Minio Object Storage";
      wants = [ "network-online.target" ];
      after = [ "network-online.target" ];
      wantedBy = [ "multi-user.target" ];
      serviceConfig = {
        ExecStart = "${minio.package}/bin/minio server --json --address ${minio.listenAddress} --console-address ${minio.consoleAddress} --config-dir=${minio.configDir} ${toString minio.dataDir}";
        Type = "simple";
        User = "minio";
        Group = "minio";
        LimitNOFILE = 65536;
        EnvironmentFile = lib.optional (minio.rootCredentialsFile != null) minio.rootCredentialsFile;
      };
    };
    users.users.minio = {
      group = "minio";
      isSystemUser = true;
    };
    users.groups.minio = { };
  };
}
