//! What a failed swarmctl command says, whichever way its request went (the socket or the
//! control plane).

use std::io;
use std::path::PathBuf;

use hyper::http::StatusCode;
use hyperhive_swarm_api::schedules::ScheduleView;

/// A failed swarmctl command; the message is what the user sees.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// Nothing listens at the socket.
    #[error(
        "swarm-controller is not running at {} (set --socket or SWARM_CONTROLLER_SOCKET)",
        .0.display()
    )]
    NotRunning(PathBuf),
    /// The socket exists but cannot be used (permissions...).
    #[error("cannot reach swarm-controller at {}: {}", .0.display(), .1)]
    Unreachable(PathBuf, io::Error),
    /// The control plane or the controller behind it could not be reached or did not answer.
    #[error("{0}")]
    Remote(String),
    /// The API said no.
    #[error("{message}")]
    Api {
        /// The HTTP status.
        status: StatusCode,
        /// The API's error message.
        message: String,
        /// On a conflict: the schedule as it is now.
        current: Option<Box<ScheduleView>>,
    },
    /// The conversation itself failed.
    #[error("talking to swarm-controller: {0}")]
    Protocol(String),
    /// A turn `prompt --wait` waited for did not succeed: swarmctl exits with `code`.
    #[error("{message}")]
    TurnFailed {
        /// The exit code (the turn's own, or what its end maps to).
        code: u8,
        /// What happened.
        message: String,
    },
    /// `doctor` found a problem: swarmctl prints the report on standard output and exits 1.
    #[error("{problems} check(s) found a problem")]
    Unhealthy {
        /// The whole report, as it is printed.
        report: String,
        /// How many checks failed.
        problems: usize,
    },
    /// Bad command-line input the parser could not catch.
    #[error("{0}")]
    Usage(String),
}
