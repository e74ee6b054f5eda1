# nixpkgs services the VM tests' nodes and docs/nixos.md's example set, declared with nixpkgs'
# types so a wrong value fails here. Their units, users and configuration files are written as
# nixpkgs writes them (nixos/modules/services/{web-servers/minio,misc/forgejo,matrix/synapse}.nix),
# less the hardening settings: MinIO's and Forgejo's though their programs are not on this
# machine (tests/nixos/hosts runs stand-ins under those units), Synapse's with the real
# program. Settings nixpkgs leaves free-form are free-form here too.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  minio = config.services.minio;
  forgejo = config.services.forgejo;
  synapse = config.services.matrix-synapse;
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
      package = lib.mkPackageOption pkgs "matrix-synapse" { };
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

  config = lib.mkMerge [
  (lib.mkIf minio.enable {
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
  })

  # nixpkgs' forgejo module: the user (its home the state directory, the default shell), app.ini
  # written into the custom directory before start, `forgejo web` as that user.
  (lib.mkIf forgejo.enable (
    let
      stateDir = "/var/lib/forgejo";
      customDir = "${stateDir}/custom";
      appIni = pkgs.writeText "app.ini" (
        lib.generators.toINI { } (
          lib.recursiveUpdate {
            DEFAULT = {
              RUN_MODE = "prod";
              RUN_USER = "forgejo";
              WORK_PATH = stateDir;
            };
            database = {
              DB_TYPE = forgejo.database.type;
              PATH = "${stateDir}/data/forgejo.db";
            };
            repository.ROOT = "${stateDir}/repositories";
            server = {
              HTTP_ADDR = "0.0.0.0";
              HTTP_PORT = 3000;
            };
          } forgejo.settings
        )
      );
    in
    {
      users.users.forgejo = {
        isSystemUser = true;
        group = "forgejo";
        home = stateDir;
        # useDefaultShell: the admin commands are run as it (`su -l forgejo -c ...`).
        shell = "${pkgs.bash}/bin/bash";
      };
      users.groups.forgejo = { };
      systemd.services.forgejo = {
        description = "Forgejo (Beyond coding. We forge.)";
        after = [ "network.target" ];
        wantedBy = [ "multi-user.target" ];
        path = [ forgejo.package pkgs.git ];
        environment = {
          USER = "forgejo";
          HOME = stateDir;
          FORGEJO_WORK_DIR = stateDir;
          FORGEJO_CUSTOM = customDir;
        };
        preStart = ''
          install -D -m 0640 ${appIni} ${customDir}/conf/app.ini
        '';
        serviceConfig = {
          Type = "simple";
          User = "forgejo";
          Group = "forgejo";
          WorkingDirectory = stateDir;
          ExecStart = "${lib.getExe forgejo.package} web --pid /run/forgejo/forgejo.pid";
          Restart = "always";
          RuntimeDirectory = "forgejo";
          RuntimeDirectoryMode = "0755";
          StateDirectory = "forgejo";
          StateDirectoryMode = "0750";
          UMask = "0027";
        };
      };
    }
  ))

  # nixpkgs' matrix-synapse module: homeserver.yaml from the settings over the module's
  # defaults, keys made before start, `synapse_homeserver` as matrix-synapse (Type=notify).
  (lib.mkIf synapse.enable (
    let
      dataDir = "/var/lib/matrix-synapse";
      settings = lib.recursiveUpdate {
        pid_file = "/run/matrix-synapse.pid";
        report_stats = false;
        media_store_path = "${dataDir}/media_store";
        signing_key_path = "${dataDir}/homeserver.signing.key";
        # sqlite3's database in the data directory (nixpkgs sets it for sqlite3 only).
        database.args.database = "${dataDir}/homeserver.db";
        enable_registration = false;
        url_preview_enabled = false;
      } (removeAttrs synapse.settings [ "_module" ]);
      # YAML is a superset of JSON, as nixpkgs' pkgs.formats.yaml writes it.
      configFile = pkgs.writeText "homeserver.yaml" (builtins.toJSON settings);
      homeserver = "${synapse.package}/bin/synapse_homeserver";
    in
    {
      users.users.matrix-synapse = {
        isSystemUser = true;
        group = "matrix-synapse";
        home = dataDir;
        createHome = true;
        shell = "${pkgs.bash}/bin/bash";
        uid = 224;
      };
      users.groups.matrix-synapse.gid = 224;
      systemd.tmpfiles.rules = [ "d ${dataDir} 0700 matrix-synapse matrix-synapse -" ];
      systemd.services.matrix-synapse = {
        description = "Synapse Matrix homeserver";
        after = [ "network-online.target" ];
        wants = [ "network-online.target" ];
        wantedBy = [ "multi-user.target" ];
        preStart = "${homeserver} --config-path ${configFile} --keys-directory ${dataDir} --generate-keys";
        serviceConfig = {
          Type = "notify";
          User = "matrix-synapse";
          Group = "matrix-synapse";
          WorkingDirectory = dataDir;
          RuntimeDirectory = "matrix-synapse";
          RuntimeDirectoryPreserve = true;
          # After the keys are made (preStart).
          ExecStartPre = lib.mkAfter [
            (
              "+"
              + pkgs.writeShellScript "matrix-synapse-fix-permissions" ''
                chown matrix-synapse:matrix-synapse ${dataDir}/homeserver.signing.key
                chmod 0600 ${dataDir}/homeserver.signing.key
              ''
            )
          ];
          ExecStart = "${homeserver} --config-path ${configFile} --keys-directory ${dataDir}";
          Restart = "on-failure";
          UMask = "0077";
        };
      };
    }
  ))
];
}
