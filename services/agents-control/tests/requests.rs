//! Requests over the device link (`request` frames): making codes, listing and forgetting
//! devices, each allowed only from the least role it needs, on one copy served in process by warp, with real WebSocket clients running
//! control-link's handshake; codes made over the link are redeemed with control-link's pairing
//! client over HTTP. The store is a `file://` directory, or the test kit's real S3 server frozen
//! to make the bucket unreachable.

mod link_client;

use agents_control::control::Control;
use agents_control::records::{self, CodeRecord, DeviceRecord};
use agents_control::registry;
use futures::SinkExt;
use hyperhive_control_link::DeviceName;
use hyperhive_control_link::handshake;
use hyperhive_control_link::pair_client::{self, PairError};
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::code::Code;
use hyperhive_control_proto::link::{
    CloseCode, DEVICES_PER_REPLY, DeviceInfo, HostPresence, LinkFrame, MAX_FRAME_BYTES, Reply, Request,
};
use hyperhive_control_proto::role::Role;
use hyperhive_object_store::Store;
use hyperhive_object_store::s3::S3Store;
use hyperhive_testkit::{S3, S3Server, wait_until};
use link_client::{Device, ServedCopy, Socket, next_close, next_frame, next_frame_within, send};
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(5);
/// A frozen bucket costs each store call its bounded retries (a few seconds each) before it is
/// declared unavailable; a request makes up to two such calls.
const STORE_OUTAGE_WAIT: Duration = Duration::from_secs(60);
const CONTROL_SEED: [u8; 32] = [7; 32];

type Copy = ServedCopy;

async fn file_copy(public: bool) -> Copy {
    ServedCopy::on_file_store(CONTROL_SEED, public).await
}

/// The device's side, and what the store holds, for the tests of this file.
trait CopyExt {
    async fn hello(&self, device: &Device) -> Socket;
    async fn connect(&self, device: &Device) -> Socket;
    async fn pending_codes(&self) -> Vec<CodeRecord>;
    async fn stored_device(&self, id: &str) -> DeviceRecord;
}

impl CopyExt for Copy {
    /// Answers the server's challenge with the device's hello, without waiting for the welcome.
    async fn hello(&self, device: &Device) -> Socket {
        let mut socket = link_client::open(self.addr).await;
        let challenge = next_frame(&mut socket).await;
        let (hello, _) = handshake::answer_challenge(&challenge, &device.id, &device.key, &mut rand::rng()).unwrap();
        send(&mut socket, &hello).await;
        socket
    }

    /// Connects and authenticates the device; a client's first `presence` is read here.
    async fn connect(&self, device: &Device) -> Socket {
        let (mut socket, verdict) = link_client::try_connect(self.addr, device, CONTROL_SEED).await;
        assert_eq!(verdict.unwrap(), "cp1");
        if device.kind == DeviceKind::Client {
            assert!(matches!(next_frame(&mut socket).await, LinkFrame::Presence { .. }));
        }
        socket
    }

    async fn pending_codes(&self) -> Vec<CodeRecord> {
        let mut found = Vec::new();
        for key in self.store.list(records::CODES).await.unwrap() {
            let bytes = self.store.get(&key).await.unwrap().unwrap().bytes;
            found.push(records::decode(&key, &bytes).unwrap());
        }
        found
    }

    async fn stored_device(&self, id: &str) -> DeviceRecord {
        let key = records::device_key(id);
        records::decode(&key, &self.store.get(&key).await.unwrap().unwrap().bytes).unwrap()
    }
}

async fn ask(socket: &mut Socket, id: u64, request: Request) {
    send(socket, &LinkFrame::Request { id, request }).await;
}

/// The answer to request `id`, which must be the next frame.
async fn answer(socket: &mut Socket, id: u64) -> Result<Reply, (String, bool)> {
    answer_within(socket, id, WAIT).await
}

async fn answer_within(socket: &mut Socket, id: u64, wait: Duration) -> Result<Reply, (String, bool)> {
    match next_frame_within(socket, wait).await {
        LinkFrame::Reply { id: got, reply } if got == id => Ok(reply),
        LinkFrame::RequestFailed { id: got, error, retry } if got == id => Err((error, retry)),
        other => panic!("expected the answer to request {id}, got {other:?}"),
    }
}

