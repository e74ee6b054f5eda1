//! One copy's shared state: the store (metered), the key, the clock, the registry, readiness.

use crate::clock::Clock;
use crate::codes::Issuer;
use crate::key::ControlKey;
use crate::limits::{Guards, Limits};
use crate::metrics::{MeteredStore, Metrics};
use crate::peer_confirm::PeerConfirmations;
use crate::records::{DeviceRecord, RecordError};
use crate::registry::Registry;
use crate::sessions::Sessions;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::PeerFrame;
use hyperhive_object_store::Store;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `/readyz` fails when the store has not answered for this long. The background refresh asks
/// every [`crate::cadence::REFRESH_EVERY`], so a healthy store always answers well within it.
pub const READY_WINDOW: Duration = Duration::from_secs(6);

/// A device found offline by a relay is read from the store again at most this often
/// ([`Control::still_paired`]): the registry's own refresh period.
pub const RECHECK_GAP: Duration = crate::cadence::REFRESH_EVERY;
/// How long such a read may take before the registry decides.
const RECHECK_WITHIN: Duration = Duration::from_secs(1);
/// Past this many devices remembered as rechecked, the old ones are dropped.
const RECHECKS_HELD: usize = 4096;
/// How long a forget served here waits for the linked copies to confirm they cut the device.
const PEERS_CONFIRM_WITHIN: Duration = Duration::from_secs(1);

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
    /// When each device was last read again for a relay ([`Control::still_paired`]).
    rechecked: Mutex<HashMap<String, Instant>>,
    /// The linked copies' answers to what this copy waits on them for.
    pub peer_confirmations: PeerConfirmations,
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
            rechecked: Mutex::default(),
            peer_confirmations: PeerConfirmations::default(),
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
        let host = self.paired_host_name(device_id);
        self.cut(device_id, host.as_deref());
        self.sessions.broadcast(&PeerFrame::Revoked { device_id: device_id.to_owned() });
    }

    /// [`Control::revoke`], then waits until every linked copy has cut the device too (at most
    /// [`PEERS_CONFIRM_WITHIN`]): whoever is told "forgotten" next finds it gone whichever copy
    /// their own link is on. Returns how many linked copies confirmed, and how many there are.
    pub async fn revoke_everywhere(&self, device_id: &str) -> (usize, usize) {
        self.revoke(device_id);
        self.peer_confirmations.confirm(&self.sessions, PEERS_CONFIRM_WITHIN).await
    }

    /// A peer says it forgot a device (`revoked`): the same here, without telling the peers again.
    pub fn revoked_by_peer(&self, device_id: &str) {
        let host = self.paired_host_name(device_id);
        self.cut(device_id, host.as_deref());
    }

    /// A device paired through this copy: known here at once, and told to the peers (`paired`),
    /// so every linked copy knows it at once too instead of at its next refresh (a client there
    /// reaching for the host finds it, and hears of it in its presence).
    pub fn paired(&self, record: &DeviceRecord, version: &str) {
        self.learn_paired(record.clone(), version.to_owned());
        let text = String::from_utf8(crate::records::encode(record)).expect("records are JSON, so UTF-8");
        self.sessions.broadcast(&PeerFrame::Paired { record: text, version: version.to_owned() });
    }

    /// A peer says a device paired through it: the same here, without telling the peers again.
    ///
    /// # Errors
    /// The record is not one this build reads (a peer of another version): this copy learns of
    /// the device at its next refresh instead.
    pub fn paired_by_peer(&self, record: &str, version: &str) -> Result<(), RecordError> {
        let record: DeviceRecord = crate::records::decode("a peer's paired record", record.as_bytes())?;
        if !crate::records::is_device_id(&record.id) {
            return Err(RecordError::Malformed { key: record.id, reason: "not a device id".into() });
        }
        self.learn_paired(record, version.to_owned());
        Ok(())
    }

    fn learn_paired(&self, record: DeviceRecord, version: String) {
        let host = (record.kind == DeviceKind::Host).then(|| (record.id.clone(), record.name.clone()));
        if self.registry.hold(record, version)
            && let Some((id, name)) = host
        {
            self.sessions.host_paired(&id, &name);
        }
    }

    /// The name of a host the registry holds as paired (before a forget is marked in it).
    fn paired_host_name(&self, device_id: &str) -> Option<String> {
        self.registry.active(device_id).filter(|d| d.kind == DeviceKind::Host).map(|d| d.name)
    }

    fn cut(&self, device_id: &str, host_name: Option<&str>) {
        self.registry.mark_forgotten(device_id, &crate::records::timestamp(self.clock.now()));
        self.sessions.revoke(device_id, host_name);
    }

    /// Reads the device's record from the store now, instead of at the next refresh, and acts on
    /// it: a device the store no longer holds as paired is refused and cut here at once, and the
    /// peers are told (`revoked`), so one recheck reaches every linked copy. Returns whether the
    /// store holds it as paired. The store decides, not the asker: a recheck can only make this
    /// copy see the truth sooner, so `agents-control forget` needs no key to announce a forget.
    pub async fn recheck(&self, device_id: &str) -> Result<bool, hyperhive_object_store::StoreError> {
        let host = self.paired_host_name(device_id);
        let held = self.registry.active_kind(device_id).is_some() || self.sessions.is_online(device_id);
        if self.registry.fetch(self.store.as_ref(), device_id).await?.is_some() {
            return Ok(true);
        }
        // Held here before, or a tombstone now: the other copies may still hold it.
        if held || self.registry.holds(device_id) {
            tracing::info!(device = %device_id, "a recheck found the device forgotten; cutting it everywhere");
            self.cut(device_id, host.as_deref());
            self.sessions.broadcast(&PeerFrame::Revoked { device_id: device_id.to_owned() });
        }
        Ok(false)
    }

    /// Whether a device a relay found offline is still paired, as the store says now: a copy
    /// that missed a forget (its peer link was down, or the command line could not reach it)
    /// must not tell a sender "offline, keep waiting" about a device that no longer exists.
    /// One store read per device per [`RECHECK_GAP`] at most, so a sender writing again and
    /// again to an offline device costs no more than the refresh does; in between, and when the
    /// store does not answer within [`RECHECK_WITHIN`], the registry decides, and only a
    /// forget it holds is final ("unknown" must never come from a store that did not answer).
    pub async fn still_paired(&self, device_id: &str) -> bool {
        let now = Instant::now();
        let not_forgotten_here = || self.registry.known(device_id) != crate::registry::Known::Refused;
        {
            let mut last = self.rechecked.lock().expect("rechecked lock");
            if last.get(device_id).is_some_and(|at| now.saturating_duration_since(*at) < RECHECK_GAP) {
                return not_forgotten_here();
            }
            if last.len() >= RECHECKS_HELD {
                last.retain(|_, at| now.saturating_duration_since(*at) < RECHECK_GAP);
            }
            last.insert(device_id.to_owned(), now);
        }
        match tokio::time::timeout(RECHECK_WITHIN, self.recheck(device_id)).await {
            Ok(Ok(paired)) => paired,
            Ok(Err(_)) | Err(_) => not_forgotten_here(),
        }
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
