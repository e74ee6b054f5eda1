//! The device sessions connected to this copy, by device id: where relayed frames go, who is
//! online for presence, and which session to close when a newer one of the same device
//! connects or the device is forgotten. Each session's socket task owns the receiving end of
//! its queue; everything here only queues, so no lock is held across an await.

use crate::registry::Registry;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::{CloseCode, HostPresence, LinkFrame};
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::mpsc;

/// Frames queued for one session before it counts as too slow: a relayed message to a full
/// queue is reported undeliverable (the sender keeps it and resends), so one stalled device
/// cannot make the copy buffer without bound.
pub const SESSION_QUEUE: usize = 256;

/// What a session's socket task is told to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    Frame(LinkFrame),
    Close(CloseCode, String),
}

#[derive(Debug)]
struct Session {
    kind: DeviceKind,
    name: String,
    session: u64,
    queue: mpsc::Sender<Outgoing>,
}

impl Session {
    fn queue_frame(&self, frame: LinkFrame) -> Result<(), NotQueued> {
        self.queue.try_send(Outgoing::Frame(frame)).map_err(|error| match error {
            mpsc::error::TrySendError::Full(_) => NotQueued::Full,
            mpsc::error::TrySendError::Closed(_) => NotQueued::Offline,
        })
    }
}

/// Why a frame was not queued for a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotQueued {
    /// No session of that device here.
    Offline,
    /// Its queue is full (a stalled device).
    Full,
}

#[derive(Debug, Default)]
pub struct Sessions {
    by_device: Mutex<HashMap<String, Session>>,
    last_session: Mutex<u64>,
}

impl Sessions {
    /// A session number greater than every earlier one on this copy: milliseconds since the
    /// Unix epoch (so copies can order sessions of one device), bumped on ties.
    fn next_session(&self, now_ms: u64) -> u64 {
        let mut last = self.last_session.lock().expect("sessions lock");
        *last = now_ms.max(*last + 1);
        *last
    }

    /// Registers an authenticated session; an older session of the same device is told to
    /// close with [`CloseCode::Replaced`]. Returns the session number and its queue's receiver.
    pub fn open(&self, device_id: &str, kind: DeviceKind, name: &str, now_ms: u64) -> (u64, mpsc::Receiver<Outgoing>) {
        let session = self.next_session(now_ms);
        let (queue, receiver) = mpsc::channel(SESSION_QUEUE);
        let older = self
            .by_device
            .lock()
            .expect("sessions lock")
            .insert(device_id.to_owned(), Session { kind, name: name.to_owned(), session, queue });
        let replaced = older.is_some();
        if let Some(older) = older {
            let reason = "a newer session of this device connected".to_owned();
            // The older task may be gone already; then there is nothing to close.
            let _ = older.queue.try_send(Outgoing::Close(CloseCode::Replaced, reason));
        }
        if kind == DeviceKind::Host && !replaced {
            self.tell_clients(host_presence(device_id, name, true, true));
        }
        (session, receiver)
    }

    /// Removes the session if it is still the device's current one (a replaced session's end
    /// must not take its successor offline).
    pub fn close(&self, device_id: &str, session: u64) {
        let removed = {
            let mut by_device = self.by_device.lock().expect("sessions lock");
            match by_device.get(device_id) {
                Some(current) if current.session == session => by_device.remove(device_id),
                _ => None,
            }
        };
        if let Some(removed) = removed
            && removed.kind == DeviceKind::Host
        {
            self.tell_clients(host_presence(device_id, &removed.name, true, false));
        }
    }

    /// Queues `frame` for the device's session.
    pub fn send(&self, device_id: &str, frame: LinkFrame) -> Result<(), NotQueued> {
        let by_device = self.by_device.lock().expect("sessions lock");
        by_device.get(device_id).ok_or(NotQueued::Offline)?.queue_frame(frame)
    }

    /// Queues `frame` for the device only while `session` is still its current session (the
    /// answer to a request must not reach a newer session that did not ask).
    pub fn send_to_session(&self, device_id: &str, session: u64, frame: LinkFrame) -> Result<(), NotQueued> {
        let by_device = self.by_device.lock().expect("sessions lock");
        by_device.get(device_id).filter(|s| s.session == session).ok_or(NotQueued::Offline)?.queue_frame(frame)
    }

