//! Configuration: every variable, as clap arguments that read the environment, and
//! the checks that turn their text into typed settings. Every error names the variable (and the
//! flag mirroring it) and says what a good value looks like; a command's settings are checked
//! together ([`hyperhive_daemon::settings::Check`]), so every bad one is reported at once.

use crate::codes::Issuer;
use crate::key::{ControlKey, KeyError};
use clap::Args;
use hyperhive_control_proto::encoding;
use hyperhive_daemon::settings::{Check, Problem, Problems};
use hyperhive_object_store::{S3Settings, StoreUrl};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A setting that is missing or malformed; the message is the one line the copy stops with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("AGENTS_STORE (--store): {0}")]
    Store(#[from] hyperhive_object_store::StoreUrlError),
    #[error("{variable}: {reason}")]
    Invalid { variable: &'static str, reason: String },
    #[error(transparent)]
    Key(#[from] KeyError),
}

impl ConfigError {
    /// The variable the setting is read from.
    pub fn variable(&self) -> &'static str {
        match self {
            ConfigError::Store(_) => "AGENTS_STORE",
            ConfigError::Invalid { variable, .. } => variable,
            ConfigError::Key(_) => "AGENTS_CONTROL_KEY",
        }
    }
}

impl From<ConfigError> for Problem {
    fn from(error: ConfigError) -> Self {
        // Every message already starts with its variable, and keeps its words.
        Problem::line(error.variable(), error.to_string())
    }
}

/// The value, or `None` with the error recorded in `check`.
pub fn checked<T>(check: &mut Check, result: Result<T, ConfigError>) -> Option<T> {
    check.ok(result.map_err(Problem::from))
}

fn invalid(variable: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { variable, reason: reason.into() }
}

/// Where the store is and how to reach it.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// The store: s3://bucket/prefix or file:///path.
    #[arg(id = "store_url", long = "store", env = "AGENTS_STORE", value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub s3: S3Args,
}

/// Settings for s3:// stores (credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
/// or the rest of the AWS SDK's usual chain).
#[derive(Debug, Clone, Args)]
pub struct S3Args {
    /// The S3 endpoint, when it is not Amazon S3 (MinIO, R2, moto...), e.g. http://minio:9000.
    #[arg(long = "store-endpoint", env = "AGENTS_STORE_ENDPOINT", value_name = "URL")]
    pub endpoint: Option<String>,
    /// The bucket's region.
    #[arg(long = "store-region", env = "AGENTS_STORE_REGION", default_value = "us-east-1", value_name = "REGION")]
    pub region: String,
    /// 1 for path-style addresses (MinIO and most S3-compatible servers), 0 for virtual-host style.
    #[arg(long = "store-path-style", env = "AGENTS_STORE_PATH_STYLE", default_value = "0", value_name = "0|1")]
    pub path_style: String,
}

impl S3Args {
    pub fn settings(&self) -> Result<S3Settings, ConfigError> {
        let endpoint = (self.endpoint.as_deref(), "AGENTS_STORE_ENDPOINT (--store-endpoint)");
        let region = (self.region.as_str(), "AGENTS_STORE_REGION (--store-region)");
        let path_style = (self.path_style.as_str(), "AGENTS_STORE_PATH_STYLE (--store-path-style)");
        s3_settings(endpoint, region, path_style)
    }
}

