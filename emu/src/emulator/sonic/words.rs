//! A strict subset of bash's command-line syntax: simple commands, joined
//! by `;` into a list, and the special parameter `$?`.
//!
//! [`split_list`] cuts a line at each unquoted `;` (bash's "list" of
//! commands run one after another, GNU Bash Reference Manual §3.2.4 "Lists of
//! Commands"); [`expand_status`] replaces each unquoted `$?` with the exit
//! status of the last command (§3.4.2 "Special Parameters"), which is what
//! `CMD; echo rc=$?` needs; [`parse`] then reads one simple command. Words
//! split on blanks; `'...'` quotes literally (no escapes inside, as in
//! bash) and `\c` outside quotes stands for `c`, so the usual `'\''` works; a
//! word starting with `#` starts a comment; one `>` or `>>` redirection may
//! end the line. Everything else with a meaning to bash (double quotes,
//! `$`, backquotes, `;`, `|`, `&`, `<`, parentheses, globs, braces) is
//! refused with a clear message rather than half-emulated, so a driver that
//! depends on shell features beyond these fails here as it would risk
//! failing on a real switch. (Crates such as `shell-words` drop the quoted /
//! unquoted distinction this needs to tell `>` from `'>'`.)

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandLine {
    pub words: Vec<String>,
    pub redirect: Option<Redirect>,
}

/// `> path` (truncate) or `>> path` (append).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub append: bool,
    pub path: String,
}

const REFUSED: &str = "\"$`;|&<(){}[]*?!";

/// Calls `f(i, c, quoted)` for every character of `line` with its index
/// and whether quoting (single quotes, or a preceding backslash) makes it
/// literal. An unterminated quote is left to [`parse`] to report.
fn scan(line: &str, mut f: impl FnMut(usize, char, bool)) {
    let (mut in_quote, mut escaped) = (false, false);
    for (i, c) in line.char_indices() {
        let quoted = in_quote || escaped || c == '\'';
        f(i, c, quoted);
        if escaped {
            escaped = false;
        } else if c == '\'' {
            in_quote = !in_quote;
        } else if c == '\\' && !in_quote {
            escaped = true;
        }
    }
}

/// The commands of a list, cut at each unquoted `;`. An empty command
/// (`;` first, or `;;`) is bash's syntax error.
pub fn split_list(line: &str) -> Result<Vec<&str>, String> {
    let mut cuts = Vec::new();
    let (mut comment, mut word_start) = (false, true);
    scan(line, |i, c, quoted| {
        // A `#` starting a word hides the rest of the line, `;` included.
        comment |= c == '#' && !quoted && word_start;
        if c == ';' && !quoted && !comment {
            cuts.push(i);
        }
        word_start = !quoted && matches!(c, ' ' | '\t' | ';');
    });
    let mut out = Vec::new();
    let mut start = 0;
    for (n, &i) in cuts.iter().enumerate() {
        let cmd = &line[start..i];
        if cmd.trim().is_empty() {
            let token = if n > 0 && start == i { ";;" } else { ";" };
            return Err(format!("syntax error near unexpected token `{token}'"));
        }
        out.push(cmd);
        start = i + 1;
    }
    out.push(&line[start..]);
    Ok(out)
}

/// `cmd` with each unquoted `$?` replaced by `status`.
pub fn expand_status(cmd: &str, status: u32) -> String {
    let mut at = Vec::new();
    let mut prev: Option<(usize, char, bool)> = None;
    scan(cmd, |i, c, quoted| {
        if let Some((j, '$', false)) = prev {
            if c == '?' && !quoted {
                at.push(j);
            }
        }
        prev = Some((i, c, quoted));
    });
    let mut out = String::with_capacity(cmd.len());
    let mut from = 0;
    for j in at {
        out.push_str(&cmd[from..j]);
        out.push_str(&status.to_string());
        from = j + 2;
    }
    out.push_str(&cmd[from..]);
    out
}