    pub fn is_online(&self, device_id: &str) -> bool {
        self.by_device.lock().expect("sessions lock").contains_key(device_id)
    }

    /// Every paired host with its online state, for a client's `presence` frame.
    pub fn presence(&self, registry: &Registry) -> Vec<HostPresence> {
        registry
            .active_of_kind(DeviceKind::Host)
            .into_iter()
            .map(|host| {
                let online = self.is_online(&host.id);
                host_presence(&host.id, &host.name, true, online)
            })
            .collect()
    }

    /// Closes the sessions of devices the registry no longer holds as paired (forgotten, or
    /// their record gone) with [`CloseCode::Revoked`]; returns how many were closed.
    pub fn close_forgotten(&self, registry: &Registry) -> usize {
        let gone: Vec<(String, Session)> = {
            let mut by_device = self.by_device.lock().expect("sessions lock");
            let ids: Vec<String> = by_device.keys().filter(|id| registry.active(id).is_none()).cloned().collect();
            ids.into_iter().filter_map(|id| by_device.remove(&id).map(|s| (id, s))).collect()
        };
        for (id, session) in &gone {
            tracing::info!(device = %id, "closing the session of a forgotten device");
            let _ = session.queue.try_send(Outgoing::Close(CloseCode::Revoked, "this device was forgotten".into()));
            if session.kind == DeviceKind::Host {
                self.tell_clients(host_presence(id, &session.name, false, false));
            }
        }
        gone.len()
    }

    /// Sends a host's new state to every connected client.
    fn tell_clients(&self, host: HostPresence) {
        let by_device = self.by_device.lock().expect("sessions lock");
        for session in by_device.values().filter(|s| s.kind == DeviceKind::Client) {
            let _ = session.queue.try_send(Outgoing::Frame(LinkFrame::PresenceChanged { host: host.clone() }));
        }
    }
}

fn host_presence(device_id: &str, name: &str, paired: bool, online: bool) -> HostPresence {
    HostPresence { device_id: device_id.to_owned(), name: name.to_owned(), paired, online }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(receiver: &mut mpsc::Receiver<Outgoing>) -> Option<Outgoing> {
        receiver.try_recv().ok()
    }

    #[test]
    fn a_newer_session_replaces_the_older_and_the_older_end_keeps_it() {
        let sessions = Sessions::default();
        let (first, mut first_rx) = sessions.open("h1", DeviceKind::Host, "box", 5);
        let (second, _second_rx) = sessions.open("h1", DeviceKind::Host, "box", 5);
        assert!(second > first);
        assert!(matches!(frame(&mut first_rx), Some(Outgoing::Close(CloseCode::Replaced, _))));
        sessions.close("h1", first);
        assert!(sessions.is_online("h1"), "the replaced session's end must not remove the newer one");
        sessions.close("h1", second);
        assert!(!sessions.is_online("h1"));
    }

    #[test]
    fn clients_hear_hosts_come_and_go() {
        let sessions = Sessions::default();
        let (_, mut client) = sessions.open("c1", DeviceKind::Client, "phone", 1);
        let (host, _host_rx) = sessions.open("h1", DeviceKind::Host, "box", 2);
        let online = host_presence("h1", "box", true, true);
        assert_eq!(frame(&mut client), Some(Outgoing::Frame(LinkFrame::PresenceChanged { host: online })));
        sessions.close("h1", host);
        let offline = host_presence("h1", "box", true, false);
        assert_eq!(frame(&mut client), Some(Outgoing::Frame(LinkFrame::PresenceChanged { host: offline })));
        assert_eq!(sessions.send("h1", LinkFrame::Ping { t: 1 }), Err(NotQueued::Offline));
    }

    #[test]
    fn a_full_queue_is_reported_not_buffered() {
        let sessions = Sessions::default();
        let (_, _rx) = sessions.open("c1", DeviceKind::Client, "phone", 1);
        for t in 0..SESSION_QUEUE as u64 {
            sessions.send("c1", LinkFrame::Ping { t }).unwrap();
        }
        assert_eq!(sessions.send("c1", LinkFrame::Ping { t: 0 }), Err(NotQueued::Full));
    }
}
