//! The test kit's forge stand-in ([`hyperhive_testkit::ForgeStandIn`]) as a program, in place of
//! `forgejo` on the VM tests' hosts (tests/nixos/hosts), for the two commands they run:
//!
//! ```text
//! forge-stand-in web [--pid FILE]
//! forge-stand-in admin user create --username U --password P --email E [--admin] [--must-change-password=BOOL]
//! ```
//!
//! As forgejo, both find the work directory in `GITEA_WORK_DIR` (or `FORGEJO_WORK_DIR`, or
//! `--work-path`) and `web` reads `[server]` `HTTP_ADDR`, `HTTP_PORT` and `ROOT_URL` from
//! `GITEA_CUSTOM/conf/app.ini` (or `FORGEJO_CUSTOM`'s; by default `WORK/custom/conf/app.ini`). The stand-in keeps its
//! state in memory, so where forgejo's command line writes to the database, this one asks the
//! running server through a socket in the work directory (`WORK/stand-in.sock`, its user's only).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use hyperhive_testkit::ForgeStandIn;
use hyperhive_testkit::forge::NewUser;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

const USAGE: &str = "usage: forge-stand-in web [--pid FILE] | forge-stand-in admin user create --username U --password P --email E [--admin] [--must-change-password=BOOL]";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, flags) = parse(&args)?;
    let work = work_dir(&flags)?;
    match command.as_str() {
        "web" => web(&work, &flags).await,
        "admin user create" => create_user(&work, &flags).await,
        _ => bail!("unknown command {command:?}; {USAGE}"),
    }
}

/// The command (its words before the first flag) and its flags (`--name value`, `--name=value`,
/// or `--name` alone meaning `true`).
fn parse(args: &[String]) -> anyhow::Result<(String, HashMap<String, String>)> {
    let words: Vec<&str> = args.iter().take_while(|a| !a.starts_with("--")).map(String::as_str).collect();
    let mut flags = HashMap::new();
    let mut rest = args[words.len()..].iter().peekable();
    while let Some(arg) = rest.next() {
        let Some(name) = arg.strip_prefix("--") else { bail!("unexpected argument {arg:?}; {USAGE}") };
        let (name, value) = match name.split_once('=') {
            Some((name, value)) => (name.to_owned(), value.to_owned()),
            None if matches!(name, "admin") => (name.to_owned(), "true".to_owned()),
            None => (name.to_owned(), rest.next().with_context(|| format!("--{name} needs a value; {USAGE}"))?.clone()),
        };
        flags.insert(name, value);
    }
    Ok((words.join(" "), flags))
}

fn work_dir(flags: &HashMap<String, String>) -> anyhow::Result<PathBuf> {
    flags
        .get("work-path")
        .cloned()
        .or_else(|| std::env::var("GITEA_WORK_DIR").ok())
        .or_else(|| std::env::var("FORGEJO_WORK_DIR").ok())
        .map(PathBuf::from)
        .context("no work directory: set GITEA_WORK_DIR (or FORGEJO_WORK_DIR, or --work-path) as for forgejo")
}

/// `[server]` of app.ini: `HTTP_ADDR` (default 0.0.0.0), `HTTP_PORT` (default 3000), `ROOT_URL`.
fn server_settings(work: &Path) -> anyhow::Result<(String, String)> {
    let custom = std::env::var("GITEA_CUSTOM")
        .or_else(|_| std::env::var("FORGEJO_CUSTOM"))
        .map_or_else(|_| work.join("custom"), PathBuf::from);
    let path = custom.join("conf").join("app.ini");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut section = String::new();
    let mut server = HashMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with(['#', ';'])) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_owned();
        } else if let (true, Some((key, value))) = (section == "server", line.split_once('=')) {
            server.insert(key.trim().to_owned(), value.trim().trim_matches('"').to_owned());
        }
    }
    let addr = server.get("HTTP_ADDR").map_or("0.0.0.0", String::as_str);
    let port = server.get("HTTP_PORT").map_or("3000", String::as_str);
    let listen = format!("{addr}:{port}");
    let root_url = server.get("ROOT_URL").cloned().unwrap_or_else(|| format!("http://localhost:{port}/"));
    Ok((listen, root_url))
}

fn socket(work: &Path) -> PathBuf {
    work.join("stand-in.sock")
}

async fn web(work: &Path, flags: &HashMap<String, String>) -> anyhow::Result<()> {
    let (listen, root_url) = server_settings(work)?;
    let listener = tokio::net::TcpListener::bind(&listen).await.with_context(|| format!("binding {listen}"))?;
    let forge = ForgeStandIn::serve_fresh(listener, &root_url)?;
    let socket = socket(work);
    // A socket left by a killed server is stale: nothing else makes one here.
    let _ = std::fs::remove_file(&socket);
    let admin = UnixListener::bind(&socket).with_context(|| format!("binding {}", socket.display()))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    if let Some(pid) = flags.get("pid") {
        std::fs::write(pid, format!("{}\n", std::process::id())).with_context(|| format!("writing {pid}"))?;
    }
    println!("forge stand-in listening on {listen} as {root_url}");
    loop {
        let (stream, _) = admin.accept().await.context("accepting on the admin socket")?;
        if let Err(error) = answer_admin(&forge, stream).await {
            eprintln!("admin request: {error:#}");
        }
    }
}

/// One request on the admin socket: a JSON [`NewUser`] line, answered `ok` or the refusal.
async fn answer_admin(forge: &ForgeStandIn, stream: UnixStream) -> anyhow::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let fields: HashMap<String, serde_json::Value> = serde_json::from_str(&line).context("a JSON object")?;
    let text = |name: &str| fields.get(name).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
    let flag = |name: &str| fields.get(name).and_then(serde_json::Value::as_bool).unwrap_or(false);
    let new = NewUser {
        login: text("username"),
        email: text("email"),
        password: text("password"),
        is_admin: flag("admin"),
        must_change_password: flag("must_change_password"),
    };
    let answer = match forge.create_user(&new) {
        Ok(()) => format!("New user '{}' has been successfully created!\n", new.login),
        Err(refusal) => format!("error: CreateUser: {refusal}\n"),
    };
    write.write_all(answer.as_bytes()).await?;
    Ok(())
}

async fn create_user(work: &Path, flags: &HashMap<String, String>) -> anyhow::Result<()> {
    let required = |name: &str| flags.get(name).cloned().with_context(|| format!("--{name} is required; {USAGE}"));
    let boolean = |name: &str, default: bool| match flags.get(name).map(String::as_str) {
        None => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => bail!("--{name} takes true or false, not {other:?}"),
    };
    let request = serde_json::json!({
        "username": required("username")?,
        "password": required("password")?,
        "email": required("email")?,
        "admin": boolean("admin", false)?,
        // As forgejo: a new user must change their password unless told otherwise.
        "must_change_password": boolean("must-change-password", true)?,
    });
    let socket = socket(work);
    let stream = UnixStream::connect(&socket)
        .await
        .with_context(|| format!("connecting to {} (is `forge-stand-in web` running?)", socket.display()))?;
    let (read, mut write) = stream.into_split();
    write.write_all(format!("{request}\n").as_bytes()).await?;
    let mut answer = String::new();
    BufReader::new(read).read_line(&mut answer).await?;
    if let Some(refusal) = answer.strip_prefix("error: ") {
        bail!("{}", refusal.trim_end());
    }
    print!("{answer}");
    Ok(())
}
