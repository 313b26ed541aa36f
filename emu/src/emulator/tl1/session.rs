//! One TL1 session: the login gate, the verbs, and the replies.
//!
//! A [`Session`] turns command text into response text against an
//! [`OcsModel`]; it knows nothing of sockets, so tests and the rest of the
//! emulator can drive the OCS through exactly the code path a Telnet client
//! gets. Fault injection is consulted here for the same reason.
//!
//! DENY codes (standard TL1 codes, documented here because devices differ):
//!
//! | code | when |
//! |------|------|
//! | PLNA | any command but `ACT-USER` before login ("login not active") |
//! | PIUI | `ACT-USER` with a wrong user name or password |
//! | ICNV | unknown verb, or an unparseable one (binary garbage) |
//! | IISP | missing fields, missing `;`, line too long |
//! | IICT | missing or malformed ctag |
//! | IITA | TID given and not this OCS's name |
//! | IIAC | bad port: not a number, no such port, bad list or range |
//! | IDNV | a port patched to itself or named twice in one command |
//! | IPNV | unknown parameter (`RTRV-EQPT`) |
//! | SAIS | `ENT-PATCH` on a port already patched (disconnect it first) |
//! | SNVS | `DLT-PATCH` on a port that is not patched |
//! | SARB | the change would move a busy link (only idle links move) |
//! | SROF | a port is still switching, or an injected fault |
//!
//! Failed logins: each `ACT-USER` refused (`PIUI`) is answered only after
//! [`LOGIN_FAILURE_DELAY`] (200 ms, the SSH endpoints' `auth_rejection_time`),
//! and the [`MAX_LOGIN_FAILURES`]th failure in a row on one connection
//! (3) is answered, then the connection closed ([`Outcome::Close`]); a
//! successful `ACT-USER` starts the count again. So one connection tries at
//! most 3 passwords, and a client reconnecting to try more is held by the
//! OCS's session limit and the delay. The figures are the emulator's
//! choice: Telcordia GR-815-CORE asks network elements to act on repeated
//! failed logins with a settable threshold, and 3 is the usual default of
//! network elements and of login(1)-style terminals (it is also OpenSSH's
//! and many routers' default number of password prompts per connection).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::command::{self, Command};
use crate::emulator::faults::{Action, Faults};
use crate::emulator::ocs::{Change, OcsError, OcsModel};

pub use crate::emulator::Login;

/// What the transport should do with a command's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Send this response text.
    Reply(String),
    /// Close the connection without replying (injected fault).
    Drop,
    /// Send this response text, then close the connection (too many
    /// failed logins).
    Close(String),
}

/// Failed `ACT-USER`s in a row after which the connection is closed.
pub const MAX_LOGIN_FAILURES: u32 = 3;
/// How long a refused `ACT-USER` waits before its reply.
pub const LOGIN_FAILURE_DELAY: std::time::Duration = std::time::Duration::from_millis(200);

/// A TL1 session on one OCS.
#[derive(Debug)]
pub struct Session {
    model: Arc<OcsModel>,
    login: Arc<Login>,
    faults: Arc<Faults>,
    user: Option<String>,
    /// Failed `ACT-USER`s since the last successful one.
    failed_logins: u32,
}

struct Deny {
    code: &'static str,
    text: String,
}

fn deny(code: &'static str, text: impl Into<String>) -> Deny {
    Deny {
        code,
        text: text.into(),
    }
}

impl From<OcsError> for Deny {
    fn from(e: OcsError) -> Self {
        let code = match e {
            OcsError::NoSuchPort { .. } => "IIAC",
            OcsError::SelfPatch { .. } | OcsError::Repeated { .. } => "IDNV",
            OcsError::AlreadyPatched { .. } => "SAIS",
            OcsError::NotPatched { .. } => "SNVS",
            OcsError::Busy { .. } => "SARB",
            OcsError::Switching { .. } => "SROF",
        };
        deny(code, e.to_string())
    }
}

impl Session {
    pub fn new(model: Arc<OcsModel>, login: Arc<Login>, faults: Arc<Faults>) -> Self {
        Self {
            model,
            login,
            faults,
            user: None,
            failed_logins: 0,
        }
    }

