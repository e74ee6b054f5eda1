#!/usr/bin/env python3
"""Rehearses swarm.nix without VMs, on machines with no Nix store or KVM.

Runs the test script itself, cut out of swarm.nix, against stand-in machines on this one:
nats-server in JWT mode with the config swarm.nix builds (the fragment `swarm-controller nats
init` writes, with listen and JetStream), swarm-controller and two hive-agents with the
environment the NixOS modules give their units and the settings swarm.nix gives the modules
(its reconcile interval, tick and turn command, read out of the file), and `swarmctl` pointed at
the controller's socket. `systemctl kill|restart|is-active` act on the processes; an agent
killed is started again at once, as its unit's `Restart=on-failure` would (without the 5 s
pause). What it cannot stand in for is skipped: the socket group's users (`su`), and the nats
CLI the credential subtest uses.

swarm.nix now runs its agents under hive-c0re; this rehearsal still starts each agent as its own
hive-agent process with the environment the former static unit had, stands `hive-c0re.service`
in with that agent, and runs only the four subtests below, not the hive ones (they need hive-c0re
and the controller's hive routes). It has not been rerun since that change.

    python3 tests/nixos/rehearse/swarm.py            # every subtest it can run
    python3 tests/nixos/rehearse/swarm.py "a schedule"   # subtests by name prefix

Needs target/debug/{swarm-controller,swarmctl,hive-agent} (cargo build --workspace --bins) and
.tools/bin/nats-server.
"""

import os
import re
import signal
import sys
import tempfile

from standin import ROOT, TARGET, TOOLS, Daemon, Machine, free_port, remove_work, run_subtests, test_script, wait

RUNNABLE = [
    "NATS, the controller and both agents come up",
    "a schedule for both agents fires in both",
    "an agent killed and restarted refires nothing",
    "the controller restarts onto the same socket directory",
]
NIX = open(os.path.join(ROOT, "tests", "nixos", "swarm.nix")).read()


def nix_setting(pattern):
    found = re.search(pattern, NIX, re.S)
    if not found:
        raise Exception(f"rehearsal: swarm.nix no longer matches {pattern!r}")
    return found.group(1)


class Hive(Machine):
    """A hive: its agent's unit is a process; /var/lib/hive-agent-<name> is under the work
    directory."""

    def __init__(self, name, agent, env, work, nats_url):
        super().__init__(name, env)
        self.agent = agent
        self.lib = os.path.join(work, "var", "lib")
        state = os.path.join(self.lib, f"hive-agent-{agent}")
        os.makedirs(state)
        # What modules/hive-agent.nix puts in the unit's environment, with swarm.nix's settings.
        unit_env = dict(
            env,
            HIVE_AGENT_NAME=agent,
            HIVE_AGENT_NATS_URL=nats_url,
            HIVE_AGENT_STATE_DIR=state,
            HIVE_AGENT_SCHEDULE_TICK=nix_setting(r'scheduleTick = "([^"]+)";'),
            HIVE_AGENT_TURN_COMMAND=nix_setting(r"turnCommand = ''(.*?)'';"),
            HIVE_AGENT_CREDS=os.path.join(work, "creds", f"{agent}.creds"),
            HOME=state,
        )
        self.unit = Daemon([os.path.join(TARGET, "hive-agent")], unit_env, os.path.join(work, f"{name}.log"), state)
        self.unit.start()

    def wait_for_unit(self, unit):
        wait(f"{self.name}: {unit}", lambda: "consuming todos" in open(self.unit.log).read())

    def execute(self, command):
        service = f"hive-agent-{self.agent}.service"
        if command == f"systemctl kill --signal=KILL {service}":
            self.unit.stop(signal.SIGKILL)
            self.unit.start()
            return 0, ""
        if command == f"systemctl is-active {service}":
            return (0 if self.unit.running() else 3), ""
        return super().execute(command.replace("/var/lib/", self.lib + "/"))


class Controller(Machine):
    """The controller's machine: swarmctl on PATH, pointed at the socket (as the module's wrapper
    does), and `systemctl restart swarm-controller.service` acting on its process."""

    def __init__(self, env, work, nats_url):
        self.socket = os.path.join(work, "run", "swarm-controller", "controller.sock")
        bin_dir = os.path.join(work, "controller-bin")
        os.makedirs(bin_dir)
        os.symlink(os.path.join(TARGET, "swarmctl"), os.path.join(bin_dir, "swarmctl"))
        env = dict(env, PATH=f"{bin_dir}:{env['PATH']}", SWARM_CONTROLLER_SOCKET=self.socket)
        super().__init__("controller", env)
        unit_env = dict(
            env,
            SWARM_NATS_URL=nats_url,
            SWARM_NATS_CREDS=os.path.join(work, "creds", "controller.creds"),
            SWARM_RECONCILE_SECS=nix_setting(r"reconcileInterval = (\d+);"),
        )
        command = [os.path.join(TARGET, "swarm-controller"), "serve"]
        self.unit = Daemon(command, unit_env, os.path.join(work, "controller.log"))
        self.unit.start()

    def wait_for_unit(self, unit):
        wait("the controller's socket", lambda: os.path.exists(self.socket))

    def execute(self, command):
        if command == "systemctl restart swarm-controller.service":
            self.unit.stop()
            self.unit.start()
            return 0, ""
        return super().execute(command.replace("/run/swarm-controller/controller.sock", self.socket))


class Nats(Machine):
    def __init__(self, env, work, port):
        super().__init__("nats", env)
        self.port = port
        self.unit = Daemon([os.path.join(TOOLS, "nats-server"), "-c", os.path.join(work, "nats.conf")], env,
                           os.path.join(work, "nats.log"))
        self.unit.start()

    def wait_for_unit(self, unit):
        wait("nats-server", lambda: "Server is ready" in open(self.unit.log).read())

    def wait_for_open_port(self, port):
        self.wait_for_unit("nats.service")


def main(wanted):
    work = tempfile.mkdtemp(prefix="rehearsal.")
    machines = []
    try:
        env = dict(os.environ, NO_COLOR="1")
        # As swarm.nix's nats-init and nats-conf derivations.
        creds = os.path.join(work, "creds")
        controller_bin = os.path.join(TARGET, "swarm-controller")
        Machine("build", env).succeed(
            f"{controller_bin} nats init --out {creds} --resolver-dir {work}/jwt && for agent in alpha beta; do "
            f'{controller_bin} nats agent-creds "$agent" --from {creds} --out {creds}/$agent.creds --ttl 3650d; done'
        )
        port = free_port()
        with open(os.path.join(work, "nats.conf"), "w") as conf:
            conf.write(f'listen: "127.0.0.1:{port}"\njetstream {{ store_dir: "{work}/js", max_file_store: 4GB }}\n')
            conf.write(open(os.path.join(creds, "nats-server.conf")).read())
        nats_url = f"nats://127.0.0.1:{port}"
        nats = Nats(env, work, port)
        machines.append(nats)
        nats.wait_for_unit("nats.service")
        controller = Controller(env, work, nats_url)
        hive1 = Hive("hive1", "alpha", env, work, nats_url)
        hive2 = Hive("hive2", "beta", env, work, nats_url)
        machines += [controller, hive1, hive2]

        scope = dict(nats=nats, controller=controller, hive1=hive1, hive2=hive2)
        ran = run_subtests(test_script("swarm.nix"), scope, wanted)
        print(f"rehearsal: {ran} subtests passed")
    finally:
        for machine in reversed(machines):
            machine.unit.stop(signal.SIGKILL)
        remove_work(work)


if __name__ == "__main__":
    main(sys.argv[1:] or RUNNABLE)
