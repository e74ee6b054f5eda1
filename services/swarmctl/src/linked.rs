//! `swarmctl accounts list|add|rm`: an agent's linked accounts. A token is read from a file or
//! stdin (`--token-file FILE|-`), never from the command line, where `ps` and shell history
//! would keep it.

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use hyper::http::Method;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_swarm_api::linked::{ForgeAccountBody, GithubAccountBody, LinkChanged, LinkedAccount, MatrixAccountBody};
use hyperhive_swarm_api::paths;

use super::client::{self, Api, CtlError};
use super::format::grid;
use super::hives::pretty_answer;

/// `swarmctl accounts ...`.
#[derive(Debug, Subcommand)]
pub enum AccountsCommand {
    /// The agent's own matrix account (`main`) and its linked accounts: kind, name, host and
    /// user, never a credential.
    List {
        /// The hive the agent is on.
        hive: HiveName,
        /// The agent.
        agent: AgentName,
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Link an account to the agent; the controller verifies the token where it can reach the
    /// server (matrix `whoami`, forge `GET /api/v1/user`), seals it and sends it to the agent.
    Add(AddArgs),
    /// Unlink an account; `--revoke` (matrix) logs its token out at the homeserver first and
    /// keeps the account if that fails.
    Rm {
        /// The hive the agent is on.
        hive: HiveName,
        /// The agent.
        agent: AgentName,
        /// matrix, forge or github.
        kind: AccountKind,
        /// The matrix account name or forge label (none for github).
        name: Option<String>,
        /// Log the matrix token out at its homeserver first.
        #[arg(long)]
        revoke: bool,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The kinds of linked account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AccountKind {
    /// A matrix account on any homeserver.
    Matrix,
    /// A Forgejo/Gitea account.
    Forge,
    /// The agent's GitHub account.
    Github,
}

/// `swarmctl accounts add HIVE AGENT KIND [NAME] ...`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The hive the agent is on.
    pub hive: HiveName,
    /// The agent.
    pub agent: AgentName,
    /// matrix, forge or github.
    pub kind: AccountKind,
    /// The matrix account name or forge label (none for github).
    pub name: Option<String>,
    /// The matrix homeserver or forge URL.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The matrix user id (@bot:example.org), forge username or GitHub login.
    #[arg(long, value_name = "USER")]
    pub user: String,
    /// The matrix access token's device id (optional).
    #[arg(long, value_name = "ID")]
    pub device_id: Option<String>,
    /// Read the token from FILE, or from stdin with `-`.
    #[arg(long, value_name = "FILE|-")]
    pub token_file: PathBuf,
    /// Print the API's JSON.
    #[arg(long)]
    pub json: bool,
}

fn account_path(hive: &HiveName, agent: &AgentName, kind: AccountKind, name: Option<&str>) -> Result<String, CtlError> {
    match (kind, name) {
        (AccountKind::Github, None) => Ok(paths::github_account(hive, agent)),
        (AccountKind::Github, Some(_)) => Err(CtlError::Usage("a github account has no name: leave NAME out".into())),
        (AccountKind::Matrix, Some(n)) => Ok(paths::matrix_account(hive, agent, segment(n)?)),
        (AccountKind::Forge, Some(n)) => Ok(paths::forge_account(hive, agent, segment(n)?)),
        (_, None) => {
            Err(CtlError::Usage("name the account: swarmctl accounts add HIVE AGENT matrix|forge NAME ...".into()))
        }
    }
}

/// A name fit for a path segment, refused here with the rule rather than sent (encoded) to be
/// refused; the controller checks the rest of its rules.
fn segment(name: &str) -> Result<&str, CtlError> {
    if name.is_empty() || name.bytes().any(|b| !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_')) {
        return Err(CtlError::Usage(format!(
            "{name:?} is not an account name: use lowercase letters, digits, '-' or '_'"
        )));
    }
    Ok(name)
}

fn read_token(path: &Path) -> Result<String, CtlError> {
    let mut text = String::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text).map(drop)
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text)).map(drop)
    };
    read.map_err(|e| CtlError::Usage(format!("reading the token from {}: {e}", path.display())))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(CtlError::Usage(format!("{} holds no token", path.display())));
    }
    Ok(token.to_owned())
}

/// `swarmctl accounts ...`.
///
/// # Errors
/// [`CtlError`].
pub async fn run(api: &Api, command: AccountsCommand) -> Result<String, CtlError> {
    match command {
        AccountsCommand::List { hive, agent, json } => {
            let bytes = client::request(api, Method::GET, &paths::linked_accounts(&hive, &agent), None, None).await?;
            if json {
                return pretty_answer(&bytes);
            }
            let listing: Vec<LinkedAccount> = client::answer(&bytes)?;
            let rows = listing.into_iter().map(|a| {
                let origin = if a.own { "own" } else { "linked" };
                [a.kind.as_str().to_owned(), a.name, a.host, a.user, origin.to_owned()]
            });
            Ok(grid(["KIND", "NAME", "HOST", "USER", "ORIGIN"], rows))
        }
        AccountsCommand::Add(args) => {
            let path = account_path(&args.hive, &args.agent, args.kind, args.name.as_deref())?;
            let url = || args.url.clone().ok_or_else(|| CtlError::Usage("give the server with --url URL".into()));
            let token = read_token(&args.token_file)?;
            let user = args.user.clone();
            let body = match args.kind {
                AccountKind::Matrix => client::body(&MatrixAccountBody {
                    homeserver: url()?,
                    user_id: user,
                    access_token: token,
                    device_id: args.device_id.clone(),
                }),
                AccountKind::Forge => client::body(&ForgeAccountBody { url: url()?, username: user, token }),
                AccountKind::Github => client::body(&GithubAccountBody { login: user, token }),
            };
            let bytes = client::request(api, Method::PUT, &path, None, Some(body)).await?;
            if args.json {
                return pretty_answer(&bytes);
            }
            let answer: LinkChanged = client::answer(&bytes)?;
            Ok(format!(
                "linked; delivery to the agent: job {} (swarmctl jobs --agent {})\n",
                answer.delivery, args.agent
            ))
        }
        AccountsCommand::Rm { hive, agent, kind, name, revoke, json } => {
            if revoke && kind != AccountKind::Matrix {
                return Err(CtlError::Usage("--revoke applies to matrix accounts only".into()));
            }
            let mut path = account_path(&hive, &agent, kind, name.as_deref())?;
            if revoke {
                path.push_str("?revoke=true");
            }
            let bytes = client::request(api, Method::DELETE, &path, None, None).await?;
            if json {
                return pretty_answer(&bytes);
            }
            let answer: LinkChanged = client::answer(&bytes)?;
            let what = if revoke { "token logged out and account unlinked" } else { "unlinked" };
            Ok(format!("{what}; delivery to the agent: job {}\n", answer.delivery))
        }
    }
}
