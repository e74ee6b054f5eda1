# services.hyperhive.deploy.hive-controller: hive-c0re, the one supervisor of a hive's agents. It
# runs each agent's `hive-agent` (as a transient systemd unit `hive-agent-<name>`, or as a child
# process), converges them to the wanted state the swarm-controller declares (up, paused,
# offline, destroyed), publishes the hive's status to NATS and applies deploy messages sealed to
# the hive's xkey.
#
# The agents of services.hyperhive.agents become hive-c0re's declared agents (a JSON file in
# HIVE_C0RE_AGENTS_FILE): with hive-controller enabled they get no static units of their own, so
# that exactly one thing starts and stops them.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  cfg = config.services.hyperhive.deploy.hive-controller;
  hyperhive = import ./lib.nix { inherit lib pkgs; };
  inherit (lib) mkOption types;

  c0re = config.services.hyperhive.c0re.package;
  agents = lib.filterAttrs (_: agent: agent.enable) config.services.hyperhive.agents;

  # The declared agents, as crates/hive-proto/src/spec.rs reads them:
  # {"<agent>": {"spec": {"turn_command", "schedule_tick", "turn_timeout", "env"}, "creds_file",
  # "environment_file"}}.
  # PATH is what the static unit's `path` gives today: a shell and coreutils (the turn command runs
  # through `sh -c`, and common turn commands use cat, tee, date), then the agent's packages.
  declaredAgents = lib.mapAttrs (_: agent: {
    spec = {
      turn_command = agent.turnCommand;
      schedule_tick = agent.scheduleTick;
      turn_timeout = agent.turnTimeout;
      env.PATH = lib.makeBinPath ([ pkgs.bash pkgs.coreutils ] ++ agent.path);
    };
    # hive-c0re hands the file to the agent's unit itself; the unit's credential is read by root
    # (the hive-c0re unit below, or PID 1), so the file may stay root-only.
    creds_file = toString agent.credentialsFile;
  }
  # Read by hive-c0re (root) when it starts and at each credentials message, and merged, under
  # the swarm's secret variables, into the agent's own env file (docs/swarm/secrets.md).
  // lib.optionalAttrs (agent.environmentFile != null) { environment_file = toString agent.environmentFile; }
  ) agents;
  agentsFile = pkgs.writeText "hive-c0re-agents.json" (builtins.toJSON declaredAgents);

  stateDir = "/var/lib/hive-c0re";
