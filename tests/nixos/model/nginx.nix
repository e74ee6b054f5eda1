# services.nginx as far as the hive-gateway uses it, declared as nixpkgs does
# (nixos/modules/services/web-servers/nginx/): upstreams, virtual hosts and their locations; the
# configuration file written the way nixpkgs writes it (pid, logs and temporary paths of the unit's
# own directories, one `upstream` and one `server` block each), and the unit that runs it.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  inherit (lib) mkOption types;
  cfg = config.services.nginx;

  location = {
    options = {
      proxyPass = mkOption {
        type = types.nullOr types.str;
        default = null;
        description = "proxy_pass of the location.";
      };
      extraConfig = mkOption {
        type = types.lines;
        default = "";
        description = "More directives of the location.";
      };
    };
  };

  virtualHost =
    { name, ... }:
    {
      options = {
        serverName = mkOption {
          type = types.str;
          default = name;
          description = "server_name.";
        };
        forceSSL = mkOption {
          type = types.bool;
          default = false;
          description = "Redirect http to https (needs certificates).";
        };
        enableACME = mkOption {
          type = types.bool;
          default = false;
          description = "Certificates from Let's Encrypt.";
        };
        listen = mkOption {
          type = types.listOf (
            types.submodule {
              options = {
                addr = mkOption {
                  type = types.str;
                  description = "The address.";
                };
                port = mkOption {
                  type = types.port;
                  default = 80;
                  description = "The port.";
                };
              };
            }
          );
          default = [
            { addr = "0.0.0.0"; }
            { addr = "[::0]"; }
          ];
          description = "Where the server listens.";
        };
        locations = mkOption {
          type = types.attrsOf (types.submodule location);
          default = { };
          description = "The server's locations.";
        };
        extraConfig = mkOption {
          type = types.lines;
          default = "";
          description = "More directives of the server.";
        };
      };
    };

  upstream = {
    options = {
      servers = mkOption {
        type = types.attrsOf (types.submodule { freeformType = types.attrsOf types.anything; });
        default = { };
        description = "The upstream's servers, by address.";
      };
      extraConfig = mkOption {
        type = types.lines;
        default = "";
        description = "More directives of the upstream.";
      };
    };
  };

  # A block of directives, its lines indented under its header.
  block = header: lines: [ "${header} {" ] ++ map (line: "  ${line}") lines ++ [ "}" ];
  linesOf = text: lib.filter (line: line != "") (lib.splitString "\n" text);

  configFile = pkgs.writeText "nginx.conf" (
    lib.concatLines (
      [
        "pid /run/nginx/nginx.pid;"
        "error_log stderr;"
        "daemon off;"
        "user ${cfg.user} ${cfg.group};"
      ]
      ++ block "events" [ ]
      ++ block "http" (
        [
          "default_type application/octet-stream;"
          "access_log syslog:server=unix:/dev/log;"
          "client_body_temp_path /var/cache/nginx/client_body;"
          "proxy_temp_path /var/cache/nginx/proxy;"
          "fastcgi_temp_path /var/cache/nginx/fastcgi;"
          "uwsgi_temp_path /var/cache/nginx/uwsgi;"
          "scgi_temp_path /var/cache/nginx/scgi;"
          "server_tokens off;"
        ]
        ++ lib.concatLists (
          lib.mapAttrsToList (
            name: up: block "upstream ${name}" (map (server: "server ${server};") (lib.attrNames up.servers) ++ linesOf up.extraConfig)
          ) cfg.upstreams
        )
        ++ lib.concatLists (
          lib.mapAttrsToList (
            _: host:
            block "server" (
              map (l: "listen ${l.addr}:${toString l.port};") host.listen
              ++ [ "server_name ${host.serverName};" ]
              ++ lib.concatLists (
                lib.mapAttrsToList (
                  path: loc:
                  block "location ${path}" (
                    lib.optional (loc.proxyPass != null) "proxy_pass ${loc.proxyPass};" ++ linesOf loc.extraConfig
                  )
                ) host.locations
              )
              ++ linesOf host.extraConfig
            )
          ) cfg.virtualHosts
        )
      )
    )
  );
in
{
  options.services.nginx = {
    enable = lib.mkEnableOption "nginx";
    package = lib.mkPackageOption pkgs "nginx" { };
    user = mkOption {
      type = types.str;
      default = "nginx";
      description = "The user nginx's workers run as.";
    };
    group = mkOption {
      type = types.str;
      default = "nginx";
      description = "Their group.";
    };
    upstreams = mkOption {
      type = types.attrsOf (types.submodule upstream);
      default = { };
      description = "upstream blocks.";
    };
    virtualHosts = mkOption {
      type = types.attrsOf (types.submodule virtualHost);
      default = { };
      description = "server blocks.";
    };
  };

  config = lib.mkIf cfg.enable {
    systemd.services.nginx = {
      description = "Nginx Web Server";
      wantedBy = [ "multi-user.target" ];
      wants = [ "network-online.target" ];
      after = [ "network-online.target" ];
      startLimitIntervalSec = 60;
      serviceConfig = {
        ExecStartPre = [ "${lib.getExe cfg.package} -c ${configFile} -t" ];
        ExecStart = "${lib.getExe cfg.package} -c ${configFile}";
        ExecReload = "${pkgs.coreutils}/bin/kill -HUP $MAINPID";
        Restart = "always";
        RestartSec = "10s";
        RuntimeDirectory = "nginx";
        RuntimeDirectoryMode = "0750";
        CacheDirectory = "nginx";
        CacheDirectoryMode = "0750";
        LogsDirectory = "nginx";
        LogsDirectoryMode = "0750";
        User = cfg.user;
        Group = cfg.group;
        # Binds ports below 1024 without being root.
        AmbientCapabilities = [
          "CAP_NET_BIND_SERVICE"
          "CAP_SYS_RESOURCE"
        ];
        CapabilityBoundingSet = [
          "CAP_NET_BIND_SERVICE"
          "CAP_SYS_RESOURCE"
        ];
        NoNewPrivileges = true;
        ProtectSystem = "strict";
        ProtectHome = true;
        PrivateTmp = true;
        PrivateDevices = true;
        ProtectHostname = true;
        ProtectClock = true;
        ProtectKernelTunables = true;
        ProtectKernelModules = true;
        ProtectKernelLogs = true;
        ProtectControlGroups = true;
        RestrictAddressFamilies = [
          "AF_UNIX"
          "AF_INET"
          "AF_INET6"
        ];
        RestrictNamespaces = true;
        LockPersonality = true;
        MemoryDenyWriteExecute = true;
        RestrictRealtime = true;
        RestrictSUIDSGID = true;
        RemoveIPC = true;
        PrivateMounts = true;
        SystemCallArchitectures = "native";
        SystemCallFilter = [
          "~@cpu-emulation @debug @keyring @mount @obsolete @privileged @setuid"
        ];
      };
    };
    users.users = lib.mkIf (cfg.user == "nginx") {
      nginx = {
        group = cfg.group;
        isSystemUser = true;
      };
    };
    users.groups = lib.mkIf (cfg.group == "nginx") { nginx = { }; };
  };
}