/// Checks the three S3 settings; each comes with the name (variable and flag) an error shows.
pub fn s3_settings(
    (endpoint, endpoint_name): (Option<&str>, &'static str),
    (region, region_name): (&str, &'static str),
    (path_style, path_style_name): (&str, &'static str),
) -> Result<S3Settings, ConfigError> {
    let endpoint = match endpoint.map(str::trim) {
        None | Some("") => None,
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => Some(url.to_owned()),
        Some(url) => return Err(invalid(endpoint_name, format!("{url:?} is not an http:// or https:// URL"))),
    };
    let region = region.trim();
    if region.is_empty() || !region.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(invalid(region_name, format!("{region:?} is not a region name such as us-east-1")));
    }
    let path_style = parse_flag(path_style_name, path_style)?;
    Ok(S3Settings { endpoint, region: region.to_owned(), path_style, credentials: None })
}

impl StoreArgs {
    pub fn url(&self) -> Result<StoreUrl, ConfigError> {
        Ok(StoreUrl::parse(self.url.as_deref().unwrap_or(""))?)
    }
}

/// The control key: exactly one of the two.
#[derive(Debug, Clone, Args)]
pub struct KeyArgs {
    /// A file holding the 32-byte control key (raw bytes). Keep it mode 0600.
    #[arg(id = "key_file", long = "key-file", env = "AGENTS_CONTROL_KEY_FILE", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The control key as base64url text. Prefer the environment over this flag: command lines
    /// are visible to every user of the machine.
    #[arg(long = "key", env = "AGENTS_CONTROL_KEY", hide_env_values = true, value_name = "BASE64URL")]
    pub text: Option<String>,
}

impl KeyArgs {
    pub fn load(&self) -> Result<ControlKey, ConfigError> {
        Ok(ControlKey::load(self.file.as_deref(), self.text.as_deref())?)
    }
}

/// What every code carries about the control plane.
#[derive(Debug, Clone, Args)]
pub struct PublicArgs {
    /// The one public address every device is given, e.g. https://agents.example.com.
    #[arg(id = "control_url", long = "control-url", env = "AGENTS_CONTROL_URL", value_name = "URL")]
    pub url: Option<String>,
    /// The pin (base64url SHA-256 of the SubjectPublicKeyInfo) of a self-signed proxy
    /// certificate; every code then carries it. See `agents-control pin --cert FILE`.
    // A base64url pin starts with `-` one time in 64: it is a value, not a flag.
    #[arg(long = "pin", env = "AGENTS_CONTROL_PIN", value_name = "PIN", allow_hyphen_values = true)]
    pub pin: Option<String>,
    /// 1 to accept an http:// AGENTS_CONTROL_URL: codes then send devices' pairing and links in
    /// the clear. Only for a control plane on this machine (demos, tests).
    #[arg(long = "allow-http", env = "AGENTS_CONTROL_ALLOW_HTTP", default_value = "0", value_name = "0|1")]
    pub allow_http: String,
}

impl PublicArgs {
    pub fn control_url(&self) -> Result<String, ConfigError> {
        let allow_http = parse_flag("AGENTS_CONTROL_ALLOW_HTTP (--allow-http)", &self.allow_http)?;
        let url = parse_control_url(self.url.as_deref())?;
        if url.starts_with("http://") && !allow_http {
            return Err(invalid(
                "AGENTS_CONTROL_URL (--control-url)",
                format!(
                    "{url:?} is plain http: every code would send its devices' pairing and messages in the clear. \
                     Give the load balancer's https:// address, or set AGENTS_CONTROL_ALLOW_HTTP=1 for a control \
                     plane used only on this machine"
                ),
            ));
        }
        Ok(url)
    }

    pub fn pin(&self) -> Result<Option<String>, ConfigError> {
        parse_pin(self.pin.as_deref())
    }
}

/// What `serve` and `code` both need: the store, the key, and what every code carries.
#[derive(Debug, Clone, Args)]
pub struct IssuerArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub key: KeyArgs,
    #[command(flatten)]
    pub public: PublicArgs,
}

impl IssuerArgs {
    /// Checks every one of these settings (store first, so its error comes first), recording
    /// each bad one, and returns what codes are issued with.
    pub fn check(&self, check: &mut Check) -> Option<Issuer> {
        let url = checked(check, self.store.url());
        let s3 = checked(check, self.store.s3.settings());
        let key = checked(check, self.key.load());
        let control_url = checked(check, self.public.control_url());
        let pin = checked(check, self.public.pin());
        url?;
        s3?;
        Some(Issuer { key: key?, control_url: control_url?, pin: pin? })
    }

    /// [`IssuerArgs::check`] on its own.
    ///
    /// # Errors
    /// Every bad setting, one line each.
    pub fn issuer(&self) -> Result<Issuer, Problems> {
        let mut check = Check::default();
        let issuer = self.check(&mut check);
        check.finish(|| issuer).map(|loaded| loaded.config)
    }
}

pub fn parse_control_url(text: Option<&str>) -> Result<String, ConfigError> {
    const VARIABLE: &str = "AGENTS_CONTROL_URL (--control-url)";
    let text = text.map(str::trim).unwrap_or("");
    if text.is_empty() {
        return Err(invalid(VARIABLE, "not set: give the public address devices use, e.g. https://agents.example.com"));
    }
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or_else(|| invalid(VARIABLE, format!("{text:?} must start with https:// or http://")))?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(VARIABLE, format!("{text:?} has no host, or contains spaces")));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

pub fn parse_pin(text: Option<&str>) -> Result<Option<String>, ConfigError> {
    match text.map(str::trim) {
        None | Some("") => Ok(None),
        Some(pin) => {
            encoding::decode_exact::<32>(pin).map_err(|e| {
                invalid(
                    "AGENTS_CONTROL_PIN (--pin)",
                    format!("{e}; a pin is the base64url SHA-256 printed by `agents-control pin --cert FILE`"),
                )
            })?;
            Ok(Some(pin.trim_end_matches('=').to_owned()))
        }
    }
}

pub fn parse_listen(text: &str) -> Result<SocketAddr, ConfigError> {
    text.trim().parse().map_err(|_| {
        invalid("AGENTS_CONTROL_LISTEN (--listen)", format!("{text:?} is not an address:port such as 0.0.0.0:8791"))
    })
}

/// A 0|1 setting (`true`/`false` and empty are accepted too).
pub fn parse_flag(variable: &'static str, text: &str) -> Result<bool, ConfigError> {
    match text.trim() {
        "1" | "true" => Ok(true),
        "0" | "false" | "" => Ok(false),
        other => Err(invalid(variable, format!("{other:?} is not 1 or 0"))),
    }
}

/// What a copy lets any one party cost it (`docs/control-plane/security.md`).
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// The most connections a copy holds at once (devices, peers, HTTP requests). Kept below the
    /// process's open-file limit whatever it is set to.
    #[arg(long, env = "AGENTS_CONTROL_MAX_CONNECTIONS", default_value = "50000", value_name = "N")]
    pub max_connections: String,
    /// The most connections from one address (one IPv6 /64) that have not yet proven to be a
    /// paired device; a device's link stops counting once its handshake passes. Behind a load
    /// balancer every connection comes from it: allow for the largest burst of reconnections.
    #[arg(long, env = "AGENTS_CONTROL_MAX_CONNECTIONS_PER_ADDRESS", default_value = "1000", value_name = "N")]
    pub max_connections_per_address: String,
    /// How long a request's head, then its body, may take to arrive.
    #[arg(long, env = "AGENTS_CONTROL_REQUEST_TIMEOUT", default_value = "10s", value_name = "DURATION")]
    pub request_timeout: String,
    /// Store lookups per second the whole copy makes for requests that have proven nothing yet
    /// (a hello from a device this copy has not seen, a pair request).
    #[arg(long, env = "AGENTS_CONTROL_LOOKUP_RATE", default_value = "50", value_name = "N")]
    pub lookup_rate: String,
    /// The same, for one address.
    #[arg(long, env = "AGENTS_CONTROL_LOOKUP_RATE_PER_ADDRESS", default_value = "5", value_name = "N")]
    pub lookup_rate_per_address: String,
    /// The most codes a client may have waiting to be redeemed (`agents-control code` is not
    /// held to it).
    #[arg(long, env = "AGENTS_CONTROL_MAX_CODES_PER_CLIENT", default_value = "20", value_name = "N")]
    pub max_codes_per_client: String,
}