    pub fn logged_in(&self) -> bool {
        self.user.is_some()
    }

    /// Execute one command (its final `;` optional) and produce the reply.
    /// Changes reply only after the switching delay has passed.
    pub async fn execute(&mut self, text: &str) -> Outcome {
        let text = text.trim();
        let text = text.strip_suffix(';').unwrap_or(text);
        let action = self.faults.on_command();
        let reply = match action {
            Action::Drop => return Outcome::Drop,
            Action::Fail => {
                let ctag = command::parse(text)
                    .map(|c| c.ctag)
                    .unwrap_or_else(|e| e.ctag.unwrap_or_default());
                self.deny_reply(&ctag, deny("SROF", "injected fault: command failed"))
            }
            Action::Proceed => match command::parse(text) {
                Err(e) => self.deny_reply(e.ctag.as_deref().unwrap_or("0"), deny(e.code, e.text)),
                Ok(cmd) => match self.dispatch(&cmd).await {
                    Ok(data) => self.compld(&cmd.ctag, &data),
                    Err(d) => self.deny_reply(&cmd.ctag, d),
                },
            },
        };
        let delay = self.faults.reply_delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if self.failed_logins >= MAX_LOGIN_FAILURES {
            tracing::warn!(device = %self.model.name(), failures = self.failed_logins,
                "tl1 login refused too often: closing the session");
            return Outcome::Close(reply);
        }
        Outcome::Reply(reply)
    }

    /// The autonomous message announcing that the logged-in user's session
    /// timed out (`A atag CANC`, the user, `/* Session Timeout: <uid> */`,
    /// as in the Wide Bank 28 DS3 TL1 manual's "Cancel User Session
    /// Message"); `None` when nobody is logged in. Logs the user out.
    pub fn timed_out(&mut self) -> Option<String> {
        let user = self.user.take()?;
        tracing::info!(device = %self.model.name(), user = %user, "tl1 session timed out");
        let mut out = self.header();
        out.push_str(&format!(
            "A  1 CANC\r\n   \"{user}\"\r\n   /* Session Timeout: {user} */\r\n;\r\n"
        ));
        Some(out)
    }

    /// A reply for input that never became a command (e.g. no `;`).
    pub fn framing_error(&self, text: &str) -> String {
        self.deny_reply("0", deny("IISP", text))
    }

    async fn dispatch(&mut self, cmd: &Command) -> Result<Vec<String>, Deny> {
        if !cmd.tid.is_empty() && !cmd.tid.eq_ignore_ascii_case(self.model.name()) {
            return Err(deny("IITA", "wrong target identifier"));
        }
        match cmd.verb.as_str() {
            "ACT-USER" => self.act_user(cmd).await,
            _ if self.user.is_none() => Err(deny("PLNA", "login not active: ACT-USER first")),
            "CANC-USER" => {
                self.user = None;
                tracing::info!(device = %self.model.name(), "tl1 logout");
                Ok(Vec::new())
            }
            "RTRV-PATCH" => self.rtrv_patch(&cmd.aid),
            "ENT-PATCH" => self.ent_patch(&cmd.aid).await,
            "DLT-PATCH" => self.dlt_patch(&cmd.aid).await,
            // The standard TL1 no-op (keep-alive): answers COMPLD, no data.
            "RTRV-HDR" => Ok(Vec::new()),
            "RTRV-NETYPE" => Ok(vec![format!(
                "\"VCLOS\",\"EMU-OCS-{}\",\"OPTICAL CIRCUIT SWITCH\",\"{}\"",
                self.model.port_count(),
                env!("CARGO_PKG_VERSION")
            )]),
            "RTRV-EQPT" => self.rtrv_eqpt(cmd),
            _ => Err(deny("ICNV", format!("unknown command {}", cmd.verb))),
        }
    }

