//! The controller's link to the control plane: it runs the link client
//! (`hyperhive_control_link::connect`, which reconnects with backoff, resends and de-duplicates),
//! hands clients' messages to [`Requests`], acks to [`Outgoing`], and keeps what `/healthz`
//! says about the link ([`LinkStatus`]).

use std::sync::{Arc, Mutex};

use hyperhive_control_link::Identity;
use hyperhive_control_link::connect::{self, Event};
use serde::Serialize;
use tokio::sync::mpsc;

use super::outgoing::Outgoing;
use super::requests::Requests;
use crate::api::{App, LinkReport};

/// What `/healthz` says about the link.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LinkView {
    /// `connecting`, `up` or `stopped` (the control plane closed it for good: forgotten).
    pub state: &'static str,
    /// This controller's device id at the control plane.
    pub device_id: String,
    /// The copy holding the link, while up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy: Option<String>,
    /// Why the last connection ended, or why the link stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The link's state, shared with the API.
#[derive(Debug)]
pub struct LinkStatus(Mutex<LinkView>);

impl LinkStatus {
    fn new(device_id: &str) -> Self {
        Self(Mutex::new(LinkView { state: "connecting", device_id: device_id.to_owned(), copy: None, error: None }))
    }

    pub fn view(&self) -> LinkView {
        self.0.lock().expect("never poisoned").clone()
    }

    fn set(&self, state: &'static str, copy: Option<String>, error: Option<String>) {
        let mut view = self.0.lock().expect("never poisoned");
        view.state = state;
        view.copy = copy;
        if error.is_some() || state == "up" {
            view.error = error;
        }
    }
}

impl LinkReport for LinkStatus {
    fn report(&self) -> serde_json::Value {
        serde_json::to_value(self.view()).expect("a link view serializes")
    }
}

/// The running link.
#[derive(Debug)]
pub struct Link {
    pub status: Arc<LinkStatus>,
    task: tokio::task::JoinHandle<()>,
}

/// How many events may wait for the dispatch loop.
const EVENTS: usize = 1024;

impl Link {
    /// Starts holding the link for `identity`, answering requests with `app`; `rate` is each
    /// client's requests a second.
    pub fn start(identity: Identity, app: Arc<App>, rate: u32) -> Self {
        let status = Arc::new(LinkStatus::new(&identity.device_id));
        let (commands, command_rx) = mpsc::channel(EVENTS);
        let (event_tx, events) = mpsc::channel(EVENTS);
        let out = Arc::new(Outgoing::new(commands));
        let requests = Requests::new(app, out.clone(), rate);
        tracing::info!(device_id = identity.device_id, control = identity.control_url, "holding the control link");
        let task = tokio::spawn(dispatch(identity, command_rx, event_tx, events, requests, out, status.clone()));
        Self { status, task }
    }

    /// Closes the link and stops every request running through it.
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

async fn dispatch(
    identity: Identity,
    command_rx: mpsc::Receiver<connect::Command>,
    event_tx: mpsc::Sender<Event>,
    mut events: mpsc::Receiver<Event>,
    mut requests: Requests,
    out: Arc<Outgoing>,
    status: Arc<LinkStatus>,
) {
    // The link holds the socket; the set aborts it when this task ends or is aborted.
    let mut link = tokio::task::JoinSet::new();
    let stopped_status = status.clone();
    link.spawn(async move {
        if let Err(stopped) = connect::run(&identity, command_rx, event_tx).await {
            tracing::error!(
                reason = %stopped,
                "the control plane closed the link for good; if this controller was forgotten, pair it again \
                 with `swarm-controller pair CODE` and restart it"
            );
            stopped_status.set("stopped", None, Some(stopped.to_string()));
        }
    });
    while let Some(event) = events.recv().await {
        match event {
            Event::Connected { copy, .. } => {
                tracing::info!(copy, "control link up");
                status.set("up", Some(copy), None);
            }
            Event::Reconnecting { after_ms, reason } => {
                tracing::warn!(after_ms, reason, "control link lost; reconnecting");
                status.set("connecting", None, Some(reason));
            }
            Event::Message { from, from_role, body } => requests.on_message(&from, from_role, body.get()),
            Event::Acked { to, seq } => out.acked(&to, seq),
            Event::Undeliverable { to, seq, reason } => {
                tracing::debug!(client = to, seq, ?reason, "a message to a client waits: it is not connected");
            }
            Event::Error { message } => tracing::warn!(message, "control link"),
            Event::Presence { .. } | Event::Reply { .. } | Event::RequestFailed { .. } => {}
        }
    }
    requests.shutdown().await;
}
