//! Ending with the hive-c0re that started this agent, under hive-c0re's process runner.
//!
//! There the agent is hive-c0re's child. A hive-c0re that is killed (SIGKILL, a crash, the OOM
//! killer) cannot stop its agents, and an agent left without its supervisor goes on taking
//! todos nobody watches; a hive-c0re started again would have to find it. So the runner names
//! itself in `HIVE_AGENT_SUPERVISOR_PID`, and the agent asks the kernel for SIGTERM when its
//! parent ends (`PR_SET_PDEATHSIG`), which it handles as any stop: the running todo is handed
//! back. Under the systemd runner the variable is unset: each agent is a unit of its own, which
//! a restarted hive-c0re finds again.

use nix::sys::signal::Signal;

/// Asks for SIGTERM when the parent ends, then checks the parent is still `supervisor`: one that
/// died between starting this process and the request would never send it.
///
/// # Errors
/// The kernel refused the request, or the supervisor is gone already; the agent must not run.
pub fn end_with(supervisor: i32) -> Result<(), String> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)
        .map_err(|e| format!("cannot ask to be stopped with hive-c0re (pid {supervisor}): {e}"))?;
    check_parent(supervisor, nix::unistd::getppid().as_raw())
}

fn check_parent(supervisor: i32, parent: i32) -> Result<(), String> {
    if parent == supervisor {
        return Ok(());
    }
    Err(format!(
        "hive-c0re (pid {supervisor}, HIVE_AGENT_SUPERVISOR_PID) that started this agent is gone (its parent is now \
         pid {parent}); an agent does not run unsupervised"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_whose_supervisor_is_gone_does_not_run() {
        assert!(check_parent(4242, 4242).is_ok());
        let refused = check_parent(4242, 1).unwrap_err();
        assert!(refused.contains("pid 4242") && refused.contains("pid 1"), "{refused}");
        // This test process's own parent is a supervisor it may name.
        end_with(nix::unistd::getppid().as_raw()).unwrap();
        assert!(end_with(nix::unistd::getppid().as_raw() + 1).is_err());
    }
}