impl LimitArgs {
    /// Checks every limit, recording each bad one.
    pub fn check(&self, check: &mut Check) -> Option<crate::limits::Limits> {
        fn count(variable: &'static str, text: &str) -> Result<usize, ConfigError> {
            match text.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(invalid(variable, format!("{text:?} is not a whole number above zero"))),
            }
        }
        let rate = |variable, text| {
            count(variable, text)
                .and_then(|n| u32::try_from(n).map_err(|_| invalid(variable, format!("{n} is too large"))))
        };
        let request_timeout =
            parse_duration("AGENTS_CONTROL_REQUEST_TIMEOUT (--request-timeout)", &self.request_timeout).and_then(|t| {
                if t.is_zero() {
                    Err(invalid("AGENTS_CONTROL_REQUEST_TIMEOUT (--request-timeout)", "must be more than zero"))
                } else {
                    Ok(t)
                }
            });
        let max_connections = count("AGENTS_CONTROL_MAX_CONNECTIONS (--max-connections)", &self.max_connections);
        let max_unproven_per_address = count(
            "AGENTS_CONTROL_MAX_CONNECTIONS_PER_ADDRESS (--max-connections-per-address)",
            &self.max_connections_per_address,
        );
        let lookups_per_second = rate("AGENTS_CONTROL_LOOKUP_RATE (--lookup-rate)", &self.lookup_rate);
        let lookups_per_second_per_address =
            rate("AGENTS_CONTROL_LOOKUP_RATE_PER_ADDRESS (--lookup-rate-per-address)", &self.lookup_rate_per_address);
        let max_codes_per_client =
            count("AGENTS_CONTROL_MAX_CODES_PER_CLIENT (--max-codes-per-client)", &self.max_codes_per_client);
        let max_connections = checked(check, max_connections);
        let max_unproven_per_address = checked(check, max_unproven_per_address);
        let request_timeout = checked(check, request_timeout);
        let lookups_per_second = checked(check, lookups_per_second);
        let lookups_per_second_per_address = checked(check, lookups_per_second_per_address);
        let max_codes_per_client = checked(check, max_codes_per_client);
        Some(crate::limits::Limits {
            max_connections: max_connections?,
            max_unproven_per_address: max_unproven_per_address?,
            request_timeout: request_timeout?,
            lookups_per_second: lookups_per_second?,
            lookups_per_second_per_address: lookups_per_second_per_address?,
            max_codes_per_client: max_codes_per_client?,
        })
    }

    /// [`LimitArgs::check`] on its own.
    ///
    /// # Errors
    /// Every bad limit, one line each.
    pub fn limits(&self) -> Result<crate::limits::Limits, Problems> {
        let mut check = Check::default();
        let limits = self.check(&mut check);
        check.finish(|| limits).map(|loaded| loaded.config)
    }
}