/// Store LISTs that gave up on an unreachable store, as `/metrics` counts them.
fn failed_lists(control: &Control) -> u64 {
    let needle = "agents_control_store_operations_total{operation=\"list\",result=\"unavailable\"} ";
    control.metrics.render().lines().filter_map(|line| line.strip_prefix(needle)?.parse::<u64>().ok()).sum()
}

fn make_code(kind: DeviceKind, name: Option<&str>, ttl_secs: Option<u64>) -> Request {
    Request::MakeCode { kind, name: name.map(str::to_owned), ttl_secs }
}

fn info(device: &Device, name: &str, online: bool) -> DeviceInfo {
    DeviceInfo { device_id: device.id.clone(), kind: device.kind, name: name.into(), online }
}

#[tokio::test]
async fn a_code_made_over_the_link_pairs_a_new_device_once() {
    let copy = file_copy(true).await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let mut link = copy.connect(&client).await;

    ask(&mut link, 1, make_code(DeviceKind::Host, Some("box"), Some(120))).await;
    let Ok(Reply::Code { code: token, expires_at }) = answer(&mut link, 1).await else { panic!("no code") };
    assert_eq!(expires_at, "2026-11-30T04:02:00Z");
    let code = Code::parse(&token).unwrap();
    assert_eq!(code.kind, DeviceKind::Host);
    assert_eq!(code.control_url, format!("http://{}", copy.addr));
    assert_eq!(code.control_public_key, copy.control.key.public_key());
    let [record] = &copy.pending_codes().await[..] else { panic!("one pending code") };
    assert_eq!((record.made_by.as_str(), record.name.as_deref()), (client.id.as_str(), Some("box")));
    assert_eq!(record.expires_at, expires_at);

    // The new device pairs as a real one does: POST /v1/pair to the URL the code carries.
    let identity = pair_client::pair(&token, DeviceName::Chosen("box")).await.unwrap();
    assert_eq!(identity.kind, DeviceKind::Host);
    let host = Device { id: identity.device_id.clone(), kind: DeviceKind::Host, key: identity.device_key().clone() };
    // Clients hear of a new host as soon as it pairs, then again when it connects.
    let paired = HostPresence { device_id: host.id.clone(), name: "box".into(), paired: true, online: false };
    assert_eq!(next_frame(&mut link).await, LinkFrame::PresenceChanged { host: paired });
    let _host_link = copy.connect(&host).await;
    let online = HostPresence { device_id: host.id.clone(), name: "box".into(), paired: true, online: true };
    assert_eq!(next_frame(&mut link).await, LinkFrame::PresenceChanged { host: online });
    match pair_client::pair(&token, DeviceName::Chosen("box again")).await {
        Err(PairError::Refused { status: 409, error }) => assert!(error.contains("already used"), "{error}"),
        other => panic!("a second pairing with the code must be refused, got {other:?}"),
    }

    // Without name and ttl: a code for a client with the default life.
    ask(&mut link, 2, make_code(DeviceKind::Client, None, None)).await;
    let Ok(Reply::Code { code, expires_at }) = answer(&mut link, 2).await else { panic!("no code") };
    assert_eq!(Code::parse(&code).unwrap().kind, DeviceKind::Client);
    assert_eq!(expires_at, "2026-11-30T04:10:00Z");
}

