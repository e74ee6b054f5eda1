//! Who a request comes from, as its transport proves it: the user of the process at the other
//! end of the socket (the kernel's peer credentials) or the paired device a control-plane request
//! came through. Nothing the client writes decides it; `X-Set-By` only adds, in front, which
//! program of that user or device sent the request. The one exception is the hive-gateway's own
//! user (`SWARM_GATEWAY_USER`): its nginx names the SSO user it let in (`Remote-User`,
//! `Remote-Groups`, set from its `auth_request` and never from the browser), and on its
//! connections, and only there, that user is the caller.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use warp::http::HeaderMap;

use hyperhive_swarm_api::roles::Role;

use super::ApiError;
use super::routes::{self, RouteId};
use crate::config::{GatewayRoles, SocketRoles};

/// The header the gateway names its SSO user in.
const SSO_USER_HEADER: &str = "remote-user";
/// The header the gateway names the SSO user's groups in, comma-separated.
const SSO_GROUPS_HEADER: &str = "remote-groups";
/// The longest SSO user name taken.
const MAX_SSO_USER: usize = 64;

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
    /// A person the hive-gateway let in through SSO, named `sso:<user>`.
    Sso {
        /// The SSO user's name.
        user: String,
        /// Its role, the highest of its groups `SWARM_GATEWAY_ROLES` lists; `None` when it has
        /// none.
        role: Option<Role>,
    },
    /// A request of the gateway's own user naming no SSO user (or a malformed one): only the
    /// forge's webhook, which its signature authenticates, is served to it.
    Gateway {
        /// The gateway's unix user.
        user: String,
        /// Why no SSO user was taken.
        why: &'static str,
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

    /// A request on a connection of the gateway's user: the SSO user its `Remote-User` header
    /// names (1 to 64 of letters, digits and `._@+-`), with the highest role of the groups of
    /// `Remote-Groups` that `gateway` lists; without one, the gateway itself, which has no role.
    #[must_use]
    pub fn behind_gateway(gateway: &GatewayRoles, headers: &HeaderMap) -> Caller {
        let no_user = |why| Caller::Gateway { user: gateway.user.clone(), why };
        let mut users = headers.get_all(SSO_USER_HEADER).iter();
        let (Some(user), None) = (users.next(), users.next()) else {
            return no_user(if headers.contains_key(SSO_USER_HEADER) {
                "more than one Remote-User header"
            } else {
                "no Remote-User header"
            });
        };
        let bytes = user.as_bytes();
        let name_ok = !bytes.is_empty()
            && bytes.len() <= MAX_SSO_USER
            && bytes.iter().all(|b| b.is_ascii_alphanumeric() || b"._@+-".contains(b));
        if !name_ok {
            return no_user("a Remote-User header that is not a user name");
        }
        let groups: Vec<&str> = headers
            .get_all(SSO_GROUPS_HEADER)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .filter(|group| !group.is_empty())
            .collect();
        Caller::Sso { user: String::from_utf8_lossy(bytes).into_owned(), role: gateway.role_of(&groups) }
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
            Caller::Local { role, .. } | Caller::Sso { role, .. } => *role,
            Caller::Device { role, .. } => Some(*role),
            Caller::Gateway { .. } => None,
        }
    }

    /// Nothing when the caller may use `route` ([`routes::needed`]); else the refusal. The
    /// gateway without an SSO user may use only the routes it passes without SSO
    /// ([`routes::open_at_gateway`]), whatever they need of others.
    ///
    /// # Errors
    /// [`ApiError::Unauthorized`] for the gateway without an SSO user, else as [`Caller::allows`].
    pub fn may(&self, route: RouteId, what: &str) -> Result<(), ApiError> {
        match self {
            Caller::Gateway { .. } if routes::open_at_gateway(route) => Ok(()),
            Caller::Gateway { user, why } => Err(ApiError::Unauthorized(format!(
                "{what} came through the gateway ({user}) with {why}: sign in through the gateway's SSO, which \
                 names its user to the controller"
            ))),
            _ => self.allows(routes::needed(route), what),
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
            None => {
                let table =
                    if matches!(self, Caller::Sso { .. }) { "SWARM_GATEWAY_ROLES" } else { "SWARM_SOCKET_ROLES" };
                Err(ApiError::Forbidden(format!(
                    "{what} needs the {needed} role; {self} has none (it is in none of the groups {table} names)"
                )))
            }
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
            Caller::Local { user: name, .. }
            | Caller::Gateway { user: name, .. }
            | Caller::Device { client: name, .. } => f.write_str(name),
            Caller::Sso { user, .. } => write!(f, "sso:{user}"),
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

    fn gateway() -> GatewayRoles {
        GatewayRoles {
            uid: 990,
            user: "nginx".into(),
            roles: vec![
                ("watchers".into(), Role::Viewer),
                ("ops".into(), Role::Operator),
                ("admins".into(), Role::Admin),
            ],
        }
    }

    fn sso_headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn behind_the_gateway_the_sso_user_has_the_highest_role_of_its_mapped_groups() {
        let caller = |pairs: &[(&'static str, &str)]| Caller::behind_gateway(&gateway(), &sso_headers(pairs));
        let ops = caller(&[("Remote-User", "alice"), ("Remote-Groups", "users, watchers,ops")]);
        assert_eq!(ops, Caller::Sso { user: "alice".into(), role: Some(Role::Operator) });
        assert_eq!(ops.to_string(), "sso:alice");
        assert_eq!(
            caller(&[("Remote-User", "bob@example.org"), ("Remote-Groups", "admins")]).role(),
            Some(Role::Admin)
        );
        // Two headers of groups are one list.
        let two = caller(&[("Remote-User", "c"), ("Remote-Groups", "users"), ("Remote-Groups", "watchers")]);
        assert_eq!(two.role(), Some(Role::Viewer));
        let nobody = caller(&[("Remote-User", "eve"), ("Remote-Groups", "users,opsx,Admins")]);
        assert_eq!(nobody, Caller::Sso { user: "eve".into(), role: None });
        let Err(ApiError::Forbidden(why)) = nobody.may(RouteId::ListAgents, "GET /api/agents") else {
            panic!("a user in no mapped group was let through")
        };
        assert_eq!(
            why,
            "GET /api/agents needs the viewer role; sso:eve has none (it is in none of the groups SWARM_GATEWAY_ROLES names)"
        );
        assert_eq!(caller(&[("Remote-User", "eve")]).role(), None, "no groups header: no role");
    }

    #[test]
    fn the_gateway_naming_no_valid_sso_user_may_only_deliver_webhooks() {
        let cases: [(&[(&'static str, &str)], &str); 4] = [
            (&[], "no Remote-User header"),
            (&[("Remote-Groups", "admins")], "no Remote-User header"),
            (&[("Remote-User", "a"), ("Remote-User", "b"), ("Remote-Groups", "admins")], "more than one Remote-User"),
            (&[("Remote-User", "alice bob"), ("Remote-Groups", "admins")], "not a user name"),
        ];
        for (pairs, needle) in cases {
            let caller = Caller::behind_gateway(&gateway(), &sso_headers(pairs));
            assert!(matches!(caller, Caller::Gateway { .. }), "{pairs:?}: {caller:?}");
            assert_eq!((caller.to_string(), caller.role()), ("nginx".to_owned(), None));
            assert!(caller.may(RouteId::ForgeWebhook, "POST /api/forge/webhook").is_ok(), "the forge's webhook");
            let Err(ApiError::Unauthorized(why)) = caller.may(RouteId::ListAgents, "GET /api/agents") else {
                panic!("{pairs:?}: the gateway without an SSO user was let through")
            };
            assert!(why.contains(needle) && why.contains("sign in through the gateway's SSO"), "{why}");
        }
        let long = "a".repeat(MAX_SSO_USER + 1);
        assert!(matches!(
            Caller::behind_gateway(&gateway(), &sso_headers(&[("Remote-User", &long)])),
            Caller::Gateway { .. }
        ));
    }

    #[test]
    fn who_acts_is_the_program_at_the_proven_caller() {
        let device = Caller::device("d0123".into(), Some(Role::Operator));
        let mut headers = HeaderMap::new();
        assert_eq!(set_by(&headers, &device).unwrap(), "api@d0123");
        headers.insert(SET_BY_HEADER, "swarmctl".parse().unwrap());
        assert_eq!(set_by(&headers, &local("alice", None)).unwrap(), "swarmctl@alice");
        let sso = Caller::Sso { user: "alice".into(), role: Some(Role::Operator) };
        assert_eq!(set_by(&headers, &sso).unwrap(), "swarmctl@sso:alice");
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
