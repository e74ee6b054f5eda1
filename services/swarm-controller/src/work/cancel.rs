//! Cancelling an agent's running turn: the running todo is read from the agent's last turn
//! header in `RELAY`, and a request naming it goes to `cancel.<agent>`, which only the controller
//! may publish and only that agent receives.

use async_nats::jetstream;
use hyperhive_hive_proto::feed::{RelayState, TurnHeader};
use hyperhive_hive_proto::turns::CancelRequest;
use hyperhive_nats_objects::{RELAY_STREAM, agent_cancel_subject, agent_turn_subject};
use hyperhive_schedule::AgentName;

use super::{Unavailable, unavailable};

/// The todo `agent` is running now, by its last turn header (`None`: not running a turn).
///
/// # Errors
/// [`Unavailable`].
pub async fn running_todo(js: &jetstream::Context, agent: &AgentName) -> Result<Option<String>, Unavailable> {
    let failed = unavailable("reading the agent's turn header");
    let stream = js.get_stream_no_info(RELAY_STREAM).await.map_err(|e| failed(e.to_string()))?;
    let message = match stream.direct_get_last_for_subject(agent_turn_subject(agent)).await {
        Ok(message) => message,
        Err(e) if e.kind() == jetstream::stream::DirectGetErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(e.to_string())),
    };
    let header: Option<TurnHeader> = serde_json::from_slice(&message.payload).ok();
    Ok(header.filter(|h| h.state == RelayState::Working).and_then(|h| h.todo_id))
}

/// Asks `agent` to end the turn of `todo_id`.
///
/// # Errors
/// [`Unavailable`].
pub async fn request(client: &async_nats::Client, agent: &AgentName, todo_id: &str) -> Result<(), Unavailable> {
    let body = serde_json::to_vec(&CancelRequest { todo_id: todo_id.to_owned() }).expect("a request serializes");
    let failed = unavailable("sending the cancel request");
    client.publish(agent_cancel_subject(agent), body.into()).await.map_err(|e| failed(e.to_string()))?;
    client.flush().await.map_err(|e| failed(e.to_string()))
}
