//! Retargeting a topology file at other management endpoints (the emulator).
//!
//! `vclos emu serve --write-topology` uses this so every device-facing
//! command can be aimed at the emulated fabric with the same file shape:
//! addresses and ports change, credentials stay references (a username and an
//! environment variable), never inline secrets.

use std::collections::BTreeMap;

use super::error::TopologyError;
use super::file::{FileCredential, FileMgmt, FileTopology, HostKeyPolicy};

/// Where a device now listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

/// The credential every retargeted device uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialRef {
    pub name: String,
    pub username: String,
    /// Environment variable holding the password.
    pub password_env: String,
}

/// Rewrite `text` (a valid topology file) so each managed device named in
/// `targets` points at its target, uses `credential`, and has its host key
/// checked against `known_hosts`. Devices not in `targets` keep their endpoint.
pub fn retarget(
    file: &str,
    text: &str,
    targets: &BTreeMap<String, Target>,
    credential: &CredentialRef,
    known_hosts: Option<&str>,
) -> Result<String, TopologyError> {
    let mut raw: FileTopology = super::build::parse_file(file, text)?;
    let fix = |name: &str, m: &mut FileMgmt| {
        if let Some(t) = targets.get(name) {
            m.host = t.host.clone();
            m.port = Some(t.port.into());
            m.credential = credential.name.clone();
            m.host_key = HostKeyPolicy::Verify;
        }
    };
    for c in &mut raw.chassis {
        fix(&c.name, &mut c.mgmt);
    }
    for l in &mut raw.leaves {
        if let Some(m) = l.mgmt.as_mut() {
            fix(&l.name, m);
        }
    }
    for s in &mut raw.spines {
        if let Some(m) = s.mgmt.as_mut() {
            fix(&s.name, m);
        }
    }
    for o in &mut raw.ocs {
        fix(&o.name, &mut o.mgmt);
    }
    raw.credentials.insert(
        credential.name.clone(),
        FileCredential {
            username: credential.username.clone(),
            password_env: Some(credential.password_env.clone()),
            password_file: None,
            password: None,
        },
    );
    if let Some(k) = known_hosts {
        raw.known_hosts = Some(k.to_string());
    }
    let body = serde_yaml_ng::to_string(&raw).map_err(|e| TopologyError::Parse {
        file: file.into(),
        line: None,
        message: format!("cannot write the retargeted topology: {e}"),
    })?;
    Ok(format!(
        "# {} retargeted at the vclos emulator by `vclos emu serve`.\n\
         # The password is read from ${}.\n{body}",
        file, credential.password_env
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retargets_endpoints_and_keeps_secrets_out() {
        let text = include_str!("../../../topologies/testbed-ocs.yaml");
        let targets = BTreeMap::from([
            (
                "leaf1".to_string(),
                Target {
                    host: "127.0.0.1".into(),
                    port: 40001,
                },
            ),
            (
                "spine2".to_string(),
                Target {
                    host: "127.0.0.1".into(),
                    port: 40002,
                },
            ),
            (
                "ocs1".to_string(),
                Target {
                    host: "127.0.0.1".into(),
                    port: 40003,
                },
            ),
        ]);
        let cred = CredentialRef {
            name: "emulator".into(),
            username: "admin".into(),
            password_env: "VCLOS_EMU_PASSWORD".into(),
        };
        let out = retarget("testbed-ocs.yaml", text, &targets, &cred, Some("/tmp/kh")).unwrap();
        let t = super::super::from_str("out.yaml", &out).unwrap();
        let dev = |n: &str| t.device(t.device_id(n).unwrap()).mgmt.clone();
        assert_eq!(
            (dev("leaf1").port, dev("leaf1").credential.as_str()),
            (40001, "emulator")
        );
        assert_eq!(dev("spine2").port, 40002);
        assert_eq!(dev("ocs1").port, 40003);
        assert_eq!(
            dev("leaf2").port,
            22,
            "devices without a target keep theirs"
        );
        assert_eq!(t.known_hosts.as_deref(), Some("/tmp/kh"));
        assert!(!out.contains("password:"), "{out}");
    }
}