/// A client cannot fill the bucket with codes: past its bound it is told why, and nothing is
/// written; another client is not held to its count.
#[tokio::test]
async fn a_client_may_hold_only_so_many_waiting_codes() {
    let copy = file_copy(true).await;
    let max = copy.control.guards.limits.max_codes_per_client;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let mut link = copy.connect(&client).await;
    for id in 0..max as u64 {
        ask(&mut link, id, make_code(DeviceKind::Host, None, Some(24 * 3600))).await;
        assert!(answer(&mut link, id).await.is_ok(), "code {id}");
    }
    ask(&mut link, 100, make_code(DeviceKind::Host, None, None)).await;
    let (error, retry) = answer(&mut link, 100).await.unwrap_err();
    assert!(!retry && error.contains(&format!("already has {max} codes waiting")), "{error}");
    assert_eq!(copy.pending_codes().await.len(), max);
    assert!(copy.control.metrics.render().contains("agents_control_codes_refused_total 1\n"));

    let other = copy.pair(DeviceKind::Client, "laptop").await;
    let mut other_link = copy.connect(&other).await;
    ask(&mut other_link, 1, make_code(DeviceKind::Host, None, None)).await;
    assert!(answer(&mut other_link, 1).await.is_ok());
}

#[tokio::test]
async fn a_copy_without_its_public_address_makes_no_codes() {
    let copy = file_copy(false).await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let mut link = copy.connect(&client).await;
    ask(&mut link, 1, make_code(DeviceKind::Client, None, None)).await;
    let (error, retry) = answer(&mut link, 1).await.unwrap_err();
    assert!(!retry && error.contains("AGENTS_CONTROL_URL"), "{error}");
    assert!(copy.pending_codes().await.is_empty());
}

