//! A strict subset of bash's command-line syntax: simple commands only.
//!
//! Words split on blanks; `'...'` quotes literally (no escapes inside, as in
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

/// Parse one line; errors are bash-style messages without the `bash:` prefix.
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
