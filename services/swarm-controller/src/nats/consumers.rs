//! The tenants' durable consumers, which the controller makes because no tenant may: a tenant
//! able to create its own consumer could remake it as a push consumer delivering into the swarm
//! account. Each agent's `agent-<agent>` on `TODO` and each hive's `hive-<hive>` on
//! `KV_agent-wanted` and `DEPLOY` are made with the one configuration of
//! `hyperhive_nats_objects::consumers` (a wrong one replaced, a right one made by a tenant under
//! an older build adopted), one tenant at a time here: when an agent's credential is minted or
//! renewed (agent creation through the API, renewals; see `provision/keys.rs`), and when the
//! roster takes a new agent from its hive's status (`lifecycle/roster.rs`). The periodic pass over
//! every tenant is `lifecycle/tenant_consumers.rs`.

use async_nats::jetstream;
use hyperhive_nats_creds::{AgentName, HiveName};
use hyperhive_nats_objects::{Ensured, SetupError, agent_consumer, hive_consumers};

/// Makes `agent`'s todo consumer as the swarm configures it.
///
/// # Errors
/// [`SetupError`] naming the consumer.
pub async fn ensure_agent(js: &jetstream::Context, agent: &AgentName) -> Result<Ensured, SetupError> {
    agent_consumer(agent).ensure(js).await
}

/// Makes both of `hive`'s consumers as the swarm configures them.
///
/// # Errors
/// [`SetupError`] naming the first consumer that could not be made.
pub async fn ensure_hive(js: &jetstream::Context, hive: &HiveName) -> Result<(), SetupError> {
    for consumer in hive_consumers(hive) {
        consumer.ensure(js).await?;
    }
    Ok(())
}