    async fn act_user(&mut self, cmd: &Command) -> Result<Vec<String>, Deny> {
        // ACT-USER::<user>:<ctag>::<password>  -> rest = ["", password...]
        let password = cmd.rest.get(1..).map(|p| p.join(":")).unwrap_or_default();
        let password = password.trim_matches('"');
        let ok = cmd.aid == self.login.username && password == self.login.password;
        if ok {
            self.faults.count_login();
            tracing::info!(device = %self.model.name(), user = %cmd.aid, "tl1 login");
            self.user = Some(cmd.aid.clone());
            self.failed_logins = 0;
            Ok(Vec::new())
        } else {
            // Never log what was typed as a password.
            tracing::warn!(device = %self.model.name(), "tl1 login refused");
            self.failed_logins += 1;
            tokio::time::sleep(LOGIN_FAILURE_DELAY).await;
            let text = if self.failed_logins >= MAX_LOGIN_FAILURES {
                "invalid user name or password; too many failed logins: session closed"
            } else {
                "invalid user name or password"
            };
            Err(deny("PIUI", text))
        }
    }

    /// Map TL1 port numbers to model indices (a port is named by its number).
    fn ports(&self, aid: &str) -> Result<Vec<u16>, Deny> {
        let nums = command::port_list(aid).map_err(|m| deny("IIAC", m))?;
        nums.into_iter()
            .map(|n| {
                self.model
                    .port_index(&n.to_string())
                    .ok_or_else(|| deny("IIAC", format!("no port {n}")))
            })
            .collect()
    }

    fn patch_line(&self, (a, b): (u16, u16)) -> String {
        format!(
            "\"{},{}\"",
            self.model.port_name(a),
            self.model.port_name(b)
        )
    }

    fn rtrv_patch(&self, aid: &str) -> Result<Vec<String>, Deny> {
        let patches = self.model.patches();
        let wanted = if aid.is_empty() || aid.eq_ignore_ascii_case("ALL") {
            None
        } else {
            Some(self.ports(aid)?)
        };
        Ok(patches
            .into_iter()
            .filter(|(a, b)| {
                wanted
                    .as_ref()
                    .is_none_or(|w| w.contains(a) || w.contains(b))
            })
            .map(|p| self.patch_line(p))
            .collect())
    }

    fn commit_allowed(&self) -> Result<(), Deny> {
        match self.faults.on_commit() {
            Action::Proceed => Ok(()),
            _ => Err(deny("SROF", "injected fault: change refused")),
        }
    }

    async fn ent_patch(&self, aid: &str) -> Result<Vec<String>, Deny> {
        // `a,b`, or element-wise lists `a&b,c&d` (a->c, b->d).
        let Some((ins, outs)) = aid.split_once(',') else {
            return Err(deny("IIAC", "expected ENT-PATCH::<in>,<out>"));
        };
        let (ins, outs) = (self.ports(ins)?, self.ports(outs)?);
        if ins.len() != outs.len() {
            return Err(deny("IIAC", "port lists differ in length"));
        }
        self.commit_allowed()?;
        let pairs = ins.into_iter().zip(outs).collect();
        self.model
            .apply(Change::Connect {
                pairs,
                replace: false,
            })
            .await?;
        Ok(Vec::new())
    }

    async fn dlt_patch(&self, aid: &str) -> Result<Vec<String>, Deny> {
        let change = if aid.trim().eq_ignore_ascii_case("ALL") {
            Change::DisconnectAll
        } else {
            Change::Disconnect(self.ports(aid)?)
        };
        self.commit_allowed()?;
        self.model.apply(change).await?;
        Ok(Vec::new())
    }

    fn rtrv_eqpt(&self, cmd: &Command) -> Result<Vec<String>, Deny> {
        if !cmd.aid.eq_ignore_ascii_case("SYSTEM") {
            return Err(deny("IIAC", "only SYSTEM is supported"));
        }
        let params: Vec<_> = cmd.rest.iter().flat_map(|f| command::params(f)).collect();
        match params.as_slice() {
            [(k, v)] if k == "PARAMETER" && v.eq_ignore_ascii_case("SIZE") => {
                // NxM convention: ports 1..N and N+1..N+M. The emulator still
                // allows same-side patches (the two-leaf OCS-vClos case).
                let n = self.model.port_count();
                Ok(vec![format!("\"SYSTEM:SIZE={}x{}\"", n / 2, n - n / 2)])
            }
            _ => Err(deny("IPNV", "expected PARAMETER=SIZE")),
        }
    }

