//! The NATS connection: the agent's credential, its own inbox prefix (the only subscribe
//! subject it is granted), reconnects forever, and a clear log line when the server refuses
//! the credential or a permission.
//!
//! The credential file is read afresh on every (re)connect attempt, so a credential renewed in
//! its place is used without a restart (`creds_watch` makes the client reconnect to it
//! before the old one expires).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::{Auth, AuthError, ClientError, ConnectOptions, Event, ServerError};
use hyperhive_nats_objects::agent_inbox_prefix;
use hyperhive_schedule::AgentName;
use tracing::{debug, error, info, warn};

use crate::config::Config;
use crate::credential::{Credential, CredentialError, format_expiry, unix_now};
use crate::error::AgentError;

/// Requests (direct gets, publish acks) give up after this; a refused request shows up only as
/// a timeout, so it must be well below the tick.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the client pings the server. A connection that answers no ping for three in a row
/// is dropped and dialled again, so one that went silent (a network partition: its TCP
/// retransmissions back off, and after the network is back the connection can stay mute for up
/// to two minutes) costs at most about 30 s. With the client's default of 60 s it took three
/// minutes to notice, and after a 60 s partition the agent fired nothing for a further 50 s.
pub const PING_INTERVAL: Duration = Duration::from_secs(10);

/// The last credential found valid in the file: what a (re)connect falls back to while the file
/// holds something else (a bad write is reported by the watcher, and must not cut the agent off
/// while the credential it has is still good).
pub type CurrentCredential = Arc<Mutex<Credential>>;

/// Checks the credential (readable, this agent's, unexpired), then connects (retrying in the
/// background until the server answers). Returns the client and the credential it started
/// with, shared with the sign-in so that `creds_watch` can replace it.
///
/// # Errors
/// [`AgentError::Creds`] when the file is unreadable, not this agent's credential or already
/// expired.
pub async fn connect(config: &Config) -> Result<(async_nats::Client, CurrentCredential), AgentError> {
    let credential = startup_credential(config)?;
    let current = Arc::new(Mutex::new(credential));
    let creds = config.creds.display().to_string();
    let agent = config.name.to_string();
    // Set while the server refuses the credential, so the refusal is logged once per streak
    // rather than on every reconnect attempt.
    let refused = Arc::new(AtomicBool::new(false));
    let sign_in = SignIn { path: config.creds.clone(), agent: config.name.clone(), current: current.clone() };
    let options = ConnectOptions::with_auth_callback(move |nonce| {
        let auth = sign_in.auth(&nonce);
        async move { auth }
    })
    .name(format!("hive-agent {agent}"))
    .custom_inbox_prefix(agent_inbox_prefix(&config.name))
    .request_timeout(Some(REQUEST_TIMEOUT))
    .ping_interval(PING_INTERVAL)
    .retry_on_initial_connect()
    .max_reconnects(None)
    .reconnect_delay_callback(reconnect_delay)
    .event_callback(move |event| {
        let (creds, agent, refused) = (creds.clone(), agent.clone(), refused.clone());
        async move { log_event(&event, &creds, &agent, &refused) }
    });
    let client = options
        .connect(hyperhive_nats_creds::servers::server_list(&config.nats_url))
        .await
        .map_err(|e| AgentError::Nats(format!("cannot connect to {}: {e}", config.nats_url)))?;
    Ok((client, current))
}

/// Signs the server's nonce for one connect attempt.
#[derive(Debug)]
struct SignIn {
    path: PathBuf,
    agent: AgentName,
    current: CurrentCredential,
}

impl SignIn {
    /// The file is read on every attempt (a small local read, done in place): a credential
    /// renewed while the connection was down is used by the next attempt, without waiting for
    /// the watcher.
    fn auth(&self, nonce: &[u8]) -> Result<Auth, AuthError> {
        let credential = match Credential::read(&self.path, &self.agent, unix_now()) {
            Ok(fresh) => fresh,
            Err(e) => {
                debug!("signing in with the last valid credential: {e}");
                self.current.lock().unwrap_or_else(PoisonError::into_inner).clone()
            }
        };
        debug!(expires = %format_expiry(credential.expires_at()), "signing in to NATS");
        credential.auth(nonce)
    }
}

/// The credential at start, or why the agent cannot start, with what to do about it.
fn startup_credential(config: &Config) -> Result<Credential, AgentError> {
    let path = config.creds.display();
    let credential = Credential::read(&config.creds, &config.name, unix_now()).map_err(|e| match e {
        CredentialError::Expired { .. } => AgentError::Creds(format!(
            "{e}; mint a new one with `swarm-controller nats agent-creds {} --from DIR --out {path}`",
            config.name
        )),
        CredentialError::Unreadable { .. } | CredentialError::Creds(_) => {
            AgentError::Creds(format!("{e} (set HIVE_AGENT_CREDS to the agent's .creds file)"))
        }
        other => AgentError::Creds(other.to_string()),
    })?;
    match credential.expires_at() {
        Some(expires) => info!(
            "credential {path} expires in {}",
            humantime::format_duration(Duration::from_secs(expires.saturating_sub(unix_now())))
        ),
        None => info!("credential {path} does not expire"),
    }
    Ok(credential)
}

/// Backs off from 100 ms to 5 s between attempts, so a refused credential or a long outage
/// does not turn into a tight reconnect loop.
fn reconnect_delay(attempts: usize) -> Duration {
    let exponent = u32::try_from(attempts.min(6)).unwrap_or(6);
    Duration::from_millis(100 * 2u64.pow(exponent)).min(Duration::from_secs(5))
}

/// The server refuses a credential as an authorization violation (a server error on a live
/// connection, a client error while reconnecting) or, at its `exp`, "authentication expired".
fn is_refusal(event: &Event) -> bool {
    match event {
        Event::ServerError(ServerError::AuthorizationViolation) => true,
        Event::ServerError(ServerError::Other(e)) | Event::ClientError(ClientError::Other(e)) => {
            let e = e.to_lowercase();
            e.contains("authorization violation") || e.contains("expired")
        }
        _ => false,
    }
}

fn log_event(event: &Event, creds: &str, agent: &str, refused: &AtomicBool) {
    if is_refusal(event) {
        if !refused.swap(true, Ordering::Relaxed) {
            error!(
                "NATS refused the credential {creds} ({event}): it is expired, revoked or not for \
                 this server; mint a new one with `swarm-controller nats agent-creds {agent} \
                 --from DIR --out {creds}`"
            );
        }
        return;
    }
    match event {
        Event::Connected => {
            refused.store(false, Ordering::Relaxed);
            info!("connected to NATS");
        }
        Event::Disconnected => warn!("disconnected from NATS; reconnecting"),
        other => warn!("NATS: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnects_back_off_to_five_seconds() {
        let delays: Vec<u128> = (0..10).map(|n| reconnect_delay(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000]);
        assert_eq!(reconnect_delay(usize::MAX), Duration::from_secs(5));
    }

    #[test]
    fn refusals_are_recognised_in_every_form_the_client_reports() {
        let refusals = [
            Event::ServerError(ServerError::AuthorizationViolation),
            Event::ServerError(ServerError::Other("User Authentication Expired".into())),
            Event::ClientError(ClientError::Other("nats: authorization violation".into())),
        ];
        assert!(refusals.iter().all(is_refusal));
        let others = [
            Event::Disconnected,
            Event::ServerError(ServerError::Other("Permissions Violation for Publish to todo.b".into())),
            Event::ClientError(ClientError::MaxReconnects),
        ];
        assert!(!others.iter().any(is_refusal));
    }
}
