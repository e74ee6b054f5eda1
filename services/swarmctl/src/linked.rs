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
use super::format::{grid, pretty_answer};
use super::hives::{agent_of, hive_of};

/// `swarmctl accounts ...`.
#[derive(Debug, Subcommand)]
pub enum AccountsCommand {
    /// The agent's own matrix account (`main`) and its linked accounts: kind, name, host and
    /// user, never a credential.
    List {
        /// AGENT (its hive is read from the roster), or HIVE AGENT.
        #[arg(num_args = 1..=2, value_name = "[HIVE] AGENT", required = true)]
        words: Vec<String>,
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
        /// [HIVE] AGENT KIND [NAME]: KIND is matrix, forge or github; NAME the matrix account name or
        /// forge label (none for github).
        #[arg(num_args = 2..=4, value_name = "[HIVE] AGENT KIND [NAME]", required = true)]
        words: Vec<String>,
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

/// `swarmctl accounts add [HIVE] AGENT KIND [NAME] ...`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// [HIVE] AGENT KIND [NAME]: KIND is matrix, forge or github; NAME the matrix account name or
    /// forge label (none for github). Without HIVE the agent's hive is read from the roster.
    #[arg(num_args = 2..=4, value_name = "[HIVE] AGENT KIND [NAME]", required = true)]
    pub words: Vec<String>,
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

/// An agent's account as the words name it: `[HIVE] AGENT KIND [NAME]`. HIVE is there when the
/// second word is not a kind (so an agent called matrix, forge or github is named without it).
#[derive(Debug, PartialEq, Eq)]
struct Named {
    hive: Option<HiveName>,
    agent: AgentName,
    kind: AccountKind,
    name: Option<String>,
}

fn named(words: &[String]) -> Result<Named, CtlError> {
    let kind_at = if words.get(1).is_some_and(|w| AccountKind::from_str(w, false).is_ok()) { 1 } else { 2 };
    if words.len() <= kind_at || words.len() > kind_at + 2 {
        return Err(CtlError::Usage(format!(
            "{} words: name the account as [HIVE] AGENT KIND [NAME], KIND one of matrix, forge, github",
            words.len()
        )));
    }
    let (hive, agent) = agent_of(&words[..kind_at])?;
    let kind = AccountKind::from_str(&words[kind_at], false).map_err(|_| {
        CtlError::Usage(format!("{:?} is not a kind of account: matrix, forge or github", words[kind_at]))
    })?;
    Ok(Named { hive, agent, kind, name: words.get(kind_at + 1).cloned() })
}

fn account_path(hive: &HiveName, agent: &AgentName, kind: AccountKind, name: Option<&str>) -> Result<String, CtlError> {
    match (kind, name) {
        (AccountKind::Github, None) => Ok(paths::github_account(hive, agent)),
        (AccountKind::Github, Some(_)) => Err(CtlError::Usage("a github account has no name: leave NAME out".into())),
        (AccountKind::Matrix, Some(n)) => Ok(paths::matrix_account(hive, agent, segment(n)?)),
        (AccountKind::Forge, Some(n)) => Ok(paths::forge_account(hive, agent, segment(n)?)),
        (_, None) => {
            Err(CtlError::Usage("name the account: swarmctl accounts add [HIVE] AGENT matrix|forge NAME ...".into()))
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
        AccountsCommand::List { words, json } => {
            let (hive, agent) = agent_of(&words)?;
            let hive = hive_of(api, hive, &agent).await?;
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
            let Named { hive, agent, kind, name } = named(&args.words)?;
            let path = account_path(&hive_of(api, hive, &agent).await?, &agent, kind, name.as_deref())?;
            let url = || args.url.clone().ok_or_else(|| CtlError::Usage("give the server with --url URL".into()));
            let token = read_token(&args.token_file)?;
            let user = args.user.clone();
            let body = match kind {
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
            Ok(format!("linked; delivery to the agent: job {} (swarmctl jobs --agent {})\n", answer.delivery, agent))
        }
        AccountsCommand::Rm { words, revoke, json } => {
            let Named { hive, agent, kind, name } = named(&words)?;
            if revoke && kind != AccountKind::Matrix {
                return Err(CtlError::Usage("--revoke applies to matrix accounts only".into()));
            }
            let mut path = account_path(&hive_of(api, hive, &agent).await?, &agent, kind, name.as_deref())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn an_account_is_named_with_or_without_its_hive() {
        let (h1, alpha) = (HiveName::parse("h1").unwrap(), AgentName::parse("alpha").unwrap());
        let named_as = |hive: Option<&HiveName>, kind, name: Option<&str>| Named {
            hive: hive.cloned(),
            agent: alpha.clone(),
            kind,
            name: name.map(str::to_owned),
        };
        assert_eq!(named(&words("alpha matrix ops")).unwrap(), named_as(None, AccountKind::Matrix, Some("ops")));
        assert_eq!(named(&words("alpha github")).unwrap(), named_as(None, AccountKind::Github, None));
        assert_eq!(
            named(&words("h1 alpha forge work")).unwrap(),
            named_as(Some(&h1), AccountKind::Forge, Some("work"))
        );
        assert_eq!(named(&words("h1 alpha github")).unwrap(), named_as(Some(&h1), AccountKind::Github, None));
        for (bad, says) in [
            ("alpha", "1 words"),
            ("h1 alpha", "2 words"),
            ("alpha matrix ops extra", "4 words"),
            ("h1 alpha telegram x", "not a kind of account"),
            ("H1 alpha matrix ops", "hive"),
            ("Alpha matrix ops", "agent"),
        ] {
            let err = named(&words(bad)).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
        assert_eq!(agent_of(&words("alpha")).unwrap(), (None, alpha.clone()));
        assert_eq!(agent_of(&words("h1 alpha")).unwrap(), (Some(h1), alpha));
    }
}