    fn compld(&self, ctag: &str, data: &[String]) -> String {
        let mut out = self.header();
        out.push_str(&format!("M  {ctag} COMPLD\r\n"));
        for d in data {
            out.push_str(&format!("   {d}\r\n"));
        }
        out.push_str(";\r\n");
        out
    }

    fn deny_reply(&self, ctag: &str, d: Deny) -> String {
        let text = d.text.replace("*/", "* /").replace(['\r', '\n'], " ");
        let mut out = self.header();
        out.push_str(&format!(
            "M  {ctag} DENY\r\n   {}\r\n   /* {text} */\r\n;\r\n",
            d.code
        ));
        out
    }

    fn header(&self) -> String {
        format!(
            "\r\n\n   {} {}\r\n",
            self.model.name(),
            tl1_timestamp(SystemTime::now())
        )
    }
}

/// `YY-MM-DD HH:MM:SS` in UTC, the TL1 header format.
fn tl1_timestamp(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{:02}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        y % 100,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (proleptic calendar; the
/// usual era-based conversion, valid for every u64 day count we can meet).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::emulator::busy::StaticBusy;
    use crate::topology::{DeviceId, Ocs, OcsId};

    fn session() -> Session {
        let ocs = Ocs {
            name: "ocs1".into(),
            device: DeviceId(0),
            ports: (1..=4).map(|i| i.to_string().into()).collect(),
            port_peer: vec![None; 4],
            patches: vec![],
        };
        let model = OcsModel::new(OcsId(0), &ocs, Arc::new(StaticBusy::new()));
        Session::new(
            Arc::new(model),
            Arc::new(Login::default()),
            Arc::new(Faults::new()),
        )
    }

    fn is_deny(o: &Outcome, code: &str) -> bool {
        matches!(o, Outcome::Reply(r) | Outcome::Close(r) if r.contains(&format!("DENY\r\n   {code}\r\n")))
    }

    #[tokio::test(start_paused = true)]
    async fn failed_logins_are_slowed_and_the_third_in_a_row_closes() {
        let mut s = session();
        let start = tokio::time::Instant::now();
        let o = s.execute("ACT-USER::admin:1::wrong;").await;
        assert!(
            matches!(o, Outcome::Reply(_)) && is_deny(&o, "PIUI"),
            "{o:?}"
        );
        // The refusal waited; nothing else does.
        assert_eq!(start.elapsed(), LOGIN_FAILURE_DELAY);
        let o = s.execute("RTRV-HDR:::2;").await;
        assert!(is_deny(&o, "PLNA"), "{o:?}");
        assert_eq!(start.elapsed(), LOGIN_FAILURE_DELAY);
        // A success starts the count again.
        assert!(is_deny(
            &s.execute("ACT-USER::admin:3::wrong;").await,
            "PIUI"
        ));
        let o = s.execute("ACT-USER::admin:4::admin;").await;
        assert!(
            matches!(&o, Outcome::Reply(r) if r.contains("M  4 COMPLD")),
            "{o:?}"
        );
        assert_eq!(start.elapsed(), 2 * LOGIN_FAILURE_DELAY);
        s.execute("CANC-USER::admin:5;").await;
        for ctag in 6..8 {
            let o = s.execute(&format!("ACT-USER::admin:{ctag}::wrong;")).await;
            assert!(
                matches!(o, Outcome::Reply(_)) && is_deny(&o, "PIUI"),
                "{o:?}"
            );
        }
        // The third failure in a row: answered, then the connection closes.
        let o = s.execute("ACT-USER::root:8::admin;").await;
        assert!(
            matches!(o, Outcome::Close(_)) && is_deny(&o, "PIUI"),
            "{o:?}"
        );
        assert_eq!(start.elapsed(), 5 * LOGIN_FAILURE_DELAY);
    }

    #[test]
    fn timestamps_are_tl1_shaped() {
        // 2024-02-29 12:34:56 UTC
        let t = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        assert_eq!(tl1_timestamp(t), "24-02-29 12:34:56");
        assert_eq!(tl1_timestamp(UNIX_EPOCH), "70-01-01 00:00:00");
    }
}
