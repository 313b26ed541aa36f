//! One login on the emulated SONiC switch: bash's prompt and error forms,
//! the sonic-utilities commands an operator or the driver uses, and files in
//! `/tmp` written with `printf`/`echo` redirections.
//!
//! Commands: `show runningconfiguration all`; `sonic-cfggen -d
//! --print-data`; `config ...` (`super::gcu`; it needs root: `sudo`, as
//! on a real switch); `printf FORMAT ARGS...` (`%s`, `%%`, `\n`, `\t`,
//! `\\`), `echo [-n]`, `cat`, `rm [-f]`, `true`, `false`; `sudo CMD`;
//! `exit [N]`/`logout`. Anything else is `-bash: X: command not found`
//! (`bash:` for an `exec` request, which runs a non-login shell). A line may
//! be a list `CMD; CMD; ...` and use `$?` ([`words`]).
//!
//! # Exit statuses
//! Every command has bash's exit status, `$?` reads the last one, and the
//! line's status (its last command's) is the `exec` request's exit status:
//! 0 success; 1 for `false` and general errors (`cat`/`rm` of a missing file,
//! a failed redirection, `printf`'s invalid format: bash(1) "EXIT STATUS" and
//! the builtins' descriptions); 127 command not found; 2 for syntax errors,
//! including the syntax this subset refuses (bash(1): "2 ... incorrect usage"
//! of builtins and syntax errors); `sudo` of an unknown command 1 (sudo(8)
//! "EXIT VALUE"). sonic-utilities' `config` (click) exits 2 on a usage error
//! or a failed operation (`ctx.fail`, which raises click's `UsageError`, exit
//! code 2: sonic-net/sonic-utilities `config/main.py` `apply_patch`,
//! `replace`, `rollback`, `checkpoint`, `delete_checkpoint`), and 1 when not
//! run as root (`sys.exit("Root privileges are required for this
//! operation")`).

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
    /// The exit status.
    pub(super) status: u32,
    close: bool,
}

impl Out {
    pub(super) fn stdout(s: impl Into<String>) -> Self {
        Out {
            stdout: s.into(),
            ..Out::default()
        }
    }

    /// A failure (status 1) printing `s` on stderr.
    pub(super) fn stderr(s: impl Into<String>) -> Self {
        Out {
            stderr: s.into(),
            status: 1,
            ..Out::default()
        }
    }

    /// The same output with exit status `status`.
    pub(super) fn code(self, status: u32) -> Self {
        Out { status, ..self }
    }
}

/// One logged-in session.
#[derive(Debug)]
pub struct SonicSession {
    dev: Arc<SonicDevice>,
    user: String,
    kind: SessionKind,
    /// The last command's exit status (`$?`).
    status: u32,
}