/// The longest a code may live: a code is a bearer secret.
pub const MAX_CODE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Parses `--ttl` (humantime: `10m`, `2h`, `90s`): more than zero, at most 24 hours.
pub fn parse_ttl(text: &str) -> Result<Duration, ConfigError> {
    let ttl = humantime::parse_duration(text.trim())
        .map_err(|e| invalid("--ttl", format!("{text:?} is not a duration like 10m or 2h ({e})")))?;
    if ttl.is_zero() {
        return Err(invalid("--ttl", "must be more than zero"));
    }
    if ttl > MAX_CODE_TTL {
        return Err(invalid("--ttl", format!("{text} is longer than the maximum, 24h")));
    }
    Ok(ttl)
}

/// Parses a plain duration flag (humantime), naming the flag on error.
pub fn parse_duration(flag: &'static str, text: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(text.trim())
        .map_err(|e| invalid(flag, format!("{text:?} is not a duration like 2s ({e})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_starting_with_a_hyphen_is_a_value_not_a_flag() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Command {
            #[command(flatten)]
            public: PublicArgs,
        }
        let parsed = Command::try_parse_from(["code", "--pin", "-Cq4iD2ZxY"]).unwrap();
        assert_eq!(parsed.public.pin.as_deref(), Some("-Cq4iD2ZxY"));
    }

    fn limit_args() -> LimitArgs {
        LimitArgs {
            max_connections: "50000".into(),
            max_connections_per_address: "1000".into(),
            request_timeout: "10s".into(),
            lookup_rate: "50".into(),
            lookup_rate_per_address: "5".into(),
            max_codes_per_client: "20".into(),
        }
    }

    #[test]
    fn the_default_limits_are_the_documented_ones_and_bad_ones_are_named() {
        assert_eq!(limit_args().limits().unwrap(), crate::limits::Limits::default());
        for (change, needle) in [
            (
                (|a: &mut LimitArgs| a.max_connections = "0".into()) as fn(&mut LimitArgs),
                "AGENTS_CONTROL_MAX_CONNECTIONS",
            ),
            (|a| a.max_connections_per_address = "many".into(), "AGENTS_CONTROL_MAX_CONNECTIONS_PER_ADDRESS"),
            (|a| a.request_timeout = "0s".into(), "AGENTS_CONTROL_REQUEST_TIMEOUT"),
            (|a| a.lookup_rate = "-1".into(), "AGENTS_CONTROL_LOOKUP_RATE"),
            (|a| a.lookup_rate_per_address = "99999999999".into(), "AGENTS_CONTROL_LOOKUP_RATE_PER_ADDRESS"),
            (|a| a.max_codes_per_client = "".into(), "AGENTS_CONTROL_MAX_CODES_PER_CLIENT"),
        ] {
            let mut args = limit_args();
            change(&mut args);
            let message = args.limits().unwrap_err().to_string();
            assert!(message.starts_with(needle), "{message}");
        }
    }

    fn s3(endpoint: Option<&str>, region: &str, path_style: &str) -> S3Args {
        S3Args { endpoint: endpoint.map(str::to_owned), region: region.into(), path_style: path_style.into() }
    }

    #[test]
    fn a_missing_store_shows_both_forms() {
        let args = StoreArgs { url: None, s3: s3(None, "us-east-1", "0") };
        let message = args.url().unwrap_err().to_string();
        assert!(message.starts_with("AGENTS_STORE"), "{message}");
        assert!(message.contains("s3://bucket/prefix") && message.contains("file:///"));
    }

    #[test]
    fn s3_settings_are_checked_and_named() {
        let good = s3(Some("http://127.0.0.1:9000"), "eu-west-1", "1").settings().unwrap();
        assert!(good.path_style && good.endpoint.is_some());
        for (args, needle) in [
            (s3(Some("minio:9000"), "us-east-1", "1"), "AGENTS_STORE_ENDPOINT"),
            (s3(None, "us east", "1"), "AGENTS_STORE_REGION"),
            (s3(None, "us-east-1", "yes"), "AGENTS_STORE_PATH_STYLE"),
        ] {
            let message = args.settings().unwrap_err().to_string();
            assert!(message.contains(needle), "{message}");
        }
    }

    #[test]
    fn control_url_pin_listen_and_ttl_are_checked() {
        assert_eq!(parse_control_url(Some("https://a.example/")).unwrap(), "https://a.example");
        for bad in [None, Some(""), Some("a.example"), Some("https://"), Some("https://a b")] {
            let message = parse_control_url(bad).unwrap_err().to_string();
            assert!(message.starts_with("AGENTS_CONTROL_URL"), "{message}");
        }
        assert_eq!(parse_pin(None).unwrap(), None);
        let pin = encoding::encode(&[1; 32]);
        assert_eq!(parse_pin(Some(&pin)).unwrap(), Some(pin));
        assert!(parse_pin(Some("short")).unwrap_err().to_string().contains("AGENTS_CONTROL_PIN"));
        let public = |url: &str, allow: &str| PublicArgs { url: Some(url.into()), pin: None, allow_http: allow.into() };
        let message = public("http://127.0.0.1:8791", "0").control_url().unwrap_err().to_string();
        assert!(message.contains("AGENTS_CONTROL_ALLOW_HTTP=1") && message.contains("https://"), "{message}");
        assert_eq!(public("http://127.0.0.1:8791", "1").control_url().unwrap(), "http://127.0.0.1:8791");
        assert!(public("https://a.example", "0").control_url().is_ok());
        assert!(public("https://a.example", "yes").control_url().unwrap_err().to_string().contains("ALLOW_HTTP"));
        assert!(parse_listen("0.0.0.0:8791").is_ok());
        assert!(parse_listen("8791").unwrap_err().to_string().contains("AGENTS_CONTROL_LISTEN"));
        assert_eq!(parse_ttl("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_ttl("24h").unwrap(), MAX_CODE_TTL);
        for (bad, needle) in [("0s", "more than zero"), ("25h", "maximum"), ("soon", "duration")] {
            let message = parse_ttl(bad).unwrap_err().to_string();
            assert!(message.contains(needle) && message.contains("--ttl"), "{message}");
        }
    }

    #[test]
    fn every_bad_limit_is_reported_together() {
        let args = LimitArgs {
            max_connections: "0".into(),
            request_timeout: "soon".into(),
            max_codes_per_client: "".into(),
            ..limit_args()
        };
        let problems = args.limits().unwrap_err();
        let variables: Vec<&str> = problems.iter().map(Problem::variable).collect();
        assert_eq!(
            variables,
            [
                "AGENTS_CONTROL_MAX_CONNECTIONS (--max-connections)",
                "AGENTS_CONTROL_REQUEST_TIMEOUT (--request-timeout)",
                "AGENTS_CONTROL_MAX_CODES_PER_CLIENT (--max-codes-per-client)"
            ],
            "{problems}"
        );
    }
}
