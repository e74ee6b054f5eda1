//! An agent's life on its hive: the hive directory's statuses ([`hives`]), the roster
//! ([`roster`], with its entries in memory: [`roster_index`]), wanted state ([`wanted`]) and the rules of changing it ([`state_change`]),
//! deploy messages to a hive ([`deploy`]) signed with the controller's deploy key
//! ([`deploy_key`]), revoking a destroyed agent's credentials
//! ([`revoke`]) and the periodic pass that repairs the roster and retries revocations
//! ([`hive_pass`]), with every tenant's durable consumers ([`tenant_consumers`]).

pub mod deploy;
pub mod deploy_key;
pub mod hive_pass;
pub mod hives;
pub mod revoke;
pub mod roster;
pub mod roster_index;
pub mod state_change;
pub mod tenant_consumers;
pub mod wanted;
