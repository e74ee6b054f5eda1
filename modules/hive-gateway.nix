# services.hyperhive.deploy.hive-gateway: nginx in front of the swarm-controller's unix socket, so
# people's browsers reach the swarm UI and its API (docs/swarm/ui.md). Server-sent events pass
# unbuffered; SSO, when configured, guards everything but the forge's webhook route, which the forge
# calls and which checks its own signature.
#
# Whoever reaches this site drives the swarm (the controller trusts its socket), so serve it only
# behind SSO or on a network only operators reach.
{ config, lib, ... }:
let
  cfg = config.services.hyperhive.deploy.hive-gateway;
  controller = config.services.hyperhive.deploy.swarm-controller;
  inherit (lib) mkOption types;
  proxied = ''
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_buffering off;
    proxy_read_timeout 1h;
  '';
in
{
  options.services.hyperhive.deploy.hive-gateway = {
    enable = lib.mkEnableOption "nginx in front of the swarm-controller's socket, serving the swarm UI";

    serverName = mkOption {
      type = types.str;
      example = "swarm.example.com";
      description = "The nginx virtual host's name; browsers open `https://<serverName>/`.";
    };

    virtualHost = mkOption {
      type = types.attrs;
      default = { };
      example = {
        forceSSL = true;
        enableACME = true;
      };
      description = ''
        More settings of the nginx virtual host (`services.nginx.virtualHosts.<serverName>`), e.g.
        its TLS: `{ forceSSL = true; enableACME = true; }`. Its `locations` are this module's.
      '';
    };

    sso = {
      authRequestUrl = mkOption {
        type = types.nullOr (types.strMatching "https?://.+");
        default = null;
        example = "http://127.0.0.1:9091/api/authz/auth-request";
        description = ''
          An `auth_request` endpoint (Authelia's `/api/authz/auth-request`) every request but the
          forge webhook must pass. `null`: no SSO, so only operators may reach the site.
        '';
      };

      signInUrl = mkOption {
        type = types.nullOr (types.strMatching "https?://.+");
        default = null;
        example = "https://auth.example.com/";
        description = "Where a browser without a session is sent (with `?rd=` the page it wanted); required with `authRequestUrl`.";
      };
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      {
        assertion = controller.enable;
        message = ''
          services.hyperhive.deploy.hive-gateway proxies the swarm-controller's socket, so it needs
          services.hyperhive.deploy.swarm-controller.enable = true on the same host.
        '';
      }
      {
        assertion = (cfg.sso.authRequestUrl == null) == (cfg.sso.signInUrl == null);
        message = ''
          services.hyperhive.deploy.hive-gateway.sso.authRequestUrl and sso.signInUrl go together:
          set both (SSO in front of the swarm UI) or neither.
        '';
      }
    ];

    services.nginx = {
      enable = true;
      upstreams.swarm-controller.servers."unix:${controller.socketPath}" = { };
      virtualHosts.${cfg.serverName} = cfg.virtualHost // {
        locations = {
          "/" = {
            proxyPass = "http://swarm-controller";
            extraConfig =
              proxied
              + lib.optionalString (cfg.sso.authRequestUrl != null) ''
                auth_request /internal/authz;
                error_page 401 =302 ${cfg.sso.signInUrl}?rd=$scheme://$http_host$request_uri;
              '';
          };
          # The forge calls this; the controller checks the delivery's signature. nginx matches
          # the normalized URI but would forward the raw one, so `/api/secrets/..%2Fforge%2Fwebhook`
          # would reach another route past SSO: the URI given here is the only one forwarded.
          "= /api/forge/webhook" = {
            proxyPass = "http://swarm-controller/api/forge/webhook";
            extraConfig = proxied;
          };
        }
        // lib.optionalAttrs (cfg.sso.authRequestUrl != null) {
          "= /internal/authz" = {
            proxyPass = cfg.sso.authRequestUrl;
            extraConfig = ''
              internal;
              proxy_pass_request_body off;
              proxy_set_header Content-Length "";
              proxy_set_header X-Original-Method $request_method;
              proxy_set_header X-Original-URL $scheme://$http_host$request_uri;
            '';
          };
        };
      };
    };

    # The socket's directory admits root and the controller's group only.
    users.users.nginx.extraGroups = [ controller.group ];
  };
}
