# services.hyperhive.agents.<name>: one hive-agent process per agent, each its own
# unit `hive-agent-<name>` with its own dynamic user, state directory (holding state.db) and NATS
# credential. The agents run `hive-agent` from services.hyperhive.c0re.package.
#
# With services.hyperhive.deploy.hive-controller enabled (modules/hive-c0re.nix), the same agents
# are hive-c0re's declared agents instead, and this module makes no units: hive-c0re starts each as
# a transient unit of the same name, so one thing alone starts and stops an agent.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  agents = lib.filterAttrs (_: agent: agent.enable) config.services.hyperhive.agents;
  # Declared by modules/hive-c0re.nix; absent (false) when only this module is imported.
  underHiveC0re = config.services.hyperhive.deploy.hive-controller.enable or false;
  hyperhive = import ./lib.nix { inherit lib pkgs; };
  inherit (lib) mkOption types;

  agentOptions =
    { name, ... }:
    {
      options = {
        enable = mkOption {
          type = types.bool;
          default = true;
          example = false;
          description = "Whether to run this agent (false keeps its state directory but starts no unit).";
        };

        nats.url = mkOption {
          type = types.strMatching "(nats|tls|ws|wss)://[^[:space:]]+";
          example = "nats://nats.internal:4222";
          description = "The swarm's NATS server (`HIVE_AGENT_NATS_URL`).";
        };

        credentialsFile = mkOption {
          type = types.path;
          example = "/run/secrets/agent-${name}.creds";
          description = ''
            This agent's NATS credential (`HIVE_AGENT_CREDS`), minted by
            `swarm-controller nats agent-creds ${name} --from DIR --out FILE`: it may use only this
            agent's own queue, inbox, terminal and turn subjects and read only its own schedules.
            Handed to the unit with `LoadCredential=`; not in the Nix store.
          '';
        };

        turnCommand = mkOption {
          type = types.str;
          example = "claude --print";
          description = ''
            The command one turn runs (`HIVE_AGENT_TURN_COMMAND`), through `sh -c`, with the todo's
            body on stdin and `HIVE_AGENT_NAME`, `HIVE_TODO_ID` and `HIVE_TODO_SOURCE` in its
            environment. It runs as this agent's dynamic user, in its state directory, which is also
            its `HOME`.
          '';
        };

        scheduleTick = mkOption {
          type = types.strMatching "[0-9]+(ms|s|m|h)";
          default = "10s";
          example = "30s";
          description = "How often the agent reads its schedules and fires due slots (`HIVE_AGENT_SCHEDULE_TICK`).";
        };

        turnTimeout = mkOption {
          type = types.strMatching "[0-9]+(s|m|h|d)";
          default = "1h";
          example = "3h";
          description = ''
            How long one turn may run (`HIVE_AGENT_TURN_TIMEOUT`, 1s to 7d). A turn still running
            then gets SIGTERM, and SIGKILL 5 s later, with every process it started; its todo is
            recorded as finished (failed) and acked, so it does not rerun.
          '';
        };

        path = mkOption {
          type = types.listOf types.package;
          default = [ ];
          example = lib.literalExpression "[ pkgs.git pkgs.nodejs ]";
          description = "Packages on the turn command's PATH (besides a shell and coreutils).";
        };

        environmentFile = mkOption {
          type = types.nullOr types.path;
          default = null;
          example = "/run/secrets/agent-${name}.env";
          description = ''
            An environment file (systemd `EnvironmentFile=` syntax) for the turn command's own
            secrets, such as its model provider's API key. Not in the Nix store.
          '';
        };
      };
    };

  unitName = name: "hive-agent-${name}";
  stateDir = name: "/var/lib/${unitName name}";

  agentService = name: agent: hyperhive.service // {
    description = "hyperhive agent ${name} (hive-agent)";
    # The turn command runs through `sh -c`.
    path = [ pkgs.bash ] ++ agent.path;

    environment =
      lib.mapAttrs (_: hyperhive.literalForSystemd) {
        HIVE_AGENT_NAME = name;
        HIVE_AGENT_NATS_URL = agent.nats.url;
        HIVE_AGENT_STATE_DIR = stateDir name;
        HIVE_AGENT_SCHEDULE_TICK = agent.scheduleTick;
        HIVE_AGENT_TURN_COMMAND = agent.turnCommand;
        HIVE_AGENT_TURN_TIMEOUT = agent.turnTimeout;
      }
      // {
        # LoadCredential below puts the credential here, readable by this unit only.
        HIVE_AGENT_CREDS = "%d/nats-creds";
        # A dynamic user's home is /, read-only here; turn commands' tools (CLI agents, git) keep
        # their configuration and caches in HOME, so it is the agent's own state directory.
        HOME = stateDir name;
      };

    serviceConfig = hyperhive.serviceConfig // {
      ExecStart = lib.getExe' config.services.hyperhive.c0re.package "hive-agent";
      LoadCredential = [ "nats-creds:${agent.credentialsFile}" ];
      EnvironmentFile = lib.optional (agent.environmentFile != null) agent.environmentFile;
      # Each agent its own dynamic user and directory: agents cannot read each other's state.
      StateDirectory = unitName name;
      WorkingDirectory = stateDir name;
      # Turn commands are often JIT runtimes (node, the JVM), which need writable executable memory,
      # and read the machine's /proc files (cpuinfo, meminfo, stat) to size themselves.
      MemoryDenyWriteExecute = false;
      ProcSubset = "all";
    };
  };
in
{
  imports = [ ./c0re.nix ];

  options.services.hyperhive.agents = mkOption {
    type = types.attrsOf (types.submodule agentOptions);
    default = { };
    example = lib.literalExpression ''
      {
        alpha = {
          nats.url = "nats://nats.internal:4222";
          credentialsFile = "/run/secrets/agent-alpha.creds";
          turnCommand = "claude --print";
          path = [ pkgs.git ];
        };
      }
    '';
    description = ''
      The agents this hive runs, by name (`^[a-z][a-z0-9-]{0,31}$`: names are NATS subject tokens,
      KV keys and unix names). Each runs as the unit `hive-agent-<name>`: a static unit of its own,
      or, with `services.hyperhive.deploy.hive-controller` enabled, a transient unit hive-c0re
      starts and stops as the swarm wants.
    '';
  };

  config = lib.mkIf (agents != { }) {
    assertions = lib.concatLists (
      lib.mapAttrsToList (name: agent: [
        {
          assertion = hyperhive.isAgentName name;
          message = ''
            services.hyperhive.agents.${name}: "${name}" is not an agent name. Names are 1 to 32
            characters: a lowercase letter, then lowercase letters, digits or "-".
          '';
        }
        (hyperhive.notInStore "services.hyperhive.agents.${name}.credentialsFile" agent.credentialsFile)
        (hyperhive.notInStore "services.hyperhive.agents.${name}.environmentFile" agent.environmentFile)
      ]) agents
    );

    # Under hive-c0re the agents are its declared agents (modules/hive-c0re.nix), not units.
    systemd.services = lib.mkIf (!underHiveC0re) (
      lib.mapAttrs' (name: agent: lib.nameValuePair (unitName name) (agentService name agent)) agents
    );
  };
}
