//! The documents and messages the swarm's hive side is built from, shared by swarm-controller,
//! hive-c0re and hive-agent so that the three can never disagree on a field (see
//! docs/swarm/hives.md).
//!
//! # Layout
//! - [`directory`]: the hive directory (`SWARM_HIVES_FILE`): each hive's description, labels and
//!   public xkey.
//! - [`wanted`]: wanted state, KV `agent-wanted`, key `<hive>.<agent>`, written by the controller.
//! - [`status`]: hive status, KV `hive-status`, key `<hive>`, written by that hive's hive-c0re.
//! - [`roster`]: the roster, KV `agents`, key `<agent>`: public facts only, never a secret.
//! - [`labels`]: an agent's labels (on its roster entry) and their rules.
//! - [`spec`]: how a hive runs an agent (declared in the host's configuration or deployed).
//! - [`deploy`]: deploy messages on `deploy.<hive>`, their secrets sealed to the hive's xkey.
//! - [`signing`]: the controller's deploy key that signs them and the keys a hive pins.
//! - [`env_secrets`]: an agent's secret environment variables: names, values, its env file.
//! - [`agent_files`]: the two files between hive-c0re and a running hive-agent (pause, turn).
//! - [`feed`]: the turn header hive-agent publishes on `turn.<agent>` for its watchers.
//! - [`turns`]: the record of each finished turn, on `turns.<agent>` in `TURNS`.

pub mod agent_files;
pub mod deploy;
pub mod directory;
pub mod env_secrets;
pub mod feed;
pub mod labels;
pub mod roster;
pub mod signing;
pub mod spec;
pub mod status;
pub mod turns;
pub mod wanted;

pub use hyperhive_schedule::{AgentName, HiveName};