#[tokio::test]
async fn bad_code_requests_are_refused_and_nothing_is_written() {
    let copy = file_copy(true).await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let mut link = copy.connect(&client).await;
    let cases = [
        (make_code(DeviceKind::Host, Some("  "), None), "name is empty"),
        (make_code(DeviceKind::Host, Some(&"x".repeat(200)), None), "at most"),
        (make_code(DeviceKind::Host, Some("tab\there"), None), "control characters"),
        (make_code(DeviceKind::Client, None, Some(0)), "more than zero"),
        (make_code(DeviceKind::Client, None, Some(24 * 3600 + 1)), "longer than the maximum"),
    ];
    for (id, (request, needle)) in (1..).zip(cases) {
        ask(&mut link, id, request).await;
        let (error, retry) = answer(&mut link, id).await.unwrap_err();
        assert!(!retry && error.contains(needle), "{id}: {error}");
    }
    assert!(copy.pending_codes().await.is_empty());

    // A request that is not JSON of a known op is a malformed frame, and the link stays.
    link.send(Message::text(r#"{"type":"request","id":9,"request":{"op":"launch"}}"#)).await.unwrap();
    assert!(matches!(next_frame(&mut link).await, LinkFrame::Error { .. }));
    ask(&mut link, 10, Request::ListDevices).await;
    assert!(answer(&mut link, 10).await.is_ok());
}

#[tokio::test]
async fn a_list_holds_every_paired_device_with_its_online_state() {
    let copy = file_copy(true).await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let idle_host = copy.pair(DeviceKind::Host, "spare").await;
    let gone = copy.pair(DeviceKind::Client, "old laptop").await;
    registry::forget(copy.store.as_ref(), copy.clock.as_ref(), &gone.id).await.unwrap();
    let mut link = copy.connect(&client).await;
    let _host_link = copy.connect(&host).await;
    let _presence_changed = next_frame(&mut link).await;

    ask(&mut link, 1, Request::ListDevices).await;
    let Ok(Reply::Devices { mut devices, from_memory, more: false }) = answer(&mut link, 1).await else {
        panic!("no list")
    };
    assert!(!from_memory);
    let mut expected = vec![info(&client, "phone", true), info(&host, "box", true), info(&idle_host, "spare", false)];
    // Devices paired in one second are ordered by id.
    devices.sort_by(|a, b| a.device_id.cmp(&b.device_id));
    expected.sort_by(|a, b| a.device_id.cmp(&b.device_id));
    assert_eq!(devices, expected);
}

/// 400 devices with the longest names make a list of about 120 KB: in one frame it would pass
/// the 64 KiB cap and close the asking client's own link.
#[tokio::test]
async fn a_long_list_comes_in_pages_that_each_fit_in_a_frame() {
    let copy = file_copy(false).await;
    let name: String = "\u{1F41D}\"".repeat(32); // 64 characters, 4-byte ones and quotes
    let client = copy.pair(DeviceKind::Client, &name).await;
    for _ in 0..399 {
        copy.pair_in_store_only(DeviceKind::Host, &name).await;
    }
    let mut link = copy.connect(&client).await;
    ask(&mut link, 7, Request::ListDevices).await;
    let (mut listed, mut pages) = (vec![], 0);
    loop {
        let message = tokio::time::timeout(WAIT, futures::StreamExt::next(&mut link)).await.expect("a page in time");
        let Some(Ok(Message::Text(text))) = message else { panic!("the link broke: {message:?}") };
        assert!(text.len() <= MAX_FRAME_BYTES, "a page of {} bytes", text.len());
        let LinkFrame::Reply { id: 7, reply: Reply::Devices { devices, from_memory: false, more } } =
            LinkFrame::decode(&text).unwrap()
        else {
            panic!("not a page of the list: {text}")
        };
        pages += 1;
        listed.extend(devices);
        if !more {
            break;
        }
    }
    assert_eq!(listed.len(), 400);
    assert_eq!(pages, 400usize.div_ceil(DEVICES_PER_REPLY));
    assert_eq!(listed.iter().filter(|d| d.online).count(), 1, "only the asking client is connected");
    send(&mut link, &LinkFrame::Ping { t: 1 }).await;
    assert_eq!(next_frame(&mut link).await, LinkFrame::Pong { t: 1 }, "the link stays");
}

#[tokio::test]
async fn forgetting_over_the_link_closes_the_devices_session_and_it_cannot_come_back() {
    let copy = file_copy(true).await;
    let client = copy.pair_client_as(Role::Admin, "phone").await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let mut link = copy.connect(&client).await;
    let mut host_link = copy.connect(&host).await;
    let _online = next_frame(&mut link).await;

    ask(&mut link, 1, Request::ForgetDevice { device_id: host.id.clone() }).await;
    let forgotten = HostPresence { device_id: host.id.clone(), name: "box".into(), paired: false, online: false };
    assert_eq!(next_frame(&mut link).await, LinkFrame::PresenceChanged { host: forgotten });
    assert_eq!(answer(&mut link, 1).await, Ok(Reply::Forgotten { device_id: host.id.clone() }));
    let (code, reason) = next_close(&mut host_link).await;
    assert_eq!(code, CloseCode::Revoked.code(), "{reason}");
    assert!(copy.stored_device(&host.id).await.forgotten_at.is_some());

    let mut again = copy.hello(&host).await;
    assert_eq!(next_close(&mut again).await.0, CloseCode::UnknownDevice.code());

    // Forgetting it again (a client retrying after an unknown outcome) is not an error.
    ask(&mut link, 2, Request::ForgetDevice { device_id: host.id.clone() }).await;
    assert_eq!(answer(&mut link, 2).await, Ok(Reply::Forgotten { device_id: host.id.clone() }));
    ask(&mut link, 3, Request::ListDevices).await;
    let Ok(Reply::Devices { devices, .. }) = answer(&mut link, 3).await else { panic!("no list") };
    assert_eq!(devices, [info(&client, "phone", true)]);

    for (id, (target, needle)) in (4..).zip([
        ("d00000000000000000000000000000000", "no device"),
        ("../devices/x", "is not a device id"),
        ("", "is not a device id"),
    ]) {
        ask(&mut link, id, Request::ForgetDevice { device_id: target.into() }).await;
        let (error, retry) = answer(&mut link, id).await.unwrap_err();
        assert!(!retry && error.contains(needle), "{target}: {error}");
    }
}

#[tokio::test]
async fn hosts_may_not_make_requests() {
    let copy = file_copy(true).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let other = copy.pair(DeviceKind::Host, "other box").await;
    let mut link = copy.connect(&host).await;
    let requests = [
        make_code(DeviceKind::Host, None, None),
        Request::ListDevices,
        Request::ForgetDevice { device_id: other.id.clone() },
    ];
    for (id, request) in (1..).zip(requests) {
        ask(&mut link, id, request).await;
        let (error, retry) = answer(&mut link, id).await.unwrap_err();
        assert!(!retry && error.contains("hosts may not make requests"), "{error}");
    }
    assert!(copy.pending_codes().await.is_empty());
    assert!(copy.stored_device(&other.id).await.forgotten_at.is_none());
}

#[tokio::test]
async fn an_answer_reaches_only_the_client_that_asked() {
    let copy = file_copy(true).await;
    let asker = copy.pair(DeviceKind::Client, "phone").await;
    let bystander = copy.pair(DeviceKind::Client, "laptop").await;
    let mut link = copy.connect(&asker).await;
    let mut other_link = copy.connect(&bystander).await;

    ask(&mut link, 1, make_code(DeviceKind::Client, None, None)).await;
    assert!(matches!(answer(&mut link, 1).await, Ok(Reply::Code { .. })));
    ask(&mut other_link, 1, Request::ListDevices).await;
    assert!(matches!(answer(&mut other_link, 1).await, Ok(Reply::Devices { .. })));
    // The answers went one each way: the next frame on each link answers its own ping.
    for (t, socket) in [(7, &mut link), (8, &mut other_link)] {
        send(socket, &LinkFrame::Ping { t }).await;
        assert_eq!(next_frame(socket).await, LinkFrame::Pong { t });
    }
}

/// The bucket frozen: codes and forgets are refused with `retry: true` and nothing happens;
/// lists answer from memory; the answer to a request asked by a session that has since been
/// replaced reaches neither session; once the bucket answers again the same requests succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_store_is_unreachable_codes_and_forgets_wait_and_lists_come_from_memory() {
    let mut s3 = S3::start(S3Server::Moto).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(S3Store::from_client(&s3.client(), s3.bucket(), "requests"));
    let copy = ServedCopy::start(store, None, CONTROL_SEED, true).await;
    let client = copy.pair_client_as(Role::Admin, "phone").await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let mut link = copy.connect(&client).await;

    s3.pause().unwrap();
    ask(&mut link, 1, make_code(DeviceKind::Host, None, None)).await;
    ask(&mut link, 2, Request::ForgetDevice { device_id: host.id.clone() }).await;
    ask(&mut link, 3, Request::ListDevices).await;
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(next_frame_within(&mut link, STORE_OUTAGE_WAIT).await);
    }
    answers.sort_by_key(|frame| match frame {
        LinkFrame::Reply { id, .. } | LinkFrame::RequestFailed { id, .. } => *id,
        other => panic!("expected answers, got {other:?}"),
    });
    for refused in &answers[..2] {
        let LinkFrame::RequestFailed { error, retry: true, .. } = refused else { panic!("{refused:?}") };
        assert!(error.starts_with("store unavailable") && error.contains("try again"), "{error}");
    }
    let LinkFrame::Reply { reply: Reply::Devices { mut devices, from_memory: true, more: false }, .. } =
        answers[2].clone()
    else {
        panic!("{:?}", answers[2])
    };
    devices.sort_by(|a, b| a.device_id.cmp(&b.device_id));
    let mut expected = vec![info(&client, "phone", true), info(&host, "box", false)];
    expected.sort_by(|a, b| a.device_id.cmp(&b.device_id));
    assert_eq!(devices, expected);
    assert!(copy.control.registry.active(&host.id).is_some(), "a refused forget must not forget in memory");

    // A request whose session is replaced before it is answered: the answer is dropped, and
    // the newer session (which did not ask) never sees it.
    let before = failed_lists(&copy.control);
    ask(&mut link, 4, Request::ListDevices).await;
    // The link reads frames in order and answers a ping at once: its pong proves request 4
    // was read (and is waiting on the store) before the session is replaced.
    send(&mut link, &LinkFrame::Ping { t: 40 }).await;
    assert_eq!(next_frame(&mut link).await, LinkFrame::Pong { t: 40 });
    let mut newer = copy.connect(&client).await;
    assert_eq!(next_close(&mut link).await.0, CloseCode::Replaced.code());
    wait_until("the replaced session's list to give up", STORE_OUTAGE_WAIT, || async {
        (failed_lists(&copy.control) > before).then_some(())
    })
    .await
    .unwrap();

    s3.resume().unwrap();
    ask(&mut newer, 5, Request::ForgetDevice { device_id: host.id.clone() }).await;
    // The host was offline; its clients still hear it is gone for good before the answer.
    let forgotten = HostPresence { device_id: host.id.clone(), name: "box".into(), paired: false, online: false };
    assert_eq!(next_frame_within(&mut newer, STORE_OUTAGE_WAIT).await, LinkFrame::PresenceChanged { host: forgotten });
    assert_eq!(
        answer_within(&mut newer, 5, STORE_OUTAGE_WAIT).await,
        Ok(Reply::Forgotten { device_id: host.id.clone() })
    );
    ask(&mut newer, 6, make_code(DeviceKind::Host, None, None)).await;
    assert!(matches!(answer_within(&mut newer, 6, STORE_OUTAGE_WAIT).await, Ok(Reply::Code { .. })));
    ask(&mut newer, 7, Request::ListDevices).await;
    let Ok(Reply::Devices { devices, from_memory: false, more: false }) =
        answer_within(&mut newer, 7, STORE_OUTAGE_WAIT).await
    else {
        panic!("no list from the store")
    };
    assert_eq!(devices, [info(&client, "phone", true)]);
}

