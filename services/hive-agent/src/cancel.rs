//! Cancel requests: the controller publishes `{"todo_id": ...}` on `cancel.<agent>` (the only
//! subject besides its inbox this agent's credential may subscribe to, and one only the
//! controller can publish to), and the running turn of that todo is ended as cancelled.
//!
//! A request names the todo so that one sent while a turn ends cannot cancel the next one.

use async_nats::Client;
use futures::StreamExt;
use hyperhive_hive_proto::turns::CancelRequest;
use hyperhive_nats_objects::agent_cancel_subject;
use hyperhive_schedule::AgentName;
use tokio::sync::watch;
use tracing::{info, warn};

/// The todo ids asked to be cancelled, the latest last. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Cancels(watch::Sender<Option<String>>);

impl Default for Cancels {
    fn default() -> Self {
        Self(watch::Sender::new(None))
    }
}

impl Cancels {
    /// Resolves once `todo_id` is asked to be cancelled (at once if it already was).
    pub async fn requested(&self, todo_id: &str) {
        let mut requests = self.0.subscribe();
        let _ = requests.wait_for(|latest| latest.as_deref() == Some(todo_id)).await.map(drop);
    }

    /// Records a request to cancel `todo_id`.
    pub fn request(&self, todo_id: String) {
        self.0.send_replace(Some(todo_id));
    }

    /// Follows `cancel.<agent>` on `client` until the connection ends.
    pub async fn listen(self, client: Client, agent: AgentName) {
        let subject = agent_cancel_subject(&agent);
        let mut requests = match client.subscribe(subject.clone()).await {
            Ok(requests) => requests,
            Err(e) => {
                warn!(%subject, "cannot follow cancel requests; turns cannot be cancelled: {e}");
                return;
            }
        };
        while let Some(message) = requests.next().await {
            match serde_json::from_slice::<CancelRequest>(&message.payload) {
                Ok(request) => {
                    info!(todo = %request.todo_id, "cancel requested");
                    self.request(request.todo_id);
                }
                Err(e) => warn!(%subject, "ignoring a cancel request that is not {{\"todo_id\": ...}}: {e}"),
            }
        }
    }
}
