//! What the swarm UI needs besides the API it drives: its own files (embedded in the binary,
//! served at `/`), agent icons and the configured quick links (docs/swarm/ui.md).

pub mod assets;
pub mod icons;
pub mod quick_links;
