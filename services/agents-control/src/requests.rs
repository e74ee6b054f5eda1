//! Requests a client makes over its link (`request` frames): make a code, list devices, forget
//! a device. Each is answered by `reply` or `request_failed` with the request's id, a long
//! device list by as many `reply` pages as it takes (`docs/control-plane/link-protocol.md`,
//! "Requests"). Each needs a least role of the client ([`needed`]): a viewer's link must not
//! admit devices or cut them off.
//!
//! While the store is unreachable, making codes and forgetting are refused with `retry: true`
//! (nothing the user asks for is half done or done only in one copy's memory);
//! listing answers from this copy's in-memory registry and says so.

use crate::clock::Clock;
use crate::codes::{self, CodeRequest, NotMade};
use crate::config::MAX_CODE_TTL;
use crate::control::Control;
use crate::records::{self, DeviceRecord};
use crate::registry::{self, RegistryError};
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::{DeviceInfo, LinkFrame, Reply, Request, devices_replies};
use hyperhive_control_proto::role::Role;
use hyperhive_object_store::StoreError;
use std::time::Duration;
use time::OffsetDateTime;

/// Why a request was refused: the `request_failed` frame's text and whether a retry can help.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refused {
    error: String,
    retry: bool,
}

impl Refused {
    /// The request itself is wrong or not allowed: asking again the same way cannot help.
    fn wrong(error: impl Into<String>) -> Refused {
        Refused { error: error.into(), retry: false }
    }

    /// The store did not do it; `not_done` says what the client is left with.
    fn store(not_done: &str, error: &StoreError) -> Refused {
        let detail = match error {
            StoreError::Unavailable { detail } => detail.clone(),
            other => other.to_string(),
        };
        Refused { error: format!("store unavailable ({detail}): {not_done}; try again when it answers"), retry: true }
    }
}

/// Answers one request from the device `device_id` of kind `kind` and role `role`: the frames to
/// send, in order.
pub async fn answer(
    control: &Control,
    kind: DeviceKind,
    device_id: &str,
    role: Option<Role>,
    id: u64,
    request: Request,
) -> Vec<LinkFrame> {
    let op = op_name(&request);
    // A client paired before codes carried a role was an administrator then, and stays one.
    let role = role.unwrap_or(Role::Admin);
    let outcome = if kind == DeviceKind::Host {
        Err(Refused::wrong("hosts may not make requests; use a client"))
    } else if let Err(refused) = allowed(&request, role, device_id) {
        Err(refused)
    } else {
        match request {
            Request::MakeCode { kind, name, ttl_secs } => {
                // A client's code gives its device the asker's own role: never more.
                let role = (kind == DeviceKind::Client).then_some(role);
                make_code(control, device_id, kind, name, role, ttl_secs).await
            }
            Request::ListDevices => Ok(list_devices(control).await),
            Request::ForgetDevice { device_id: target } => forget_device(control, &target).await,
            _ => Err(Refused::wrong(format!("\"{op}\" is not served by this version of agents-control"))),
        }
    };
    // Never the reply itself: a code's token is a bearer secret.
    match outcome {
        Ok(reply) => {
            tracing::info!(device = %device_id, id, op, "answered a request");
            match reply {
                Reply::Devices { devices, from_memory, .. } => devices_replies(id, &devices, from_memory),
                reply => vec![LinkFrame::Reply { id, reply }],
            }
        }
        Err(Refused { error, retry }) => {
            tracing::info!(device = %device_id, id, op, retry, %error, "refused a request");
            vec![LinkFrame::RequestFailed { id, error, retry }]
        }
    }
}

/// The least role a request needs: seeing the devices is reading (viewer); admitting new
/// devices gives agents work to more hands (operator); cutting any device off is
/// administration (admin).
pub fn needed(request: &Request) -> Role {
    match request {
        Request::ListDevices => Role::Viewer,
        Request::MakeCode { .. } => Role::Operator,
        Request::ForgetDevice { .. } => Role::Admin,
        // An op this build does not serve is refused after this check, whatever the role.
        _ => Role::Viewer,
    }
}

/// Nothing when `role` may make the request; else the refusal naming the role needed and the
/// role held (worded as the swarm controller words its 403s).
fn allowed(request: &Request, role: Role, device_id: &str) -> Result<(), Refused> {
    let needed = needed(request);
    if role >= needed {
        return Ok(());
    }
    Err(Refused::wrong(format!("{} needs the {needed} role; client {device_id} has {role}", op_name(request))))
}

fn op_name(request: &Request) -> &'static str {
    match request {
        Request::MakeCode { .. } => "make_code",
        Request::ListDevices => "list_devices",
        Request::ForgetDevice { .. } => "forget_device",
        _ => "unknown",
    }
}

/// The checks `agents-control code` makes on `--name` and `--ttl`, for the request's fields.
fn check_code_request(name: Option<&str>, ttl_secs: Option<u64>) -> Result<Duration, Refused> {
    if let Some(name) = name {
        hyperhive_control_proto::pair::validate_name(name).map_err(|e| Refused::wrong(format!("name {e}")))?;
    }
    let Some(secs) = ttl_secs else {
        return Ok(codes::DEFAULT_TTL);
    };
    let max = MAX_CODE_TTL.as_secs();
    match secs {
        0 => Err(Refused::wrong("ttl_secs must be more than zero")),
        secs if secs > max => Err(Refused::wrong(format!("ttl_secs {secs} is longer than the maximum, {max} (24h)"))),
        secs => Ok(Duration::from_secs(secs)),
    }
}

