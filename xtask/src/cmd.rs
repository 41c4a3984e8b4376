//! Running external commands the way every subcommand does: echo the command line, then run it.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The result of a step; the error is the message `xtask` prints before exiting non-zero.
pub(crate) type Result<T = ()> = std::result::Result<T, String>;

/// A command line to echo and run, with extra environment variables and, optionally, its own
/// working directory.
#[derive(Debug, Clone)]
pub(crate) struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    dir: Option<PathBuf>,
}

/// What a captured command printed, and how it ended.
#[derive(Debug)]
pub(crate) struct Captured {
    /// The exit status, or `None` when it ran out of time and was killed.
    pub(crate) status: Option<ExitStatus>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Cmd {
    pub(crate) fn new(program: impl AsRef<OsStr>) -> Self {
        Cmd {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            dir: None,
        }
    }

    /// `cargo`, as found on `PATH` (the rustup proxy, so `+nightly` works).
    pub(crate) fn cargo() -> Self {
        Cmd::new("cargo")
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub(crate) fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub(crate) fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Runs the command in `dir` instead of the workspace root.
    pub(crate) fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Runs the command with inherited stdio; an error unless it exits successfully.
    pub(crate) fn run(&self) -> Result {
        self.echo();
        self.finish(self.command().status())
    }

    /// `run`, with the command's standard output written to the file `path` (`cmd > path`).
    pub(crate) fn run_into(&self, path: &Path) -> Result {
        println!("$ {self} > {}", shell_quote(&path.to_string_lossy()));
        let file = std::fs::File::create(path)
            .map_err(|error| format!("creating {}: {error}", path.display()))?;
        self.finish(self.command().stdout(file).status())
    }

    /// `run`, with everything the command prints (standard output and error) added to the
    /// file `log` (`cmd >> log 2>&1`): for a command that runs beside another.
    pub(crate) fn run_logged(&self, log: &Path) -> Result {
        println!("$ {self} >> {} 2>&1", shell_quote(&log.to_string_lossy()));
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|error| format!("opening {}: {error}", log.display()))
        };
        self.finish(self.command().stdout(open()?).stderr(open()?).status())
    }

    /// An error unless the command ran and exited successfully.
    fn finish(&self, status: std::io::Result<ExitStatus>) -> Result {
        let status =
            status.map_err(|error| format!("cannot run `{}`: {error}", self.program.display()))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("`{self}` failed ({status})"))
        }
    }

    /// Runs the command silently and says whether it succeeded (a probe such as `--version`).
    pub(crate) fn succeeds(&self) -> bool {
        self.echo();
        self.command()
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Runs the command with its output captured, killing it after `timeout`.
    /// An error only when it cannot be started.
    pub(crate) fn capture(&self, timeout: Duration) -> Result<Captured> {
        self.echo();
        self.capture_without_echo(timeout)
    }

    /// `capture` for a caller that prints the command line itself (above progress bars) or
    /// that only asks a question (`rustc --version`).
    pub(crate) fn capture_without_echo(&self, timeout: Duration) -> Result<Captured> {
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| format!("cannot run `{}`: {error}", self.program.display()))?;
        let stdout = read_to_end(child.stdout.take());
        let stderr = read_to_end(child.stderr.take());
        let deadline = Instant::now() + timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Ok(None) | Err(_) => {
                    // Out of time, or no longer observable: kill it. Errors here mean it is
                    // already gone, which is the goal.
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        Ok(Captured {
            status,
            stdout: stdout.join().unwrap_or_default(),
            stderr: stderr.join().unwrap_or_default(),
        })
    }

    fn echo(&self) {
        println!("$ {self}");
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        command
    }
}

impl std::fmt::Display for Cmd {
    /// The command as a shell line: `KEY=value program arg...`, quoted where needed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(dir) = &self.dir {
            write!(f, "cd {} && ", shell_quote(&dir.to_string_lossy()))?;
        }
        for (key, value) in &self.env {
            write!(f, "{key}={} ", shell_quote(value))?;
        }
        write!(f, "{}", shell_quote(&self.program.to_string_lossy()))?;
        for arg in &self.args {
            write!(f, " {}", shell_quote(&arg.to_string_lossy()))?;
        }
        Ok(())
    }
}

fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=+,:@%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn read_to_end(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::Cmd;

    #[test]
    fn display_quotes_what_the_shell_would_split() {
        let cmd =
            Cmd::cargo()
                .env("RUSTFLAGS", "--cfg loom")
                .args(["test", "-p", "depengine-pool"]);
        assert_eq!(
            cmd.to_string(),
            "RUSTFLAGS='--cfg loom' cargo test -p depengine-pool"
        );
    }
}