/// Each request from a viewer, an operator and an admin: listing needs viewer, making a code
/// operator, forgetting admin. A refusal names both roles and changes nothing: no code is
/// written, the target stays paired and connected, and the asker's link goes on.
#[tokio::test]
async fn each_request_is_allowed_only_from_the_role_it_needs() {
    let copy = file_copy(true).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let mut host_link = copy.connect(&host).await;
    for role in Role::ALL {
        let client = copy.pair_client_as(role, &format!("{role} phone")).await;
        let mut link = copy.connect(&client).await;

        ask(&mut link, 1, Request::ListDevices).await;
        assert!(matches!(answer(&mut link, 1).await, Ok(Reply::Devices { .. })), "{role} may list");

        let codes_before = copy.pending_codes().await.len();
        ask(&mut link, 2, make_code(DeviceKind::Host, None, None)).await;
        match answer(&mut link, 2).await {
            Ok(Reply::Code { .. }) => assert!(role >= Role::Operator, "a {role} made a code"),
            Err((error, retry)) => {
                assert_eq!(role, Role::Viewer, "{error}");
                assert!(!retry);
                assert_eq!(error, format!("make_code needs the operator role; client {} has viewer", client.id));
                assert_eq!(copy.pending_codes().await.len(), codes_before, "a refused code was written");
            }
            Ok(other) => panic!("{other:?}"),
        }

        // The target of a forget that is refused: another host, connected.
        if role < Role::Admin {
            ask(&mut link, 3, Request::ForgetDevice { device_id: host.id.clone() }).await;
            let (error, retry) = answer(&mut link, 3).await.unwrap_err();
            assert!(!retry);
            assert_eq!(error, format!("forget_device needs the admin role; client {} has {role}", client.id));
            assert!(copy.stored_device(&host.id).await.forgotten_at.is_none(), "a {role} forgot the host");
            send(&mut host_link, &LinkFrame::Ping { t: 1 }).await;
            assert_eq!(next_frame(&mut host_link).await, LinkFrame::Pong { t: 1 }, "the host's link was cut");
        } else {
            ask(&mut link, 3, Request::ForgetDevice { device_id: host.id.clone() }).await;
            let forgotten =
                HostPresence { device_id: host.id.clone(), name: "box".into(), paired: false, online: false };
            assert_eq!(next_frame(&mut link).await, LinkFrame::PresenceChanged { host: forgotten });
            assert_eq!(answer(&mut link, 3).await, Ok(Reply::Forgotten { device_id: host.id.clone() }));
            assert_eq!(next_close(&mut host_link).await.0, CloseCode::Revoked.code());
        }
        send(&mut link, &LinkFrame::Ping { t: 9 }).await;
        assert_eq!(next_frame(&mut link).await, LinkFrame::Pong { t: 9 }, "the {role}'s link goes on");
    }
}