in
{
  imports = [
    ./c0re.nix
    ./hive-agent.nix
  ];

  options.services.hyperhive.deploy.hive-controller = {
    enable = lib.mkEnableOption ''
      hive-c0re, the supervisor of this hive's agents: it runs the agents of
      services.hyperhive.agents (and those the swarm deploys here) in the state the swarm-controller
      wants, and reports the hive's status. The agents then get no static units of their own'';

    hive = mkOption {
      type = types.str;
      example = "hive1";
      description = ''
        This hive's name (`HIVE_C0RE_HIVE`): `^[a-z][a-z0-9-]{0,31}$`, as declared in the
        controller's `services.hyperhive.swarm.hives`. Its credential must be minted for this name
        (`swarm-controller nats hive-creds <hive>`).
      '';
    };

    nats = {
      url = mkOption {
        type = types.strMatching "(nats|tls|ws|wss)://[^[:space:]]+";
        example = "nats://nats.internal:4222";
        description = ''
          The swarm's NATS server (`HIVE_C0RE_NATS_URL`); the hive's agents use the same server, so
          each agent's `nats.url` must be this one.
        '';
      };
      credentialsFile = mkOption {
        type = types.path;
        example = "/run/secrets/hive1.creds";
        description = ''
          The hive's NATS credential (`HIVE_C0RE_NATS_CREDS`), minted by
          `swarm-controller nats hive-creds <hive> --from DIR --out FILE --agent <name>...` naming
          every agent this hive runs: it reaches only this hive's wanted state, status, deploy
          subject and its agents' queues. Handed to the unit with `LoadCredential=`; not in the Nix
          store.
        '';
      };
    };

    xkeyFile = mkOption {
      type = types.nullOr types.path;
      default = null;
      example = "/run/secrets/hive1.xk";
      description = ''
        The hive's curve key seed (`HIVE_C0RE_XKEY_FILE`), written by
        `hive-c0re keygen --out FILE`, which prints the public key (`X...`) to give the controller
        as `services.hyperhive.swarm.hives.<hive>.xkey`. Deploy messages are sealed to it. Handed to
        the unit with `LoadCredential=`; not in the Nix store. Unset for a hive that runs only the
        agents declared here.
      '';
    };

    controllerKeys = mkOption {
      type = types.listOf (types.strMatching "V[A-Z2-7]{55}");
      default = [ ];
      example = [ "VBK3SH2T4B3YMXGLQ2Z5RSQM6WSZ4QLUBF2C4LXNHM7QXZSN5WCLJM4G" ];
      description = ''
        The controller's public deploy key (`HIVE_C0RE_CONTROLLER_KEYS`), printed by
        `swarm-controller deploy-key --out FILE`: the hive applies only deploy and credentials
        messages this key signed. Two while the controller's key is replaced (the old and the new
        one), one otherwise. Required with `xkeyFile`.
      '';
    };

    runner = mkOption {
      type = types.enum [
        "systemd"
        "process"
      ];
      default = "systemd";
      example = "process";
      description = ''
        How hive-c0re runs an agent (`HIVE_C0RE_RUNNER`). `systemd`: a transient unit
        `hive-agent-<name>` through `systemd-run`, with its own dynamic user, state directory
        `/var/lib/hive-agent-<name>` and the hardening of a static agent unit; the agents keep
        running while hive-c0re restarts. `process`: child processes of hive-c0re, inside its own
        unit and with its identity (root) and sandbox; meant for hosts without systemd and for
        trials, not for agents you do not trust.
      '';
    };

    statusInterval = mkOption {
      type = types.ints.positive;
      default = 15;
      example = 5;
      description = ''
        Seconds between the hive's status reports (`HIVE_C0RE_STATUS_EVERY`), 1 to 30; a change is
        reported at once as well. The controller marks a status older than three intervals of its
        default (45 s) stale, so an interval above 30 is refused (hive-c0re refuses it too).
      '';
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      {
        assertion = hyperhive.isAgentName cfg.hive;
        message = ''
          services.hyperhive.deploy.hive-controller.hive: "${cfg.hive}" is not a hive name. Names are
          1 to 32 characters: a lowercase letter, then lowercase letters, digits or "-" (they are
          NATS subject tokens and KV keys), e.g. "hive1".
        '';
      }
      {
        assertion = cfg.statusInterval <= 30;
        message = ''
          services.hyperhive.deploy.hive-controller.statusInterval is ${toString cfg.statusInterval} seconds; it must be 1 to 30:
          the controller shows a hive status older than 45 s as stale, so reports must come more
          often than that, with room for a late one. Keep the default 15.
        '';
      }
      (hyperhive.notInStore "services.hyperhive.deploy.hive-controller.nats.credentialsFile" cfg.nats.credentialsFile)
      (hyperhive.notInStore "services.hyperhive.deploy.hive-controller.xkeyFile" cfg.xkeyFile)
      {
        assertion = cfg.xkeyFile == null || cfg.controllerKeys != [ ];
        message = ''
          services.hyperhive.deploy.hive-controller.xkeyFile is set but controllerKeys is empty: the
          hive would read deploy messages without knowing who may send them. Set controllerKeys to
          the controller's public deploy key (`swarm-controller deploy-key --public FILE` prints it).
        '';
      }
    ]
    ++ lib.concatLists (
      lib.mapAttrsToList (name: agent: [
        {
          assertion = agent.nats.url == cfg.nats.url;
          message = ''
            services.hyperhive.agents.${name}.nats.url is ${agent.nats.url}, but under hive-c0re every
            agent uses the hive's NATS server, services.hyperhive.deploy.hive-controller.nats.url
            (${cfg.nats.url}). Set both to the same URL.
          '';
        }
      ]) agents
    );

    systemd.services.hive-c0re = hyperhive.service // {
      description = "hyperhive hive supervisor (hive-c0re) of hive ${cfg.hive}";
      # systemd-run and systemctl, for the systemd runner (NixOS puts systemd on every unit's PATH
      # already; named here because the daemon depends on it).
      path = [ config.systemd.package ];

      environment =
        lib.mapAttrs (_: hyperhive.literalForSystemd) {
          HIVE_C0RE_HIVE = cfg.hive;
          HIVE_C0RE_NATS_URL = cfg.nats.url;
          HIVE_C0RE_STATE_DIR = stateDir;
          HIVE_C0RE_RUNNER = cfg.runner;
          HIVE_C0RE_STATUS_EVERY = "${toString cfg.statusInterval}s";
        }
        // {
          # Store paths: nothing for systemd to expand.
          HIVE_C0RE_AGENTS_FILE = "${agentsFile}";
          HIVE_C0RE_AGENT_BIN = lib.getExe' c0re "hive-agent";
          # LoadCredential below puts the secrets here, readable by this unit only.
          HIVE_C0RE_NATS_CREDS = "%d/nats-creds";
        }
        // lib.optionalAttrs (cfg.xkeyFile != null) {
          HIVE_C0RE_XKEY_FILE = "%d/xkey";
          HIVE_C0RE_CONTROLLER_KEYS = lib.concatStringsSep "," cfg.controllerKeys;
        };

      serviceConfig =
        hyperhive.serviceConfig
        // {
          ExecStart = "${lib.getExe' c0re "hive-c0re"} run";
          LoadCredential = [
            "nats-creds:${cfg.nats.credentialsFile}"
          ]
          ++ lib.optional (cfg.xkeyFile != null) "xkey:${cfg.xkeyFile}";
          StateDirectory = "hive-c0re";

          # The relaxations a root supervisor needs, each for one reason; everything else is the
          # shared hardening. The systemd runner's agents are started by PID 1, so they do not
          # inherit this sandbox: they get their own (a dynamic user each).
          #
          # Root, not a dynamic user: only root may ask PID 1 for transient units (systemd-run) and
          # stop them, and the agents' state directories belong to their own dynamic users.
          DynamicUser = false;
          # It hands agents' credential files to the agents' own (dynamic) users and removes their
          # state directories, so it must see every user, not only its own.
          PrivateUsers = false;
          # Root keeps only the capabilities that let it handle files of other users: write an
          # agent's credential file owned by the agent (CAP_CHOWN, CAP_FOWNER), and remove a
          # destroyed agent's state directory, which belongs to the agent's user
          # (CAP_DAC_OVERRIDE). Asking PID 1 for units over its socket needs no capability, only
          # uid 0.
          CapabilityBoundingSet = [
            "CAP_CHOWN"
            "CAP_DAC_OVERRIDE"
            "CAP_FOWNER"
          ];
          # The agents' state directories (/var/lib/hive-agent-<name>, behind it
          # /var/lib/private/hive-agent-<name>) are made by systemd for the transient units, with
          # names known only when an agent is deployed; hive-c0re writes into them and removes
          # them, so /var/lib as a whole stays writable. The rest of the system is read-only.
          ReadWritePaths = [ "/var/lib" ];
          # chown/fchown are in @privileged; the credential files need them. The rest of
          # @privileged stays out.
          SystemCallFilter = [
            "@system-service"
            "~@privileged"
            "@chown"
            "~@resources"
          ];
          # The hive's status carries the host's load (/proc/loadavg), outside the pid subset.
          ProcSubset = "all";
        }
        // lib.optionalAttrs (cfg.runner == "process") {
          # With the process runner the turn commands run inside this unit, and get what a static
          # agent unit allows them: writable executable memory for JIT runtimes (node, the JVM).
          MemoryDenyWriteExecute = false;
        };
    };
  };
}
