//! Requests a client makes over its link (`request` frames): make a code, list devices, forget
//! a device. Each is answered by `reply` or `request_failed` with the request's id.

use crate::control::Control;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::{LinkFrame, Request};

/// Answers one request from the device `device_id` of kind `kind`.
pub async fn answer(_control: &Control, kind: DeviceKind, _device_id: &str, id: u64, request: Request) -> LinkFrame {
    let error = if kind == DeviceKind::Host {
        "hosts may not make requests; use a client".to_owned()
    } else {
        format!("{request:?} is not served over the link by this version; use the agents-control command line")
    };
    LinkFrame::RequestFailed { id, error, retry: false }
}
