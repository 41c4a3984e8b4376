//! What the figures were measured on: the CPU, the core count, and the versions of the compilers
//! and peer libraries, for the report. Everything is looked up cheaply and left out when it
//! cannot be (no `/proc/cpuinfo`, no `dpkg-query`).

use std::fmt::Write as _;
use std::time::Duration;

use crate::cmd::Cmd;

/// Crates whose version `Cargo.lock` gives: the Rust peers and the kernels they call.
const LOCKED_CRATES: &[&str] = &["rayon", "faer"];

/// Debian packages of the C++ peers' runtimes, as `dpkg-query -W` patterns.
const DEBIAN_PACKAGES: &[&str] = &[
    "libgomp1",
    "libomp5*",
    "libtbb12",
    "libeigen3-dev",
    "libstarpu-1.3-[0-9]*",
    "libopenblas0*",
];

/// Python packages of the peers, whose version `importlib.metadata` gives.
const PYTHON_PACKAGES: &[&str] = &["mxnet"];

/// How long one version query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The machine and the software the figures come from.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Machine {
    /// `model name` of `/proc/cpuinfo`.
    pub(crate) cpu: Option<String>,
    /// The cores this process may run on.
    pub(crate) cores: usize,
    /// `rustc --version` of the workspace's toolchain.
    pub(crate) rustc: Option<String>,
    /// The C++ compilers that built the peers: (command, first line of `--version`).
    pub(crate) compilers: Vec<(String, String)>,
    /// Libraries and their versions: crates from `Cargo.lock`, Debian and Python packages.
    pub(crate) libraries: Vec<(String, String)>,
    /// The kernels the `OpenBLAS` peers ran with (`openblas.rs`), where one ran.
    pub(crate) openblas: Option<String>,
}

impl Machine {
    /// Looks everything up; `compilers` are the commands that built the C++ peers.
    pub(crate) fn detect(compilers: &[&str]) -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| cpu_model(&text));
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let rustc = first_line_of(&Cmd::new("rustc").arg("--version"));
        let compilers = compilers
            .iter()
            .filter_map(|&compiler| {
                let version = first_line_of(&Cmd::new(compiler).arg("--version"))?;
                Some((compiler.to_owned(), version))
            })
            .collect();
        let mut libraries = Vec::new();
        if let Ok(lock) = std::fs::read_to_string("Cargo.lock") {
            libraries.extend(
                LOCKED_CRATES
                    .iter()
                    .filter_map(|&name| Some((name.to_owned(), locked_version(&lock, name)?))),
            );
        }
        libraries.extend(debian_packages());
        libraries.extend(python_packages());
        Machine {
            cpu,
            cores,
            rustc,
            compilers,
            libraries,
            openblas: None,
        }
    }

    /// The machine as the JSON report writes it.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let pairs = |pairs: &[(String, String)]| {
            pairs
                .iter()
                .map(|(name, version)| (name.clone(), serde_json::Value::from(version.as_str())))
                .collect::<serde_json::Map<_, _>>()
        };
        serde_json::json!({
            "cpu": self.cpu,
            "cores": self.cores,
            "rustc": self.rustc,
            "compilers": pairs(&self.compilers),
            "libraries": pairs(&self.libraries),
            "openblas": self.openblas,
        })
    }

    /// The machine as a Markdown list.
    pub(crate) fn markdown(&self) -> String {
        let unknown = || "unknown".to_owned();
        let list = |pairs: &[(String, String)], separator: &str| {
            pairs
                .iter()
                .map(|(name, version)| format!("{name}{separator}{version}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = format!(
            "- CPU: {}, {} cores\n- Rust: {}\n",
            self.cpu.clone().unwrap_or_else(unknown),
            self.cores,
            self.rustc.clone().unwrap_or_else(unknown),
        );
        if !self.compilers.is_empty() {
            let _ = writeln!(out, "- C++: {}", list(&self.compilers, ": "));
        }
        if !self.libraries.is_empty() {
            let _ = writeln!(out, "- Libraries: {}", list(&self.libraries, " "));
        }
        if let Some(openblas) = &self.openblas {
            let _ = writeln!(out, "- OpenBLAS: {openblas}");
        }
        out
    }
}

/// The first line `command` prints on stdout, when it succeeds.
fn first_line_of(command: &Cmd) -> Option<String> {
    let captured = command.capture_without_echo(QUERY_TIMEOUT).ok()?;
    if !captured.status?.success() {
        return None;
    }
    let line = captured.stdout.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

/// The `model name` of the first processor in `/proc/cpuinfo`'s text.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_owned())
    })
}

