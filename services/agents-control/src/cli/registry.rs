//! `agents-control clients`, `hosts` and `forget DEVICE_ID`. A forget writes the store, then
//! asks every running copy to recheck the device (`POST /v1/recheck/<id>` at its peer URL), so
//! the device is cut everywhere at once rather than at each copy's next refresh.

use super::{Failure, open_store};
use crate::cadence::REFRESH_EVERY;
use crate::clock::SystemClock;
use crate::config::StoreArgs;
use crate::http::Rechecked;
use crate::records::{self, MemberRecord};
use crate::registry;
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use hyperhive_control_link::transport::Target;
use hyperhive_control_proto::DeviceKind;
use hyperhive_object_store::Store;
use serde::Serialize;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ForgetArgs {
    /// The device id, as `agents-control clients` or `hosts` shows it.
    #[arg(value_name = "DEVICE_ID")]
    id: String,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Serialize)]
struct Row<'a> {
    id: &'a str,
    kind: DeviceKind,
    name: &'a str,
    paired_at: &'a str,
}

pub async fn list(args: ListArgs, kind: DeviceKind) -> Result<ExitCode, Failure> {
    let store = open_store(&args.store).await?;
    let devices = registry::list(store.as_ref(), kind).await?;
    let rows: Vec<Row> =
        devices.iter().map(|d| Row { id: &d.id, kind: d.kind, name: &d.name, paired_at: &d.paired_at }).collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let name_width = rows.iter().map(|r| r.name.chars().count()).max().unwrap_or(0).max(4);
    println!("{:<33}  {:<name_width$}  PAIRED AT", "ID", "NAME");
    for row in &rows {
        println!("{:<33}  {:<name_width$}  {}", row.id, row.name, row.paired_at);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn forget(args: ForgetArgs) -> Result<ExitCode, Failure> {
    let store = open_store(&args.store).await?;
    let record = registry::forget(store.as_ref(), &SystemClock, args.id.trim()).await?;
    eprintln!("forgot {} {} ({})", record.kind, record.id, record.name);
    announce(store.as_ref(), &record.id).await;
    Ok(ExitCode::SUCCESS)
}

/// How long one copy gets to take a recheck's connection, and then to answer it.
const RECHECK_CONNECT: Duration = Duration::from_secs(2);
const RECHECK_ANSWER: Duration = Duration::from_secs(6);

/// Asks every copy in the membership to recheck the device now, and says which did. The forget
/// is already done (the store is the truth): a copy not reached still cuts the device at its
/// next refresh, so this only ever reports, never fails the command.
async fn announce(store: &dyn Store, device_id: &str) {
    let members = match running_copies(store).await {
        Ok(members) => members,
        Err(error) => {
            eprintln!(
                "could not list the running copies ({error}): each cuts the device at its next registry refresh, within {}s",
                REFRESH_EVERY.as_secs()
            );
            return;
        }
    };
    if members.is_empty() {
        eprintln!("no copy is running: nothing to cut");
        return;
    }
    let asked = members.iter().map(|member| async move {
        let outcome = match &member.peer_url {
            Some(url) => recheck(url, device_id).await,
            None => Err("it has no peer URL (AGENTS_CONTROL_PEER_URL), so it cannot be reached".to_owned()),
        };
        (member, outcome)
    });
    let mut cut = 0;
    for (member, outcome) in futures::future::join_all(asked).await {
        match outcome {
            Ok(answer) if !answer.paired => cut += 1,
            Ok(_) => eprintln!("copy {} still finds the device paired in the store", member.copy_id),
            Err(error) => eprintln!(
                "copy {} not reached: {error}; it cuts the device at its next registry refresh, within {}s",
                member.copy_id,
                REFRESH_EVERY.as_secs()
            ),
        }
    }
    eprintln!("cut now on {cut} of {} running copies (each tells its peers too)", members.len());
}

/// The membership records in the store (a copy killed without leaving stays listed for up to
/// 10 minutes: it is reported not reached).
async fn running_copies(store: &dyn Store) -> Result<Vec<MemberRecord>, String> {
    let mut members = Vec::new();
    for key in store.list(records::MEMBERS).await.map_err(|e| e.to_string())? {
        if let Some(object) = store.get(&key).await.map_err(|e| e.to_string())? {
            members.push(records::decode::<MemberRecord>(&key, &object.bytes).map_err(|e| e.to_string())?);
        }
    }
    Ok(members)
}

/// `POST /v1/recheck/<device id>` to one copy's peer URL.
async fn recheck(peer_url: &str, device_id: &str) -> Result<Rechecked, String> {
    let target = Target::parse(peer_url).map_err(|e| format!("{peer_url}: {e}"))?;
    let stream = tokio::time::timeout(RECHECK_CONNECT, target.connect(None))
        .await
        .map_err(|_| format!("{peer_url}: no connection within {}s", RECHECK_CONNECT.as_secs()))?
        .map_err(|e| format!("{peer_url}: {e}"))?;
    let exchange = async {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
        let driver = tokio::spawn(connection);
        let request = hyper::Request::post(format!("/v1/recheck/{device_id}"))
            .header("host", target.authority())
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let body = Limited::new(response.into_body(), 64 * 1024).collect().await.map_err(|e| e.to_string())?.to_bytes();
        driver.abort();
        if !status.is_success() {
            return Err(format!("answered {status}: {}", String::from_utf8_lossy(&body).trim()));
        }
        serde_json::from_slice::<Rechecked>(&body).map_err(|e| format!("an answer that is not a recheck's: {e}"))
    };
    tokio::time::timeout(RECHECK_ANSWER, exchange)
        .await
        .map_err(|_| format!("{peer_url}: no answer within {}s", RECHECK_ANSWER.as_secs()))?
        .map_err(|e| format!("{peer_url}: {e}"))
}
