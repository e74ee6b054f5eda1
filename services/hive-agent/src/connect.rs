//! The NATS connection: the agent's credential, its own inbox prefix (the only subscribe
//! subject it is granted), reconnects forever, and a clear log line when the server refuses
//! the credential or a permission.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::{ClientError, ConnectOptions, Event, ServerError};
use hyperhive_nats_creds::{agent_inbox_prefix, jwt::verified_claims, read_creds_jwt};
use tracing::{error, info, warn};

use crate::AgentError;
use crate::config::Config;

/// Requests (direct gets, publish acks) give up after this; a refused request shows up only as
/// a timeout, so it must be well below the tick.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Checks the credential's expiry, then connects (retrying in the background until the server
/// answers).
///
/// # Errors
/// [`AgentError::Creds`] when the file is unreadable, not a credential or already expired.
pub async fn connect(config: &Config) -> Result<async_nats::Client, AgentError> {
    check_expiry(config)?;
    let creds = config.creds.display().to_string();
    let agent = config.name.to_string();
    // Set while the server refuses the credential, so the refusal is logged once per streak
    // rather than on every reconnect attempt.
    let refused = Arc::new(AtomicBool::new(false));
    let options = ConnectOptions::with_credentials_file(&config.creds)
        .await
        .map_err(|e| AgentError::Creds(format!("cannot read {creds} (HIVE_AGENT_CREDS): {e}")))?
        .name(format!("hive-agent {agent}"))
        .custom_inbox_prefix(agent_inbox_prefix(&config.name))
        .request_timeout(Some(REQUEST_TIMEOUT))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .reconnect_delay_callback(reconnect_delay)
        .event_callback(move |event| {
            let (creds, agent, refused) = (creds.clone(), agent.clone(), refused.clone());
            async move { log_event(&event, &creds, &agent, &refused) }
        });
    options
        .connect(&config.nats_url)
        .await
        .map_err(|e| AgentError::Nats(format!("cannot connect to {}: {e}", config.nats_url)))
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

fn check_expiry(config: &Config) -> Result<(), AgentError> {
    let path = config.creds.display();
    let jwt = read_creds_jwt(&config.creds)
        .map_err(|e| AgentError::Creds(format!("{e} (set HIVE_AGENT_CREDS to the agent's .creds file)")))?;
    let claims =
        verified_claims(&jwt).map_err(|e| AgentError::Creds(format!("{path} holds no valid user JWT: {e}")))?;
    let Some(expires) = claims["exp"].as_u64() else {
        return Ok(());
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    if expires <= now {
        return Err(AgentError::Creds(format!(
            "the credential {path} expired {} ago; mint a new one with `swarm-controller nats \
             agent-creds {} --from DIR --out {path}`",
            humantime::format_duration(Duration::from_secs(now - expires)),
            config.name
        )));
    }
    info!("credential {path} expires in {}", humantime::format_duration(Duration::from_secs(expires - now)));
    Ok(())
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
