//! Who a request comes from, as its transport proves it: the user of the process at the other
//! end of the socket (the kernel's peer credentials) or the paired device a control-plane request
//! came through. Nothing the client writes decides it; `X-Set-By` only adds, in front, which
//! program of that user or device sent the request.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use warp::http::HeaderMap;

use hyperhive_swarm_api::roles::Role;

use super::ApiError;
use crate::config::SocketRoles;

/// The header naming the program that sends a request, in front of its [`Caller`].
const SET_BY_HEADER: &str = "x-set-by";
/// The program when the request does not name one.
const DEFAULT_SET_BY: &str = "api";
/// The longest `X-Set-By`.
const MAX_SET_BY: usize = 64;

/// The proven origin of one request, with the role it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A process on this machine, named by its user (`uid<n>` for a uid without a name).
    Local {
        /// The user's name.
        user: String,
        /// Its role, from `SWARM_SOCKET_ROLES`; `None` when it has none.
        role: Option<Role>,
    },
    /// A client paired through the control plane, named by its device id.
    Device {
        /// The device id.
        client: String,
        /// Its role, from its pairing code.
        role: Role,
    },
}

/// How long what is looked up for a uid (its name and groups) is used before it is looked up
/// again: a socket connection is one request, and the user database may be slow (NSS), so each
/// uid is asked about at most once in this long.
const USER_KEPT: Duration = Duration::from_secs(60);

/// A user as the user database names it.
#[derive(Debug, Clone)]
struct User {
    name: String,
    groups: Vec<String>,
}

/// Users looked up, by uid, with when.
static USERS: Mutex<BTreeMap<u32, (User, Instant)>> = Mutex::new(BTreeMap::new());

impl Caller {
    /// The socket peer running as `uid`, named from the user database (at most once a minute
    /// per uid; a lookup may block, so it runs on the blocking pool), its role from `roles`.
    pub async fn local(uid: u32, roles: &SocketRoles) -> Caller {
        let user = user(uid).await;
        let role = roles.role_of(uid, &user.groups);
        Caller::Local { user: user.name, role }
    }

    /// A paired client of the control plane with the role the control plane names (`None`: a
    /// client paired before codes carried roles, which keeps the admin it always was; re-pair
    /// it to narrow it).
    #[must_use]
    pub fn device(client: String, role: Option<Role>) -> Caller {
        Caller::Device { client, role: role.unwrap_or(Role::Admin) }
    }

    /// The caller's role, if it has one.
    #[must_use]
    pub fn role(&self) -> Option<Role> {
        match self {
            Caller::Local { role, .. } => *role,
            Caller::Device { role, .. } => Some(*role),
        }
    }

    /// Nothing when the caller's role is `needed` or above; else the 403 naming both.
    ///
    /// # Errors
    /// [`ApiError::Forbidden`].
    pub fn allows(&self, needed: Role, what: &str) -> Result<(), ApiError> {
        match self.role() {
            Some(role) if role >= needed => Ok(()),
            Some(role) => Err(ApiError::Forbidden(format!("{what} needs the {needed} role; {self} has {role}"))),
            // Only a socket user can have none.
            None => Err(ApiError::Forbidden(format!(
                "{what} needs the {needed} role; {self} has none (it is in none of the groups SWARM_SOCKET_ROLES names)"
            ))),
        }
    }
}

/// `uid`'s name and groups, from the cache or the user database.
async fn user(uid: u32) -> User {
    let kept = USERS.lock().unwrap_or_else(PoisonError::into_inner).get(&uid).cloned();
    if let Some((user, at)) = kept
        && at.elapsed() < USER_KEPT
    {
        return user;
    }
    let unnamed = move || User { name: format!("uid{uid}"), groups: Vec::new() };
    let user =
        tokio::task::spawn_blocking(move || look_up(uid).unwrap_or_else(unnamed)).await.unwrap_or_else(|_| unnamed());
    USERS.lock().unwrap_or_else(PoisonError::into_inner).insert(uid, (user.clone(), Instant::now()));
    user
}

