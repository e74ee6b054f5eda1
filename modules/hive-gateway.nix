# services.hyperhive.deploy.hive-gateway: nginx in front of the swarm-controller's unix socket, so
# people's browsers reach the swarm UI and its API (docs/swarm/ui.md). Server-sent events pass
# unbuffered; SSO, when configured, guards everything but the forge's webhook route, which the forge
# calls and which checks its own signature.
#
# With SSO, nginx passes the signed-in user and groups on to the controller (`Remote-User`,
# `Remote-Groups`, from the `auth_request` answer only: a client's own are replaced), and the
# controller, told nginx's user (`SWARM_GATEWAY_USER`), gives that user the role `roles` maps its
# groups to (`SWARM_GATEWAY_ROLES`). Without SSO, whoever reaches this site has nginx's role on the
# socket, so serve it only on a network only operators reach.
{ config, lib, ... }:
let
  cfg = config.services.hyperhive.deploy.hive-gateway;
  controller = config.services.hyperhive.deploy.swarm-controller;
  inherit (lib) mkOption types;
  sso = cfg.sso.authRequestUrl != null;
  # The SSO user and groups the controller reads on nginx's connections: from the auth_request
  # answer behind SSO, else none. Set in every location, so a client's own never pass (a
  # location's proxy_set_header replaces the client's header of that name).
  ssoHeaders = user: groups: ''
    proxy_set_header Remote-User ${user};
    proxy_set_header Remote-Groups ${groups};
  '';
  proxied = ''
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_buffering off;
    proxy_read_timeout 1h;
  '';
  groupName = "[A-Za-z0-9_.-]{1,64}";
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

    roles = mkOption {
      type = types.attrsOf (
        types.enum [
          "viewer"
          "operator"
          "admin"
        ]
      );
      default = { };
      example = {
        swarm-viewers = "viewer";
        swarm-operators = "operator";
        swarm-admins = "admin";
      };
      description = ''
        The role of each SSO user by SSO group (`SWARM_GATEWAY_ROLES`): a user signed in through
        `sso` has the highest role of the groups listed that Authelia names in `Remote-Groups`,
        and none (every request a 403) when it is in none of them. The controller takes the SSO
        user (`Remote-User`) as the caller on nginx's connections only (`SWARM_GATEWAY_USER`), and
        names it `sso:<user>` in `set_by`, prompt sources and the audit log. Required with `sso`.
      '';
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
      {
        assertion = sso == (cfg.roles != { });
        message =
          if sso then
            ''
              services.hyperhive.deploy.hive-gateway.roles is empty: behind SSO every user's role comes
              from its SSO groups, so map them, e.g. roles = { swarm-admins = "admin"; swarm-ops = "operator"; }.
            ''
          else
            ''
              services.hyperhive.deploy.hive-gateway.roles maps SSO groups, but sso.authRequestUrl is
              not set: set sso.* (the roles are the signed-in users'), or remove roles.
            '';
      }
      {
        assertion = lib.all (group: builtins.match groupName group != null) (lib.attrNames cfg.roles);
        message = ''
          services.hyperhive.deploy.hive-gateway.roles names a group that is not 1 to 64 letters, digits,
          `_`, `-` or `.`: ${lib.concatStringsSep ", " (lib.filter (g: builtins.match groupName g == null) (lib.attrNames cfg.roles))}.
        '';
      }
      {
        assertion = !sso || config.services.nginx.user != "root";
        message = ''
          services.hyperhive.deploy.hive-gateway with SSO needs nginx to run as a user of its own
          (services.nginx.user), not root: the controller trusts that user's SSO headers.
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
              + (
                if sso then
                  ''
                    auth_request /internal/authz;
                    error_page 401 =302 ${cfg.sso.signInUrl}?rd=$scheme://$http_host$request_uri;
                    auth_request_set $hive_sso_user $upstream_http_remote_user;
                    auth_request_set $hive_sso_groups $upstream_http_remote_groups;
                  ''
                  + ssoHeaders "$hive_sso_user" "$hive_sso_groups"
                else
                  ssoHeaders "\"\"" "\"\""
              );
          };
          # The forge calls this; the controller checks the delivery's signature. nginx matches
          # the normalized URI but would forward the raw one, so `/api/secrets/..%2Fforge%2Fwebhook`
          # would reach another route past SSO: the URI given here is the only one forwarded.
          # No SSO user: the controller serves nginx's own user this route only.
          "= /api/forge/webhook" = {
            proxyPass = "http://swarm-controller/api/forge/webhook";
            extraConfig = proxied + ssoHeaders "\"\"" "\"\"";
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

    # Behind SSO the controller takes the SSO user nginx names as the caller on nginx's
    # connections, with the role `roles` gives its groups.
    systemd.services.swarm-controller.environment = lib.mkIf sso {
      SWARM_GATEWAY_USER = config.services.nginx.user;
      SWARM_GATEWAY_ROLES = lib.concatStringsSep "," (lib.mapAttrsToList (group: role: "${group}=${role}") cfg.roles);
    };
  };
}
