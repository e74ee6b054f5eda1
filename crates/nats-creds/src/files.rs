//! File names `init` writes inside its `--out` directory.

/// Operator seed (0600): signs account JWTs, so every new agent or hive needs it; keep the
/// directory offline.
pub const OPERATOR_SEED: &str = "operator.seed";
/// Operator JWT.
pub const OPERATOR_JWT: &str = "operator.jwt";
/// Swarm account seed (0600): signs the controller's credential.
pub const SWARM_SEED: &str = "swarm.seed";
/// Swarm account JWT (exports, JetStream limits).
pub const SWARM_JWT: &str = "swarm.jwt";
/// System account seed (0600).
pub const SYSTEM_SEED: &str = "system.seed";
/// System account JWT.
pub const SYSTEM_JWT: &str = "system.jwt";
/// An account with no users and no JetStream: tenants import `$JS.API.INFO` from it (see
/// [`crate::permissions::JS_INFO`]).
pub const NO_JETSTREAM_JWT: &str = "no-jetstream.jwt";
/// The `nats-server` config fragment to `include`; rewritten when a tenant account is added
/// or changed.
pub const SERVER_CONF: &str = "nats-server.conf";
/// A whole `nats.conf` for one node of a three-node cluster, to copy to each node with its
/// `server_name` and the routes filled in; it includes [`SERVER_CONF`], so every node has the
/// same operator and accounts.
pub const CLUSTER_NODE_EXAMPLE: &str = "cluster-node.conf.example";
/// The path of the full resolver's directory on the NATS host, as given to `init` (one line).
/// An older `init` (memory resolver) did not write it: the next mint or revocation writes
/// `DEFAULT_RESOLVER_DIR` and rewrites the fragment for the full resolver. Write
/// another absolute path here before, to choose it.
pub const RESOLVER_DIR: &str = "resolver-dir";
/// The controller's own credential (0600), unrestricted inside the swarm account.
pub const CONTROLLER_CREDS: &str = "controller.creds";
/// A user of the system account (0600): the controller sends new and updated account JWTs
/// (an agent created at run time, a revocation) to the running server with it. An older `init` did not write it;
/// `system_creds` makes it from `system.seed` on first need.
pub const SYSTEM_CREDS: &str = "system.creds";
/// Tenant accounts: `agent-<name>.seed` (0600) and `.jwt`, `hive-<name>.seed` and `.jwt`.
pub const ACCOUNTS_DIR: &str = "accounts";
/// What an older `nats init` wrote, whose agent credentials shared the swarm account.
pub const LEGACY_ACCOUNT_SEED: &str = "account.seed";
