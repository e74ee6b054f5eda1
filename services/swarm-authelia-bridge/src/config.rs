//! Settings, from flags or the environment (the NixOS module sets the environment), all checked
//! at start: a bad one stops the service with one line naming it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use hyperhive_daemon::settings::{Check, Loaded, Problem, Problems};

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
    /// when missing. Required.
    #[arg(long, env = "AUTHELIA_BRIDGE_USERS_FILE", value_name = "FILE")]
    pub users_file: Option<PathBuf>,
    /// File holding the bearer token (not readable by every user). Required.
    #[arg(long, env = "AUTHELIA_BRIDGE_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
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
    pub fn from_settings(settings: Settings) -> Result<Loaded<Self>, Problems> {
        const LISTEN: &str = "AUTHELIA_BRIDGE_LISTEN";
        const USERS_FILE: &str = "AUTHELIA_BRIDGE_USERS_FILE";
        const TOKEN_FILE: &str = "AUTHELIA_BRIDGE_TOKEN_FILE";
        const MANAGED_GROUP: &str = "AUTHELIA_BRIDGE_MANAGED_GROUP";
        let mut check = Check::default();
        let listen = settings
            .listen
            .parse::<SocketAddr>()
            .map_err(|_| {
                check.problem(Problem::line(
                    LISTEN,
                    format!(
                        "{LISTEN} {:?} is not an address: write it as IP:PORT, e.g. {DEFAULT_LISTEN}",
                        settings.listen
                    ),
                ))
            })
            .ok();
        let users_file = match settings.users_file {
            None => {
                check.report(USERS_FILE, "not set; set it to Authelia's users file (authentication_backend.file.path)");
                None
            }
            Some(path) if !path.is_absolute() => {
                check.problem(Problem::line(
                    USERS_FILE,
                    format!(
                        "{USERS_FILE} {:?} must be an absolute path (Authelia's authentication_backend.file.path)",
                        path.display()
                    ),
                ));
                None
            }
            Some(path) if path.is_dir() => {
                check.problem(Problem::line(
                    USERS_FILE,
                    format!("{USERS_FILE} {} is a directory; give the users file itself", path.display()),
                ));
                None
            }
            Some(path) if !path.parent().is_some_and(std::path::Path::is_dir) => {
                check.problem(Problem::line(
                    USERS_FILE,
                    format!(
                        "{USERS_FILE} {}: its directory does not exist; create it (the file itself may be missing)",
                        path.display()
                    ),
                ));
                None
            }
            Some(path) => Some(path),
        };
        let token = match settings.token_file {
            None => {
                check.report(TOKEN_FILE, "not set; set it to the file holding the bearer token");
                None
            }
            Some(path) => check.ok(BearerToken::from_file(&path).map_err(|e| Problem::new(TOKEN_FILE, e))),
        };
        if let Err(e) = input::group(&settings.managed_group) {
            check.report(MANAGED_GROUP, e);
        }
        check.finish(|| {
            Some(Self {
                listen: listen?,
                users_file: users_file?,
                token: token?,
                managed_group: settings.managed_group,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_setting_is_reported_together() {
        let settings = Settings {
            listen: "localhost".into(),
            users_file: None,
            token_file: Some("/nonexistent/token".into()),
            managed_group: "bad group".into(),
        };
        let problems = Config::from_settings(settings).unwrap_err();
        let variables: Vec<&str> = problems.iter().map(Problem::variable).collect();
        assert_eq!(
            variables,
            [
                "AUTHELIA_BRIDGE_LISTEN",
                "AUTHELIA_BRIDGE_USERS_FILE",
                "AUTHELIA_BRIDGE_TOKEN_FILE",
                "AUTHELIA_BRIDGE_MANAGED_GROUP"
            ],
            "{problems}"
        );
        assert!(problems.to_string().contains("AUTHELIA_BRIDGE_USERS_FILE: not set"), "{problems}");
    }
}