/// A click (sonic-utilities) usage error or `ctx.fail`: exit status 2.
pub(super) fn click_error(cmd: &str, usage: &str, msg: &str) -> Out {
    Out::stderr(format!(
        "Usage: {cmd} {usage}\nTry \"{cmd} -h\" for help.\n\nError: {msg}\n"
    ))
    .code(2)
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
            status: 0,
        }
    }

    /// bash's answer to a line it cannot parse: nothing runs, status 2.
    fn syntax_error(&mut self, e: &str) -> Reply {
        self.status = 2;
        Reply::text(format!("{}: {e}\n", self.bash())).with_status(2)
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
            "exit" | "logout" => match args.as_slice() {
                [] => Out {
                    close: true,
                    status: self.status,
                    ..Out::default()
                },
                // bash keeps the low 8 bits of `exit N`.
                [n] if n.parse::<i64>().is_ok() => Out {
                    close: true,
                    status: n.parse::<i64>().map_or(0, |n| n.rem_euclid(256) as u32),
                    ..Out::default()
                },
                [n] => Out {
                    stderr: format!("{}: exit: {n}: numeric argument required\n", self.bash()),
                    close: true,
                    status: 2,
                    ..Out::default()
                },
                _ => Out::stderr(format!("{}: exit: too many arguments\n", self.bash())),
            },
            "true" => Out::default(),
            "false" => Out::default().code(1),
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
                        .code(2)
                }
            }
            "config" if !root => Out::stderr("Root privileges are required for this operation\n"),
            "config" => gcu::config(&self.dev, &args),
            other if root => Out::stderr(format!("sudo: {other}: command not found\n")),
            other => {
                Out::stderr(format!("{}: {other}: command not found\n", self.bash())).code(127)
            }
        }
    }

    fn cat(&self, paths: &[&str]) -> Out {
        let mut out = Out::default();
        for p in paths {
            match self.dev.file(p) {
                Some(text) => out.stdout.push_str(&text),
                None => {
                    out.stderr
                        .push_str(&format!("cat: {p}: No such file or directory\n"));
                    out.status = 1;
                }
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
                out.status = 1;
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
        let kept = match st.files.get(path) {
            Some(old) if append => old.len(),
            _ => 0,
        };
        let others: usize = (st.files.iter())
            .filter(|(p, _)| p.as_str() != path)
            .map(|(_, f)| f.len())
            .sum();
        let new_file = !st.files.contains_key(path);
        if others + kept + text.len() > super::MAX_TMP_BYTES
            || (new_file && st.files.len() >= super::MAX_TMP_FILES)
        {
            // As bash's builtins report ENOSPC; the file is left as it was.
            return Err(format!(
                "{}: printf: write error: No space left on device\n",
                self.bash()
            ));
        }
        let f = st.files.entry(path.to_string()).or_default();
        if !append {
            f.clear();
        }
        f.push_str(text);
        Ok(())
    }
}

impl ShellSession for SonicSession {
    fn line_too_long(&mut self) -> Reply {
        self.status = 2;
        Reply::text(format!(
            "{}: line too long: this shell reads at most {} bytes a line\n",
            self.bash(),
            super::MAX_LINE
        ))
        .with_status(2)
    }

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
            return Reply::text("").with_status(self.status);
        }
        // Fault injection: the connection drops, or the line's first
        // command cannot be forked (bash goes on with the rest of the list,
        // whose builtins need no fork).
        let mut fork_fails = match self.dev.faults.on_command() {
            Action::Drop => return Reply::drop_connection(),
            Action::Fail => true,
            Action::Proceed => false,
        };
        let cmds = match words::split_list(raw) {
            Ok(c) => c,
            Err(e) => return self.syntax_error(&e),
        };
        let mut text = String::new();
        let last = cmds.len() - 1;
        for (i, cmd) in cmds.into_iter().enumerate() {
            // `cmd;` ends with an empty command, which bash allows.
            if i == last && i > 0 && cmd.trim().is_empty() {
                break;
            }
            let line = match words::parse(&words::expand_status(cmd, self.status)) {
                Ok(l) => l,
                Err(e) => {
                    text.push_str(&self.syntax_error(&e).output);
                    return Reply::text(text).with_status(2);
                }
            };
            if line.words.is_empty() {
                continue;
            }
            if std::mem::take(&mut fork_fails) {
                text.push_str(&format!(
                    "{}: fork: retry: Resource temporarily unavailable\n",
                    self.bash()
                ));
                self.status = 1;
                continue;
            }
            self.dev.record(&line.words);
            let mut out = self.run(&line);
            match &line.redirect {
                Some(r) => {
                    text.push_str(&out.stderr);
                    if let Err(e) = self.redirect(&r.path, r.append, &out.stdout) {
                        text.push_str(&e);
                        out.status = 1;
                    }
                }
                None => {
                    text.push_str(&out.stdout);
                    text.push_str(&out.stderr);
                }
            }
            self.status = out.status;
            if out.close {
                return Reply::close(text).with_status(out.status);
            }
        }
        Reply::text(text).with_status(self.status)
    }
}
