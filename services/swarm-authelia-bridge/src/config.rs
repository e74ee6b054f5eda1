//! Settings, from flags or the environment (the NixOS module sets the environment), all checked
//! at start: a bad one stops the service with one line naming it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

use crate::input;
use crate::token::BearerToken;

/// The default listen address: loopback only. The controller reaches it through a TLS proxy or
/// runs on the same host.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9092";
/// The default managed group.
pub const DEFAULT_MANAGED_GROUP: &str = "hyperhive-agents";

/// Manages the swarm's agent users in Authelia's file user database.
#[derive(Debug, Clone, Parser)]
#[command(version, about)]
pub struct Settings {
    /// Address to listen on (plain HTTP).
    #[arg(long, env = "AUTHELIA_BRIDGE_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// Authelia's users file (`authentication_backend.file.path`); created by the first write
    /// when missing.
    #[arg(long, env = "AUTHELIA_BRIDGE_USERS_FILE")]
    pub users_file: PathBuf,
    /// File holding the bearer token (not readable by every user).
    #[arg(long, env = "AUTHELIA_BRIDGE_TOKEN_FILE")]
    pub token_file: PathBuf,
    /// The group that marks the users this service made; only those are changed or deleted.
    #[arg(long, env = "AUTHELIA_BRIDGE_MANAGED_GROUP", default_value = DEFAULT_MANAGED_GROUP)]
    pub managed_group: String,
}

/// The checked settings.
#[derive(Debug)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The users file.
    pub users_file: PathBuf,
    /// The token.
    pub token: BearerToken,
    /// The managed group.
    pub managed_group: String,
}

impl Config {
    /// Checks every setting and reads the token.
    ///
    /// # Errors
    /// One line per bad setting, naming its variable and how to fix it.
    pub fn from_settings(settings: Settings) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let listen = settings
            .listen
            .parse::<SocketAddr>()
            .map_err(|_| {
                problems.push(format!(
                    "AUTHELIA_BRIDGE_LISTEN {:?} is not an address: write it as IP:PORT, e.g. {DEFAULT_LISTEN}",
                    settings.listen
                ))
            })
            .ok();
        if !settings.users_file.is_absolute() {
            problems.push(format!(
                "AUTHELIA_BRIDGE_USERS_FILE {:?} must be an absolute path (Authelia's authentication_backend.file.path)",
                settings.users_file.display()
            ));
        } else if settings.users_file.is_dir() {
            problems.push(format!(
                "AUTHELIA_BRIDGE_USERS_FILE {} is a directory; give the users file itself",
                settings.users_file.display()
            ));
        } else if !settings.users_file.parent().is_some_and(std::path::Path::is_dir) {
            problems.push(format!(
                "AUTHELIA_BRIDGE_USERS_FILE {}: its directory does not exist; create it (the file itself may be missing)",
                settings.users_file.display()
            ));
        }
        let token = BearerToken::from_file(&settings.token_file)
            .map_err(|e| problems.push(format!("AUTHELIA_BRIDGE_TOKEN_FILE: {e}")))
            .ok();
        if let Err(e) = input::group(&settings.managed_group) {
            problems.push(format!("AUTHELIA_BRIDGE_MANAGED_GROUP: {e}"));
        }
        match (listen, token) {
            (Some(listen), Some(token)) if problems.is_empty() => {
                Ok(Self { listen, users_file: settings.users_file, token, managed_group: settings.managed_group })
            }
            _ => Err(problems),
        }
    }
}