/// The version of the crate `name` in `Cargo.lock`'s text (the first, if there are several).
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines().map(str::trim);
    lines.find(|&line| line == wanted)?;
    let version = lines.next()?.strip_prefix("version = \"")?;
    Some(version.strip_suffix('"')?.to_owned())
}

/// The installed packages among `DEBIAN_PACKAGES`, where `dpkg-query` is.
fn debian_packages() -> Vec<(String, String)> {
    let query = Cmd::new("dpkg-query")
        .args(["-W", "-f", "${db:Status-Abbrev}\t${Package}\t${Version}\n"])
        .args(DEBIAN_PACKAGES);
    // dpkg-query exits 1 when a pattern matches nothing, and still lists the others.
    query
        .capture_without_echo(QUERY_TIMEOUT)
        .map(|captured| installed_packages(&captured.stdout))
        .unwrap_or_default()
}

/// The installed (`ii`) packages of `dpkg-query -W -f '${db:Status-Abbrev}\t${Package}\t${Version}\n'`.
fn installed_packages(listing: &str) -> Vec<(String, String)> {
    listing
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let (status, package, version) = (fields.next()?, fields.next()?, fields.next()?);
            (status.trim() == "ii" && !version.is_empty())
                .then(|| (package.to_owned(), version.to_owned()))
        })
        .collect()
}

/// The versions of `PYTHON_PACKAGES` that `python3` finds.
fn python_packages() -> Vec<(String, String)> {
    PYTHON_PACKAGES
        .iter()
        .filter_map(|&package| {
            let script = format!("import importlib.metadata as m; print(m.version('{package}'))");
            let version = first_line_of(&Cmd::new("python3").args(["-c", &script]))?;
            Some((format!("{package} (PyPI)"), version))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Machine, cpu_model, installed_packages, locked_version};

    #[test]
    fn the_cpu_model_is_the_first_model_name() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) \
                       Processor\nprocessor\t: 1\nmodel name\t: Other\n";
        assert_eq!(
            cpu_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) Processor")
        );
        assert_eq!(cpu_model("processor : 0\n"), None);
    }

    #[test]
    fn crate_versions_come_from_the_lock_file() {
        let lock = "[[package]]\nname = \"rayon-core\"\nversion = \"1.13.0\"\n\n[[package]]\n\
                    name = \"rayon\"\nversion = \"1.12.0\"\nsource = \"registry\"\n";
        assert_eq!(locked_version(lock, "rayon").as_deref(), Some("1.12.0"));
        assert_eq!(locked_version(lock, "faer"), None);
    }

    #[test]
    fn only_installed_packages_are_listed() {
        let listing = "ii \tlibgomp1\t12.2.0-14\nun \tlibomp5\t\nii \tlibomp5-14\t1:14.0.6-12\n";
        assert_eq!(
            installed_packages(listing),
            [
                ("libgomp1".to_owned(), "12.2.0-14".to_owned()),
                ("libomp5-14".to_owned(), "1:14.0.6-12".to_owned())
            ]
        );
    }

    #[test]
    fn the_json_omits_nothing_it_knows() {
        let machine = Machine {
            cpu: Some("Xeon".to_owned()),
            cores: 2,
            rustc: None,
            compilers: vec![("g++".to_owned(), "g++ 12".to_owned())],
            libraries: vec![("rayon".to_owned(), "1.12.0".to_owned())],
            openblas: Some("SkylakeX kernels".to_owned()),
        };
        let json = machine.to_json();
        assert_eq!(json["cpu"], "Xeon");
        assert_eq!(json["cores"], 2);
        assert!(json["rustc"].is_null());
        assert_eq!(json["compilers"]["g++"], "g++ 12");
        assert_eq!(json["libraries"]["rayon"], "1.12.0");
        assert_eq!(json["openblas"], "SkylakeX kernels");
        assert!(machine.markdown().contains("- C++: g++: g++ 12\n"));
        assert!(
            machine
                .markdown()
                .contains("- OpenBLAS: SkylakeX kernels\n")
        );
    }
}
