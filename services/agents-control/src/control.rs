//! One copy's shared state: the store (metered), the key, the clock, the registry, readiness.

use crate::clock::Clock;
use crate::codes::Issuer;
use crate::key::ControlKey;
use crate::limits::{Guards, Limits};
use crate::metrics::{MeteredStore, Metrics};
use crate::registry::Registry;
use crate::sessions::Sessions;
use hyperhive_control_proto::link::PeerFrame;
use hyperhive_object_store::Store;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// `/readyz` fails when the store has not answered for this long. The background refresh asks
/// every [`crate::serve::REFRESH_EVERY`], so a healthy store always answers well within it.
pub const READY_WINDOW: Duration = Duration::from_secs(6);

#[derive(Debug)]
pub struct Control {
    pub store: Arc<dyn Store>,
    pub key: ControlKey,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub registry: Registry,
    /// The device links connected to this copy.
    pub sessions: Sessions,
    /// This copy's name, told to devices in `welcome` (for their logs).
    pub copy_name: String,
    /// The control plane's name (`AGENTS_CONTROL_NAME`), the one windows and phones show: told
    /// to devices when they pair and in every `welcome`. `None` when none was given.
    pub name: Option<String>,
    /// What codes made here over a client's link carry (AGENTS_CONTROL_URL and the pin); `None`
    /// when this copy was not given its public address, and then it makes no codes.
    pub issuer: Option<Issuer>,
    /// What unproven parties may cost this copy (connections, store lookups).
    pub guards: Guards,
    /// The pending codes this copy knows of (sweeping, and the bound per client).
    pub codes: crate::codes::CodeIndex,
    draining: AtomicBool,
}

impl Control {
    pub fn new(store: Arc<dyn Store>, key: ControlKey, clock: Arc<dyn Clock>) -> Control {
        let metrics = Arc::new(Metrics::default());
        Control {
            store: MeteredStore::wrap(store, metrics.clone()),
            key,
            clock,
            metrics,
            registry: Registry::default(),
            sessions: Sessions::default(),
            copy_name: "agents-control".into(),
            name: None,
            issuer: None,
            guards: Guards::new(Limits::default()),
            codes: crate::codes::CodeIndex::default(),
            draining: AtomicBool::new(false),
        }
    }

    /// Names the copy in the `welcome` devices get.
    pub fn with_copy_name(mut self, name: impl Into<String>) -> Control {
        self.copy_name = name.into();
        self
    }

    /// Runs with these limits instead of the defaults.
    pub fn with_limits(mut self, limits: Limits) -> Control {
        self.guards = Guards::new(limits);
        self
    }

    /// Names the control plane for its devices (`AGENTS_CONTROL_NAME`).
    pub fn with_name(mut self, name: Option<String>) -> Control {
        self.name = name;
        self
    }

    /// The public address (and proxy pin) every code made by this copy hands to devices.
    pub fn with_public_address(mut self, control_url: impl Into<String>, pin: Option<String>) -> Control {
        self.issuer = Some(Issuer { key: self.key.clone(), control_url: control_url.into(), pin });
        self
    }

    /// A device was forgotten (by a request served here): refuse it from now on and close its
    /// session here at once. The peer links also tell every other copy (`revoked`).
    pub fn revoke(&self, device_id: &str) {
        self.registry.mark_forgotten(device_id, &crate::records::timestamp(self.clock.now()));
        self.sessions.revoke(device_id);
        self.sessions.broadcast(&PeerFrame::Revoked { device_id: device_id.to_owned() });
    }

    /// Whether the device is connected to this copy or, as its peers say, to another one.
    pub fn is_online(&self, device_id: &str) -> bool {
        self.sessions.is_online(device_id)
    }

    /// From now on `/readyz` fails: the copy is shutting down.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// `Ok` when this copy should get new connections, else why not.
    pub fn readiness(&self) -> Result<(), String> {
        ready_at(self.draining.load(Ordering::SeqCst), self.metrics.last_store_answer(), Instant::now())
    }
}

/// The readiness rule, pure so it is tested without waiting.
pub fn ready_at(draining: bool, last_answer: Option<Instant>, now: Instant) -> Result<(), String> {
    if draining {
        return Err("shutting down".into());
    }
    match last_answer {
        Some(at) if now.saturating_duration_since(at) <= READY_WINDOW => Ok(()),
        Some(at) => Err(format!("the store has not answered for {}s", now.saturating_duration_since(at).as_secs())),
        None => Err("the store has not answered yet".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_while_the_store_answers_and_not_draining() {
        let start = Instant::now();
        assert!(ready_at(false, None, start).is_err());
        assert!(ready_at(false, Some(start), start + READY_WINDOW).is_ok());
        let late = ready_at(false, Some(start), start + READY_WINDOW + Duration::from_secs(1));
        assert!(late.unwrap_err().contains("has not answered for 7s"));
        assert_eq!(ready_at(true, Some(start), start).unwrap_err(), "shutting down");
    }
}