/// `make_code` reads the clock once; handing it one instant makes the reply's `expires_at`
/// exactly the stored record's.
#[derive(Debug)]
struct At(OffsetDateTime);

impl Clock for At {
    fn now(&self) -> OffsetDateTime {
        self.0
    }
}

async fn make_code(
    control: &Control,
    asked_by: &str,
    kind: DeviceKind,
    name: Option<String>,
    role: Option<Role>,
    ttl_secs: Option<u64>,
) -> Result<Reply, Refused> {
    let ttl = check_code_request(name.as_deref(), ttl_secs)?;
    let issuer = control.issuer.as_ref().ok_or_else(|| {
        Refused::wrong(
            "this copy was started without its public address (AGENTS_CONTROL_URL), which every code carries, \
             so it makes no codes: set AGENTS_CONTROL_URL on every copy, or use `agents-control code`",
        )
    })?;
    let now = control.clock.now();
    let request = CodeRequest { kind, name, role, ttl, made_by: asked_by.to_owned() };
    let max = control.guards.limits.max_codes_per_client;
    let paired = |id: &str| control.registry.holds(id);
    let code = match control.codes.make_bounded(control.store.as_ref(), &At(now), issuer, &request, max, paired).await {
        Ok(code) => code,
        Err(NotMade::Store(error)) => return Err(Refused::store("no code was made", &error)),
        Err(too_many @ NotMade::TooMany(_)) => {
            control.metrics.codes_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(Refused::wrong(too_many.to_string()));
        }
    };
    Ok(Reply::Code { code: code.to_token(), expires_at: records::timestamp(now + ttl) })
}

/// From the store when it answers, else from this copy's memory (`from_memory: true`); as one
/// reply here, cut into pages by [`answer`].
async fn list_devices(control: &Control) -> Reply {
    let (records, from_memory) = match registry::load_all(control.store.as_ref()).await {
        Ok(all) => (all.into_values().filter(|d| d.forgotten_at.is_none()).collect(), false),
        Err(error) => {
            tracing::warn!(%error, "listing devices from memory: the store did not answer");
            let mut known = control.registry.active_of_kind(DeviceKind::Client);
            known.extend(control.registry.active_of_kind(DeviceKind::Host));
            (known, true)
        }
    };
    Reply::Devices { devices: device_infos(control, records), from_memory, more: false }
}

/// Oldest pairing first, each with its online state on any copy.
fn device_infos(control: &Control, mut records: Vec<DeviceRecord>) -> Vec<DeviceInfo> {
    records.sort_by(|a, b| a.paired_at.cmp(&b.paired_at).then(a.id.cmp(&b.id)));
    records
        .into_iter()
        .map(|d| DeviceInfo { online: control.is_online(&d.id), device_id: d.id, kind: d.kind, name: d.name })
        .collect()
}

async fn forget_device(control: &Control, device_id: &str) -> Result<Reply, Refused> {
    match registry::forget(control.store.as_ref(), control.clock.as_ref(), device_id).await {
        // Already forgotten is success: it is what a client retrying after a `retry: true`
        // (whose write may have landed after all) asked for. Revoking again costs nothing.
        Ok(_) | Err(RegistryError::AlreadyForgotten(_)) => {
            let (confirmed, linked) = control.revoke_everywhere(device_id).await;
            if confirmed < linked {
                tracing::warn!(
                    device = %device_id, confirmed, linked,
                    "not every linked copy confirmed the forget in time; the others cut it at their next refresh"
                );
            }
            Ok(Reply::Forgotten { device_id: device_id.to_owned() })
        }
        Err(RegistryError::Store(error)) => Err(Refused::store("the device was not forgotten", &error)),
        Err(other @ (RegistryError::BadId(_) | RegistryError::NotFound(_) | RegistryError::Record(_))) => {
            Err(Refused::wrong(other.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_requests_are_checked_like_the_command_line() {
        assert_eq!(check_code_request(None, None), Ok(codes::DEFAULT_TTL));
        assert_eq!(check_code_request(Some("phone"), Some(86_400)), Ok(MAX_CODE_TTL));
        for (name, ttl, needle) in [
            (Some(" "), None, "name is empty"),
            (Some("a\nb"), None, "control characters"),
            (None, Some(0), "more than zero"),
            (None, Some(86_401), "longer than the maximum"),
        ] {
            let refused = check_code_request(name, ttl).unwrap_err();
            assert!(!refused.retry && refused.error.contains(needle), "{refused:?}");
        }
    }

    #[test]
    fn each_request_needs_its_role_and_the_refusal_names_both() {
        let forget = Request::ForgetDevice { device_id: "d0".into() };
        let code = Request::MakeCode { kind: DeviceKind::Host, name: None, ttl_secs: None };
        for (request, least) in [(Request::ListDevices, Role::Viewer), (code, Role::Operator), (forget, Role::Admin)] {
            assert_eq!(needed(&request), least);
            for role in Role::ALL {
                let verdict = allowed(&request, role, "d1");
                assert_eq!(verdict.is_ok(), role >= least, "{role} asking {}", op_name(&request));
                if let Err(refused) = verdict {
                    let expected = format!("{} needs the {least} role; client d1 has {role}", op_name(&request));
                    assert_eq!(refused, Refused::wrong(expected));
                }
            }
        }
    }

    #[test]
    fn store_refusals_say_try_again() {
        let refused = Refused::store("no code was made", &StoreError::Unavailable { detail: "timed out".into() });
        assert!(refused.retry);
        assert_eq!(refused.error, "store unavailable (timed out): no code was made; try again when it answers");
    }
}
