//! Work given to agents now and what they did: the prompts an operator queues, an agent's queue
//! as it stands ([`queue`]), cancelling its running turn ([`cancel`]), its turn history
//! ([`history`]), every agent's last turn in memory ([`last_turns`]) and a turn's whole output while the relay has it ([`turn_output`]).

pub mod cancel;
pub mod history;
pub mod last_turns;
pub mod queue;
pub mod turn_output;

/// A read or write of the queue or the history NATS did not complete.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

fn unavailable(what: &'static str) -> impl Fn(String) -> Unavailable {
    move |reason| Unavailable(crate::nats::what_to_do(&format!("{what}: {reason}")))
}
