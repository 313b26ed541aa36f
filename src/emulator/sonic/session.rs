//! One login on the emulated SONiC switch: bash's prompt and error forms,
//! the sonic-utilities commands an operator or the driver uses, and files in
//! `/tmp` written with `printf`/`echo` redirections.
//!
//! Commands: `show runningconfiguration all`; `sonic-cfggen -d
//! --print-data`; `config ...` ([`super::gcu`]; it needs root: `sudo`, as
//! on a real switch); `printf FORMAT ARGS...` (`%s`, `%%`, `\n`, `\t`,
//! `\\`), `echo [-n]`, `cat`, `rm [-f]`; `sudo CMD`; `exit`/`logout`. Anything else is `-bash: X: command not found`
//! (`bash:` for an `exec` request, which runs a non-login shell).

use std::sync::Arc;

use super::words::{self, CommandLine};
use super::{gcu, SonicDevice};
use crate::emulator::faults::Action;
use crate::emulator::shell::{Reply, SessionKind, ShellSession};

/// What a command printed, per stream.
#[derive(Debug, Default)]
pub(super) struct Out {
    pub(super) stdout: String,
    pub(super) stderr: String,
    close: bool,
}

impl Out {
    pub(super) fn stdout(s: impl Into<String>) -> Self {
        Out {
            stdout: s.into(),
            ..Out::default()
        }
    }

    pub(super) fn stderr(s: impl Into<String>) -> Self {
        Out {
            stderr: s.into(),
            ..Out::default()
        }
    }
}

/// One logged-in session.
#[derive(Debug)]
pub struct SonicSession {
    dev: Arc<SonicDevice>,
    user: String,
    kind: SessionKind,
}

/// A click (sonic-utilities) usage error.
pub(super) fn click_error(cmd: &str, usage: &str, msg: &str) -> Out {
    Out::stderr(format!(
        "Usage: {cmd} {usage}\nTry \"{cmd} -h\" for help.\n\nError: {msg}\n"
    ))
}

