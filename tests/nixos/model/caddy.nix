# services.caddy as nixpkgs declares it (nixos/modules/services/web-servers/caddy/): a Caddyfile
# given whole (`configFile`) or made from `globalConfig`, `extraConfig` and `virtualHosts` the way
# nixpkgs writes it, and the unit running `caddy run` on it.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  inherit (lib) mkOption types;
  cfg = config.services.caddy;

  virtualHost =
    { name, ... }:
    {
      options = {
        hostName = mkOption {
          type = types.str;
          default = name;
          description = "The site's address.";
        };
        serverAliases = mkOption {
          type = types.listOf types.str;
          default = [ ];
          description = "More addresses of the site.";
        };
        extraConfig = mkOption {
          type = types.lines;
          default = "";
          description = "The site's directives.";
        };
      };
    };

  generated = pkgs.writeText "Caddyfile" (
    ''
      {
        ${cfg.globalConfig}
      }
      ${cfg.extraConfig}
    ''
    + lib.concatMapStrings (host: ''
      ${lib.concatStringsSep ", " ([ host.hostName ] ++ host.serverAliases)} {
        log {
          output file ${cfg.logDir}/access-${host.hostName}.log
        }
        ${host.extraConfig}
      }
    '') (lib.attrValues cfg.virtualHosts)
  );
in
{
  options.services.caddy = {
    enable = lib.mkEnableOption "Caddy web server";
    package = lib.mkPackageOption pkgs "caddy" { };
    configFile = mkOption {
      type = types.path;
      default = generated;
      defaultText = "a Caddyfile made from globalConfig, extraConfig and virtualHosts";
      description = "The whole Caddyfile.";
    };
    adapter = mkOption {
      type = types.nullOr types.str;
      default = "caddyfile";
      description = "The configuration's format.";
    };
    enableReload = mkOption {
      type = types.bool;
      default = true;
      description = "Reload through the admin endpoint instead of restarting.";
    };
    globalConfig = mkOption {
      type = types.lines;
      default = "";
      description = "The Caddyfile's global options.";
    };
    extraConfig = mkOption {
      type = types.lines;
      default = "";
      description = "More of the Caddyfile, after the global options.";
    };
    virtualHosts = mkOption {
      type = types.attrsOf (types.submodule virtualHost);
      default = { };
      description = "Sites.";
    };
    logDir = mkOption {
      type = types.path;
      default = "/var/log/caddy";
      description = "Where the sites' access logs go.";
    };
    user = mkOption {
      type = types.str;
      default = "caddy";
      description = "The user Caddy runs as.";
    };
    group = mkOption {
      type = types.str;
      default = "caddy";
      description = "Its group.";
    };
  };

  config = lib.mkIf cfg.enable {
    systemd.services.caddy = {
      description = "Caddy";
      wantedBy = [ "multi-user.target" ];
      wants = [ "network-online.target" ];
      after = [ "network-online.target" ];
      startLimitIntervalSec = 14400;
      startLimitBurst = 10;
      serviceConfig = {
        ExecStart = "${lib.getExe cfg.package} run --config ${cfg.configFile}${
          lib.optionalString (cfg.adapter != null) " --adapter ${cfg.adapter}"
        }";
        ExecReload = lib.mkIf cfg.enableReload "${lib.getExe cfg.package} reload --config ${cfg.configFile} --force";
        User = cfg.user;
        Group = cfg.group;
        ReadWritePaths = [ "/var/lib/caddy" ];
        StateDirectory = "caddy";
        LogsDirectory = "caddy";
        Restart = "on-failure";
        RestartPreventExitStatus = 1;
        RestartSec = "5s";
        AmbientCapabilities = "cap_net_bind_service";
        CapabilityBoundingSet = "cap_net_bind_service";
        NoNewPrivileges = true;
        PrivateDevices = true;
        LimitNOFILE = 1048576;
        ProtectHome = true;
      };
    };
    users.users = lib.mkIf (cfg.user == "caddy") {
      caddy = {
        group = cfg.group;
        isSystemUser = true;
        home = "/var/lib/caddy";
      };
    };
    users.groups = lib.mkIf (cfg.group == "caddy") { caddy = { }; };
  };
}