/// `uid`'s name and the names of every group it is in (its primary one too), or `None` for a uid
/// the user database does not know.
fn look_up(uid: u32) -> Option<User> {
    use nix::unistd::{Group, User as Entry, getgrouplist};
    let entry = Entry::from_uid(uid.into()).ok().flatten()?;
    let name = std::ffi::CString::new(entry.name.clone()).ok()?;
    let gids = getgrouplist(&name, entry.gid).unwrap_or_else(|_| vec![entry.gid]);
    let groups = gids.into_iter().filter_map(|gid| Group::from_gid(gid).ok().flatten()).map(|g| g.name).collect();
    Some(User { name: entry.name, groups })
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caller::Local { user: name, .. } | Caller::Device { client: name, .. } => f.write_str(name),
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

    fn local(user: &str, role: Option<Role>) -> Caller {
        Caller::Local { user: user.into(), role }
    }

    #[tokio::test]
    async fn a_local_caller_is_named_by_its_user_or_its_uid() {
        let by_group = SocketRoles::ByGroup(vec![("nogroup".into(), Role::Viewer)]);
        assert_eq!(Caller::local(0, &by_group).await, local("root", Some(Role::Admin)), "root is admin");
        let me = nix::unistd::geteuid().as_raw();
        let no_groups = SocketRoles::ByGroup(Vec::new());
        assert_eq!(Caller::local(me, &no_groups).await.role(), Some(Role::Admin), "the controller's own user is admin");
        // `nobody` is in `nogroup` (its primary group) on every system the tests run on; a run as
        // `nobody` (as the build sandbox's check is rehearsed) has it as its own user, admin above.
        if me != 65534 {
            assert_eq!(Caller::local(65534, &by_group).await, local("nobody", Some(Role::Viewer)));
        }
        assert_eq!(Caller::local(65534, &SocketRoles::EveryoneAdmin).await, local("nobody", Some(Role::Admin)));
        // No user database names this uid (the highest a 32-bit uid can be but the invalid one).
        let unnamed = Caller::local(u32::MAX - 1, &by_group).await;
        assert_eq!(unnamed, local(&format!("uid{}", u32::MAX - 1), None));
        assert_eq!(Caller::device("d0123".into(), Some(Role::Viewer)).to_string(), "d0123");
        assert_eq!(Caller::device("d0123".into(), None).role(), Some(Role::Admin), "paired before roles");
    }

    #[test]
    fn a_user_has_the_highest_role_of_its_groups_listed() {
        let table = SocketRoles::ByGroup(vec![("ops".into(), Role::Operator), ("watchers".into(), Role::Viewer)]);
        let groups = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(table.role_of(1234, &groups(&["watchers", "ops", "users"])), Some(Role::Operator));
        assert_eq!(table.role_of(1234, &groups(&["watchers"])), Some(Role::Viewer));
        assert_eq!(table.role_of(1234, &groups(&["users"])), None);
        assert_eq!(table.role_of(0, &[]), Some(Role::Admin));
    }

    #[test]
    fn a_refusal_names_the_role_needed_and_the_one_held() {
        assert!(local("alice", Some(Role::Operator)).allows(Role::Operator, "x").is_ok());
        assert!(local("alice", Some(Role::Admin)).allows(Role::Viewer, "x").is_ok());
        let Err(ApiError::Forbidden(why)) =
            local("alice", Some(Role::Viewer)).allows(Role::Admin, "PUT /api/secrets/{var}")
        else {
            panic!("a viewer was let through")
        };
        assert_eq!(why, "PUT /api/secrets/{var} needs the admin role; alice has viewer");
        let Err(ApiError::Forbidden(why)) = local("bob", None).allows(Role::Viewer, "GET /api/agents") else {
            panic!("no role was let through")
        };
        assert!(why.contains("bob has none") && why.contains("SWARM_SOCKET_ROLES"), "{why}");
    }

    #[test]
    fn who_acts_is_the_program_at_the_proven_caller() {
        let device = Caller::device("d0123".into(), Some(Role::Operator));
        let mut headers = HeaderMap::new();
        assert_eq!(set_by(&headers, &device).unwrap(), "api@d0123");
        headers.insert(SET_BY_HEADER, "swarmctl".parse().unwrap());
        assert_eq!(set_by(&headers, &local("alice", None)).unwrap(), "swarmctl@alice");
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
