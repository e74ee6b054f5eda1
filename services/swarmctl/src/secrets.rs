//! `swarmctl secret set|list|rm`: secret variables of one agent (`--agent NAME`) or defaults of
//! every agent (docs/swarm/secrets.md). A value is read from stdin, never from the command line,
//! where `ps`, `/proc/<pid>/cmdline` and shell history would keep it; one trailing newline is
//! dropped (what `echo` adds), and an empty value is refused.

use std::io::Read;

use clap::Subcommand;
use hyper::http::Method;
use hyperhive_hive_proto::AgentName;
use hyperhive_swarm_api::limits::MAX_SECRET_VALUE_BYTES;
use hyperhive_swarm_api::paths;
use hyperhive_swarm_api::secrets::{SecretChanged, SecretFrom, SecretListed};

use super::client::{self, Api, CtlError};
use super::format::{grid, pretty_answer};

/// `swarmctl secret ...`.
#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Set a secret variable from stdin: `printf %s "$TOKEN" | swarmctl secret set --agent NAME VAR`.
    /// Without --agent it is a default of every agent (an agent's own value wins). The agent's
    /// next turn has it in its environment; running agents are not restarted.
    #[command(after_help = "The value is read from standard input, never from the command line (a process's \
arguments are readable by every user of the machine and stay in shell history). One trailing newline is \
dropped; an empty value is refused; at most 64 KiB of UTF-8 text.\n\n\
VAR: upper-case letters, digits and '_' (^[A-Z_][A-Z0-9_]*$), at most 128 characters, not starting with \
HIVE_ or LD_, and none of the variables processes depend on (PATH, HOME, USER, SHELL, ...).")]
    Set {
        /// The agent (default: every agent, as the swarm's default).
        #[arg(long, value_name = "NAME")]
        agent: Option<AgentName>,
        /// The variable's name.
        var: String,
        /// Refused: a value is never taken from the command line (read from stdin instead).
        #[arg(hide = true)]
        value: Option<String>,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// The secret variables of an agent (with --agent: its own and the swarm defaults it gets,
    /// FROM saying which) or the swarm's defaults: names and when each was set, never a value.
    List {
        /// The agent (default: the swarm's defaults).
        #[arg(long, value_name = "NAME")]
        agent: Option<AgentName>,
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Remove a secret variable: the agent's own value (the swarm default, if any, applies
    /// again), or without --agent the swarm's default.
    Rm {
        /// The agent (default: the swarm's default).
        #[arg(long, value_name = "NAME")]
        agent: Option<AgentName>,
        /// The variable's name.
        var: String,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
}

fn path(agent: Option<&AgentName>, var: &str) -> String {
    match agent {
        Some(agent) => paths::agent_secret(agent, var),
        None => paths::swarm_secret(var),
    }
}

/// Refuses a value written on the command line (`VAR value` or `VAR=value`) before anything is
/// sent: saying why is the point, the value is never repeated.
fn refuse_inline(var: &str, value: Option<&String>) -> Result<(), CtlError> {
    if value.is_some() || var.contains('=') {
        return Err(CtlError::Usage(
            "swarmctl never takes a secret's value on its command line: every user of this machine can read a \
             process's arguments (ps, /proc/PID/cmdline) and the shell keeps them in its history. Give only \
             the name and pipe the value on stdin, e.g. `swarmctl secret set VAR < file` or \
             `printf %s \"$VALUE\" | swarmctl secret set VAR`"
                .into(),
        ));
    }
    Ok(())
}

/// The value on stdin, one trailing newline dropped.
fn read_value(mut input: impl Read) -> Result<Vec<u8>, CtlError> {
    let mut bytes = Vec::new();
    input
        .by_ref()
        .take(MAX_SECRET_VALUE_BYTES as u64 + 3)
        .read_to_end(&mut bytes)
        .map_err(|e| CtlError::Usage(format!("reading the value from stdin: {e}")))?;
    if bytes.ends_with(b"\r\n") {
        bytes.truncate(bytes.len() - 2);
    } else if bytes.ends_with(b"\n") {
        bytes.truncate(bytes.len() - 1);
    }
    if bytes.is_empty() {
        return Err(CtlError::Usage(
            "the value on stdin is empty; pipe the value in, e.g. `swarmctl secret set VAR < file`".into(),
        ));
    }
    if bytes.len() > MAX_SECRET_VALUE_BYTES {
        return Err(CtlError::Usage(format!("a secret's value is at most {MAX_SECRET_VALUE_BYTES} bytes")));
    }
    Ok(bytes)
}

fn delivered(answer: &SecretChanged) -> String {
    match answer.deliveries.as_slice() {
        [] => "no agent to deliver it to".to_owned(),
        [one] => format!("delivery to the agent: job {one}"),
        many => format!(
            "delivery to {} agents: jobs {}",
            many.len(),
            many.iter().map(|j| j.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `swarmctl secret ...`, reading a value from `stdin`.
///
/// # Errors
/// [`CtlError`].
pub async fn run(api: &Api, command: SecretCommand, stdin: impl Read) -> Result<String, CtlError> {
    match command {
        SecretCommand::Set { agent, var, value, json } => {
            refuse_inline(&var, value.as_ref())?;
            let value = read_value(stdin)?;
            let bytes = client::request(api, Method::PUT, &path(agent.as_ref(), &var), None, Some(value)).await?;
            if json {
                return pretty_answer(&bytes);
            }
            let answer: SecretChanged = client::answer(&bytes)?;
            Ok(format!("{} set; {}\n", answer.name, delivered(&answer)))
        }
        SecretCommand::List { agent, json } => {
            let path = match &agent {
                Some(agent) => paths::agent_secrets(agent),
                None => paths::SECRETS.to_owned(),
            };
            let bytes = client::request(api, Method::GET, &path, None, None).await?;
            if json {
                return pretty_answer(&bytes);
            }
            let listing: Vec<SecretListed> = client::answer(&bytes)?;
            let rows = listing.into_iter().map(|s| {
                let from = match s.from {
                    SecretFrom::Agent => "agent",
                    SecretFrom::Swarm => "swarm",
                };
                [s.name, s.set_at, from.to_owned()]
            });
            Ok(grid(["NAME", "SET AT", "FROM"], rows))
        }
        SecretCommand::Rm { agent, var, json } => {
            let bytes = client::request(api, Method::DELETE, &path(agent.as_ref(), &var), None, None).await?;
            if json {
                return pretty_answer(&bytes);
            }
            let answer: SecretChanged = client::answer(&bytes)?;
            Ok(format!("{} removed; {}\n", answer.name, delivered(&answer)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_is_dropped_and_an_empty_value_refused() {
        assert_eq!(read_value(&b"s3cr3t\n"[..]).unwrap(), b"s3cr3t");
        assert_eq!(read_value(&b"s3cr3t\r\n"[..]).unwrap(), b"s3cr3t");
        assert_eq!(read_value(&b"two\n\n"[..]).unwrap(), b"two\n");
        assert_eq!(read_value(&b"no newline"[..]).unwrap(), b"no newline");
        for empty in [&b""[..], b"\n"] {
            assert!(read_value(empty).unwrap_err().to_string().contains("empty"));
        }
        assert!(read_value(&vec![b'x'; MAX_SECRET_VALUE_BYTES + 1][..]).is_err());
    }

    #[test]
    fn a_value_on_the_command_line_is_refused_without_repeating_it() {
        let err = refuse_inline("TOKEN", Some(&"s3cr3t".to_owned())).unwrap_err().to_string();
        assert!(err.contains("stdin") && !err.contains("s3cr3t"), "{err}");
        let err = refuse_inline("TOKEN=s3cr3t", None).unwrap_err().to_string();
        assert!(err.contains("command line") && !err.contains("s3cr3t"), "{err}");
        assert!(refuse_inline("TOKEN", None).is_ok());
    }
}
