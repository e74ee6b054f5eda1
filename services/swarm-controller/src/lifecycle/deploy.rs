//! Sending a deploy message to a hive: its payload sealed to the hive's xkey from the directory
//! and signed with the controller's deploy key (which the hive pins), published on `deploy.<hive>` with a message id per (agent, kind, revision), so a second send
//! of the same message within the stream's duplicate window is absorbed by JetStream.

use async_nats::HeaderMap;
use async_nats::jetstream;
use hyperhive_hive_proto::deploy::{self, MSG_ID_HEADER, Payload};
use hyperhive_hive_proto::directory::HiveDirectory;
use hyperhive_hive_proto::signing::DeploySigner;
use hyperhive_nats_objects::deploy_subject;

/// What JetStream said about a sent message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Its sequence in `DEPLOY` (of the first copy, for a duplicate).
    pub sequence: u64,
    /// Whether it was dropped as a duplicate of one sent before.
    pub duplicate: bool,
}

/// Why nothing was sent. No variant carries a secret.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The hive is not in the directory.
    #[error("no hive {0} in the hive directory (SWARM_HIVES_FILE)")]
    UnknownHive(String),
    /// The hive has no xkey to seal to.
    #[error(
        "hive {0} has no xkey in the hive directory, so nothing can be sealed to it; add its public \
         key (from `hive-c0re keygen`) to SWARM_HIVES_FILE"
    )]
    NoXkey(String),
    /// The payload is one the hive would refuse.
    #[error(transparent)]
    Payload(#[from] deploy::DeployError),
    /// JetStream did not take it.
    #[error("publishing to {subject}: {reason}")]
    Publish {
        /// `deploy.<hive>`.
        subject: String,
        /// Why.
        reason: String,
    },
}

/// Seals `payload` to its hive, signs it with `signer` and publishes it, waiting for JetStream's
/// ack.
///
/// # Errors
/// [`SendError`]; nothing is published unless the error is [`SendError::Publish`].
pub async fn send(
    js: &jetstream::Context,
    directory: &HiveDirectory,
    signer: &DeploySigner,
    payload: &Payload,
) -> Result<Sent, SendError> {
    let hive = &payload.hive;
    let entry = directory.get(hive).ok_or_else(|| SendError::UnknownHive(hive.to_string()))?;
    let xkey = entry.xkey.as_deref().ok_or_else(|| SendError::NoXkey(hive.to_string()))?;
    let envelope = deploy::seal(payload, xkey, signer)?;
    let subject = deploy_subject(hive);
    let publish_error = |reason: String| SendError::Publish { subject: subject.clone(), reason };
    let bytes = serde_json::to_vec(&envelope).map_err(|e| publish_error(e.to_string()))?;
    let mut headers = HeaderMap::new();
    headers.insert(MSG_ID_HEADER, envelope.msg_id().as_str());
    let ack = js
        .publish_with_headers(subject.clone(), headers, bytes.into())
        .await
        .map_err(|e| publish_error(e.to_string()))?
        .await
        .map_err(|e| publish_error(e.to_string()))?;
    tracing::info!(%hive, agent = %payload.agent, kind = payload.kind.as_str(), revision = payload.revision,
        duplicate = ack.duplicate, "deploy message sent");
    Ok(Sent { sequence: ack.sequence, duplicate: ack.duplicate })
}