/// A path the emulated `/tmp` can hold: `/tmp/NAME`, NAME of `[A-Za-z0-9._-]`.
fn tmp_path(path: &str) -> bool {
    path.strip_prefix("/tmp/").is_some_and(|n| {
        !n.is_empty()
            && n != "."
            && n != ".."
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

/// bash's `printf` for `%s`, `%%` and the escapes `\n`, `\t`, `\\`; the
/// format is reused while arguments remain.
fn printf(args: &[String]) -> Result<String, String> {
    let Some((fmt, mut rest)) = args.split_first() else {
        return Err("printf: usage: printf [-v var] format [arguments]".into());
    };
    let mut out = String::new();
    loop {
        let mut took = false;
        let mut chars = fmt.chars();
        while let Some(c) = chars.next() {
            match (c, c == '%' || c == '\\') {
                ('%', true) => match chars.next() {
                    Some('s') => {
                        if let Some((a, r)) = rest.split_first() {
                            out.push_str(a);
                            rest = r;
                        }
                        took = true;
                    }
                    Some('%') => out.push('%'),
                    other => {
                        let c = other.map(String::from).unwrap_or_default();
                        return Err(format!("printf: `%{c}': invalid format character"));
                    }
                },
                (_, true) => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('\\') => out.push('\\'),
                    Some(o) => {
                        out.push('\\');
                        out.push(o);
                    }
                    None => out.push('\\'),
                },
                (c, false) => out.push(c),
            }
        }
        if !took || rest.is_empty() {
            return Ok(out);
        }
    }
}

impl SonicSession {
    pub fn new(dev: Arc<SonicDevice>, user: &str, kind: SessionKind) -> Self {
        Self {
            dev,
            user: user.to_string(),
            kind,
        }
    }

    fn bash(&self) -> &'static str {
        match self.kind {
            SessionKind::Shell => "-bash",
            SessionKind::Exec => "bash",
        }
    }

    fn run(&mut self, line: &CommandLine) -> Out {
        let (root, words) = match line.words.split_first() {
            Some((s, rest)) if s == "sudo" => (true, rest),
            _ => (false, line.words.as_slice()),
        };
        let Some((cmd, args)) = words.split_first() else {
            return Out::stderr("usage: sudo command\n");
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match cmd.as_str() {
            "exit" | "logout" => Out {
                close: true,
                ..Out::default()
            },
            "printf" => match printf(&words[1..]) {
                Ok(s) => Out::stdout(s),
                Err(e) => Out::stderr(format!("{}: {e}\n", self.bash())),
            },
            "echo" => match args.split_first() {
                Some((&"-n", rest)) => Out::stdout(rest.join(" ")),
                _ => Out::stdout(format!("{}\n", args.join(" "))),
            },
            "cat" => self.cat(&args),
            "rm" => self.rm(&args),
            "show" => self.show(&args),
            "sonic-cfggen" => {
                let mut a = args.clone();
                a.sort_unstable();
                if a == ["--print-data", "-d"] {
                    Out::stdout(self.dev.running_text())
                } else {
                    Out::stderr("sonic-cfggen: error: the emulator supports only -d --print-data\n")
                }
            }
            "config" if !root => Out::stderr("Root privileges are required for this operation\n"),
            "config" => gcu::config(&self.dev, &args),
            other if root => Out::stderr(format!("sudo: {other}: command not found\n")),
            other => Out::stderr(format!("{}: {other}: command not found\n", self.bash())),
        }
    }

    fn cat(&self, paths: &[&str]) -> Out {
        let mut out = Out::default();
        for p in paths {
            match self.dev.file(p) {
                Some(text) => out.stdout.push_str(&text),
                None => out
                    .stderr
                    .push_str(&format!("cat: {p}: No such file or directory\n")),
            }
        }
        out
    }

    fn rm(&self, args: &[&str]) -> Out {
        let force = args.first() == Some(&"-f");
        let mut out = Out::default();
        for p in args.iter().skip(usize::from(force)) {
            let gone = self.dev.state().files.remove(*p).is_some();
            if !gone && !force {
                out.stderr.push_str(&format!(
                    "rm: cannot remove '{p}': No such file or directory\n"
                ));
            }
        }
        out
    }

    fn show(&self, args: &[&str]) -> Out {
        match args {
            ["runningconfiguration", "all"] => Out::stdout(self.dev.running_text()),
            ["runningconfiguration", rest @ ..] => click_error(
                "show runningconfiguration",
                "[OPTIONS] COMMAND [ARGS]...",
                &format!("No such command \"{}\".", rest.first().unwrap_or(&"")),
            ),
            _ => click_error(
                "show",
                "[OPTIONS] COMMAND [ARGS]...",
                &format!("No such command \"{}\".", args.first().unwrap_or(&"")),
            ),
        }
    }

    /// Write (or append) `text` to `path`, as bash's `>` / `>>`.
    fn redirect(&self, path: &str, append: bool, text: &str) -> Result<(), String> {
        if !tmp_path(path) {
            return Err(format!("{}: {path}: Permission denied\n", self.bash()));
        }
        let mut st = self.dev.state();
        let f = st.files.entry(path.to_string()).or_default();
        if !append {
            f.clear();
        }
        f.push_str(text);
        Ok(())
    }
}

impl ShellSession for SonicSession {
    fn banner(&self) -> String {
        format!(
            "Linux {} 5.10.0-23-2-amd64 #1 SMP Debian 5.10.179-3 x86_64\nYou are on\n  SONiC (emulated by vclos)\n\n",
            self.dev.hostname()
        )
    }

    fn prompt(&self) -> String {
        format!("{}@{}:~$ ", self.user, self.dev.hostname())
    }

    fn handle_line(&mut self, raw: &str) -> Reply {
        if raw.trim().is_empty() {
            return Reply::text("");
        }
        match self.dev.faults.on_command() {
            Action::Drop => return Reply::drop_connection(),
            Action::Fail => {
                return Reply::text(format!(
                    "{}: fork: retry: Resource temporarily unavailable\n",
                    self.bash()
                ))
            }
            Action::Proceed => {}
        }
        let line = match words::parse(raw) {
            Ok(l) => l,
            Err(e) => return Reply::text(format!("{}: {e}\n", self.bash())),
        };
        if line.words.is_empty() {
            return Reply::text("");
        }
        self.dev.record(&line.words);
        let out = self.run(&line);
        let mut text = out.stderr;
        match &line.redirect {
            Some(r) => {
                if let Err(e) = self.redirect(&r.path, r.append, &out.stdout) {
                    text.push_str(&e);
                }
            }
            None => text.insert_str(0, &out.stdout),
        }
        if out.close {
            Reply::close(text)
        } else {
            Reply::text(text)
        }
    }
}
