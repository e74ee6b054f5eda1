//! Who a request comes from, as its transport proves it: the user of the process at the other
//! end of the socket (the kernel's peer credentials) or the paired device a control-plane request
//! came through. Nothing the client writes decides it; `X-Set-By` only adds, in front, which
//! program of that user or device sent the request.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use warp::http::HeaderMap;

use super::ApiError;

/// The header naming the program that sends a request, in front of its [`Caller`].
const SET_BY_HEADER: &str = "x-set-by";
/// The program when the request does not name one.
const DEFAULT_SET_BY: &str = "api";
/// The longest `X-Set-By`.
const MAX_SET_BY: usize = 64;

/// The proven origin of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A process on this machine, named by its user (`uid<n>` for a uid without a name).
    Local(String),
    /// A client paired through the control plane, named by its device id.
    Device(String),
}

/// How long a user name looked up for a uid is used before it is looked up again: a socket
/// connection is one request, and the user database may be slow (NSS), so each uid is asked
/// about at most once in this long.
const NAME_KEPT: Duration = Duration::from_secs(60);

/// Names looked up, by uid, with when.
static NAMES: Mutex<BTreeMap<u32, (String, Instant)>> = Mutex::new(BTreeMap::new());

impl Caller {
    /// The socket peer running as `uid`, named from the user database (at most once a minute
    /// per uid; a lookup may block, so it runs on the blocking pool).
    pub async fn local(uid: u32) -> Caller {
        let kept = NAMES.lock().unwrap_or_else(PoisonError::into_inner).get(&uid).cloned();
        if let Some((name, at)) = kept
            && at.elapsed() < NAME_KEPT
        {
            return Caller::Local(name);
        }
        let looked_up = tokio::task::spawn_blocking(move || {
            let user = nix::unistd::User::from_uid(uid.into()).ok().flatten();
            user.map_or_else(|| format!("uid{uid}"), |u| u.name)
        });
        let name = looked_up.await.unwrap_or_else(|_| format!("uid{uid}"));
        NAMES.lock().unwrap_or_else(PoisonError::into_inner).insert(uid, (name.clone(), Instant::now()));
        Caller::Local(name)
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caller::Local(name) | Caller::Device(name) => f.write_str(name),
        }
    }
}

/// Who acts, as stored (a wanted state's `set_by`, a prompt's `operator:` source):
/// `<program>@<caller>`, the program from `X-Set-By` (1 to 64 printable ASCII characters; `api`
/// when absent), the caller as its transport proved it.
pub(super) fn set_by(headers: &HeaderMap, caller: &Caller) -> Result<String, ApiError> {
    let Some(value) = headers.get(SET_BY_HEADER) else {
        return Ok(format!("{DEFAULT_SET_BY}@{caller}"));
    };
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_SET_BY || !bytes.iter().all(|b| (0x20..=0x7e).contains(b)) {
        return Err(ApiError::BadRequest(format!(
            "X-Set-By must be 1 to {MAX_SET_BY} printable ASCII characters naming the program that sends \
             the request, e.g. X-Set-By: swarmctl"
        )));
    }
    Ok(format!("{}@{caller}", String::from_utf8_lossy(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_local_caller_is_named_by_its_user_or_its_uid() {
        assert_eq!(Caller::local(0).await, Caller::Local("root".into()));
        // No user database names this uid (the highest a 32-bit uid can be but the invalid one).
        assert_eq!(Caller::local(u32::MAX - 1).await, Caller::Local(format!("uid{}", u32::MAX - 1)));
        assert_eq!(Caller::Device("d0123".into()).to_string(), "d0123");
    }

    #[test]
    fn who_acts_is_the_program_at_the_proven_caller() {
        let device = Caller::Device("d0123".into());
        let mut headers = HeaderMap::new();
        assert_eq!(set_by(&headers, &device).unwrap(), "api@d0123");
        headers.insert(SET_BY_HEADER, "swarmctl".parse().unwrap());
        assert_eq!(set_by(&headers, &Caller::Local("alice".into())).unwrap(), "swarmctl@alice");
        // A program name cannot pass for another caller: whatever it says, the proven one follows.
        headers.insert(SET_BY_HEADER, "swarmctl@root".parse().unwrap());
        assert_eq!(set_by(&headers, &device).unwrap(), "swarmctl@root@d0123");
        for bad in ["x".repeat(MAX_SET_BY + 1), String::new(), "tab\there".into()] {
            headers.insert(SET_BY_HEADER, bad.parse().unwrap());
            let Err(ApiError::BadRequest(why)) = set_by(&headers, &device) else { panic!("{bad:?} was taken") };
            assert!(why.contains("X-Set-By must be"), "{bad:?}: {why}");
        }
    }
}