/// Parse one simple command; errors are bash-style messages without the `bash:` prefix.
pub fn parse(line: &str) -> Result<CommandLine, String> {
    let mut words: Vec<String> = Vec::new();
    let mut redirect: Option<(bool, Option<String>)> = None;
    let mut cur: Option<String> = None;
    let mut chars = line.chars().peekable();
    let end_word = |cur: &mut Option<String>,
                    words: &mut Vec<String>,
                    redirect: &mut Option<(bool, Option<String>)>|
     -> Result<(), String> {
        let Some(w) = cur.take() else { return Ok(()) };
        match redirect {
            Some((_, path @ None)) => *path = Some(w),
            Some((_, Some(_))) => {
                return Err("emulator: words after a redirection are not supported".into())
            }
            None => words.push(w),
        }
        Ok(())
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => end_word(&mut cur, &mut words, &mut redirect)?,
            '#' if cur.is_none() => break,
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => w.push(q),
                        None => {
                            return Err("unexpected EOF while looking for matching `''".into())
                        }
                    }
                }
            }
            '\\' => match chars.next() {
                Some(e) => cur.get_or_insert_with(String::new).push(e),
                None => return Err("emulator: a line may not end with `\\`".into()),
            },
            '>' => {
                end_word(&mut cur, &mut words, &mut redirect)?;
                if redirect.is_some() {
                    return Err("emulator: only one redirection is supported".into());
                }
                let append = chars.next_if_eq(&'>').is_some();
                redirect = Some((append, None));
            }
            c if REFUSED.contains(c) => {
                return Err(format!(
                    "emulator: `{c}` is not supported (simple commands, single quotes and one > or >> only)"
                ))
            }
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    end_word(&mut cur, &mut words, &mut redirect)?;
    let redirect = match redirect {
        None => None,
        Some((_, None)) => return Err("syntax error near unexpected token `newline'".into()),
        Some((append, Some(path))) => Some(Redirect { append, path }),
    };
    if words.is_empty() && redirect.is_some() {
        return Err("emulator: a redirection needs a command".into());
    }
    Ok(CommandLine { words, redirect })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn words(line: &str) -> Vec<String> {
        parse(line).unwrap().words
    }

    #[test]
    fn words_quotes_and_escapes() {
        assert_eq!(
            words("  show  runningconfiguration all "),
            ["show", "runningconfiguration", "all"]
        );
        assert_eq!(words("printf '%s' 'a b'\\''c'"), ["printf", "%s", "a b'c"]);
        assert_eq!(words("echo ''"), ["echo", ""]);
        assert_eq!(words("echo '#x' y # a comment"), ["echo", "#x", "y"]);
        assert_eq!(words("echo '; reboot'"), ["echo", "; reboot"]);
        assert!(words("").is_empty());
    }

    #[test]
    fn redirections() {
        let c = parse("printf '%s' '{}' > /tmp/p.json").unwrap();
        assert_eq!(c.words, ["printf", "%s", "{}"]);
        assert_eq!(
            c.redirect,
            Some(Redirect {
                append: false,
                path: "/tmp/p.json".into()
            })
        );
        let c = parse("printf x >>/tmp/p").unwrap();
        assert!(c.redirect.unwrap().append);
        assert_eq!(parse("echo '>' x").unwrap().redirect, None);
        assert!(parse("echo x >").is_err());
        assert!(parse("echo x > a b").is_err());
        assert!(parse("echo x > a > b").is_err());
        assert!(parse("> a").is_err());
    }

    #[test]
    fn lists_and_status() {
        assert_eq!(
            split_list("false; echo rc=$?").unwrap(),
            ["false", " echo rc=$?"]
        );
        assert_eq!(split_list("echo 'a;b'\\;c").unwrap(), ["echo 'a;b'\\;c"]);
        assert_eq!(split_list("echo x # a; b").unwrap(), ["echo x # a; b"]);
        assert_eq!(split_list("echo 'a #b'; x").unwrap(), ["echo 'a #b'", " x"]);
        assert_eq!(split_list("echo x;").unwrap(), ["echo x", ""]);
        assert!(split_list("; echo").unwrap_err().contains("`;'"));
        assert!(split_list("echo;;echo").unwrap_err().contains("`;;'"));
        assert_eq!(expand_status("echo rc=$?", 2), "echo rc=2");
        assert_eq!(expand_status("echo '$?' \\$? $?$?", 1), "echo '$?' \\$? 11");
        assert!(parse(&expand_status("echo $?", 0)).is_ok());
        assert!(parse("echo $HOME").is_err());
    }

    #[test]
    fn refuses_what_it_does_not_emulate() {
        for bad in [
            "echo 'x",
            "echo x; reboot",
            "echo $(reboot)",
            "echo `reboot`",
            "echo \"x\"",
            "cat a | sh",
            "reboot &",
            "cat < a",
            "rm /tmp/*",
            "echo x\\",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("echo 'x").unwrap_err().contains("matching"));
    }
}
