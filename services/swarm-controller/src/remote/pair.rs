//! `swarm-controller pair CODE`: makes this controller a host of a control plane, once. The
//! identity it writes (mode 0600) is what the daemon then holds the link with.

use std::path::{Path, PathBuf};

use hyperhive_control_link::{DeviceName, Identity, pair_client};
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::code::Code;

/// The host's name when neither `--name` nor the code gives one.
pub const DEFAULT_NAME: &str = "swarm-controller";

/// The identity's file name in the state directory.
pub const IDENTITY_FILE: &str = "control-identity.json";

/// Where `pair` writes and the daemon looks: `--identity`, else `SWARM_CONTROL_IDENTITY`, else
/// `control-identity.json` in `SWARM_STATE_DIR`.
///
/// # Errors
/// When none of them is set.
pub fn identity_path(flag: Option<&Path>, lookup: impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    if let Some(path) = flag {
        return Ok(path.to_owned());
    }
    if let Some(path) = lookup(super::vars::CONTROL_IDENTITY).filter(|p| !p.trim().is_empty()) {
        return Ok(PathBuf::from(path));
    }
    match lookup(crate::config::vars::STATE_DIR).filter(|p| !p.trim().is_empty()) {
        Some(dir) => Ok(Path::new(&dir).join(IDENTITY_FILE)),
        None => Err(format!(
            "where to keep the identity? set SWARM_STATE_DIR (it goes in {IDENTITY_FILE} there), \
             SWARM_CONTROL_IDENTITY or --identity FILE"
        )),
    }
}

/// Redeems the host code `code` as `name` (see [`DeviceName`]) and writes the identity to `path` (which must not
/// exist). Returns the identity written.
///
/// # Errors
/// A line saying what is wrong: a client code, an existing file, a refused or failed pairing.
pub async fn pair(code: &str, name: DeviceName<'_>, path: &Path) -> Result<Identity, String> {
    let code = code.trim();
    let parsed = Code::parse(code).map_err(|e| format!("that is not a pairing code: {e}"))?;
    if parsed.kind != DeviceKind::Host {
        return Err(
            "that is a client code; the controller pairs as a host: make one with `agents-control code --host`".into(),
        );
    }
    if path.exists() {
        return Err(format!(
            "{} exists: this controller is paired already. To pair again, forget the old host \
             (`agents-control forget DEVICE_ID`), delete the file and run pair with a new code",
            path.display()
        ));
    }
    let identity = pair_client::pair(code, name).await.map_err(|e| e.to_string())?;
    identity.save(path).map_err(|e| e.to_string())?;
    Ok(identity)
}

/// The identity the daemon holds the link with: it must be a host's, readable by nobody else.
///
/// # Errors
/// What is wrong with the file.
pub fn load_host_identity(path: &Path) -> Result<Identity, String> {
    let identity = Identity::load(path).map_err(|e| e.to_string())?;
    if identity.kind != DeviceKind::Host {
        return Err(format!(
            "{} is a client's identity; the controller needs a host's: pair it with `swarm-controller pair CODE` \
             (a code from `agents-control code --host`)",
            path.display()
        ));
    }
    Ok(identity)
}
