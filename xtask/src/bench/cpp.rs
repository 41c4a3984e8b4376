//! Building the C++ peer harnesses of `crates/bench/cpp/` into `<target>/bench/bin/`.
//!
//! A harness that cannot be built (no compiler, header or library) is skipped with the reason,
//! never an error: the peers are optional, our own systems are not.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::cmd::Cmd;

/// Where the harness sources live, relative to the workspace root.
const SOURCE_DIR: &str = "crates/bench/cpp";

/// How long one compiler invocation may take.
const BUILD_TIMEOUT: Duration = Duration::from_mins(10);

/// How to build one C++ harness.
#[derive(Debug)]
pub(crate) struct CppHarness {
    /// File name of the executable in `<target>/bench/bin/`.
    pub(crate) binary: &'static str,
    /// Source file in `crates/bench/cpp/`.
    pub(crate) source: &'static str,
    pub(crate) compiler: &'static str,
    /// Flags before the source file.
    pub(crate) flags: &'static [&'static str],
    /// Libraries, after the source file.
    pub(crate) libs: &'static [&'static str],
    /// Where the peer's library comes from, beyond the compiler's default paths.
    pub(crate) library: Library,
}

/// Where a harness's library and headers come from.
#[derive(Debug)]
pub(crate) enum Library {
    /// The compiler's default paths: `flags` and `libs` say it all.
    System,
    /// A `pkg-config` package: its `--cflags` go before the source file and its `--libs` after
    /// the libraries. The harness is skipped when `pkg-config` does not know it.
    PkgConfig(&'static str),
    /// A Python package that carries a shared library and its headers, as some wheels on `PyPI`
    /// do: `-I<dir>/include` before the source file, then `-L<dir> -l<lib>` with `<dir>` as the
    /// run path (`-Xlinker -rpath -Xlinker <dir>`), `<dir>` being where `python3` finds the
    /// package (`PYTHONPATH` counts). The harness is skipped when it finds none.
    PythonPackage {
        package: &'static str,
        lib: &'static str,
    },
}

impl Library {
    /// The compiler flags that go before the source file and after it, or why there are none.
    fn flags(&self) -> Result<(Vec<String>, Vec<String>), String> {
        match *self {
            Library::System => Ok((Vec::new(), Vec::new())),
            Library::PkgConfig(package) => Ok((
                pkg_config(package, "--cflags")?,
                pkg_config(package, "--libs")?,
            )),
            Library::PythonPackage { package, lib } => {
                let dir = python_package_dir(package)?;
                let dir = dir.display();
                Ok((
                    vec![format!("-I{dir}/include")],
                    vec![
                        format!("-L{dir}"),
                        format!("-l{lib}"),
                        // Not `-Wl,-rpath,<dir>`, which would split a path with a comma.
                        "-Xlinker".to_owned(),
                        "-rpath".to_owned(),
                        "-Xlinker".to_owned(),
                        dir.to_string(),
                    ],
                ))
            }
        }
    }
}

impl CppHarness {
    /// Builds the harness into `bin_dir` unless it is up to date; the executable's path, or why
    /// it could not be built.
    pub(crate) fn build(&self, bin_dir: &Path) -> Result<PathBuf, String> {
        let source = Path::new(SOURCE_DIR).join(self.source);
        let output = bin_dir.join(self.binary);
        // The headers the harnesses share (`bench_common.hpp`, a group's own): a change to
        // one rebuilds every harness, which is simpler than knowing who includes what.
        let mut inputs = headers(Path::new(SOURCE_DIR));
        inputs.push(source.clone());
        if is_up_to_date(&output, &inputs) {
            println!("up to date: {}", output.display());
            return Ok(output);
        }
        let (cflags, library_libs) = self.library.flags()?;
        std::fs::create_dir_all(bin_dir)
            .map_err(|error| format!("cannot create {}: {error}", bin_dir.display()))?;
        let captured = Cmd::new(self.compiler)
            .args(self.flags)
            .args(&cflags)
            .arg(&source)
            .arg("-o")
            .arg(&output)
            .args(self.libs)
            .args(&library_libs)
            .capture(BUILD_TIMEOUT)?;
        match captured.status {
            Some(status) if status.success() => Ok(output),
            Some(_) => Err(first_error(&captured.stderr)),
            None => Err(format!("the build took over {} s", BUILD_TIMEOUT.as_secs())),
        }
    }
}

/// `pkg-config <what> <package>` split into words, or why `pkg-config` could not say.
fn pkg_config(package: &str, what: &str) -> Result<Vec<String>, String> {
    let captured = Cmd::new("pkg-config")
        .args([what, package])
        .capture(BUILD_TIMEOUT)?;
    match captured.status {
        Some(status) if status.success() => Ok(captured
            .stdout
            .split_whitespace()
            .map(str::to_owned)
            .collect()),
        _ => Err(captured
            .stderr
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .map_or_else(
                || format!("pkg-config {what} {package} failed"),
                |line| format!("pkg-config: {line}"),
            )),
    }
}

/// The directory of the Python package `package`, as `python3` finds it (without importing it,
/// so the package's own Python dependencies need not be installed), or why it cannot.
fn python_package_dir(package: &str) -> Result<PathBuf, String> {
    let script = format!(
        "import importlib.util as u; s = u.find_spec('{package}'); \
         print(s.submodule_search_locations[0] if s else '')"
    );
    let captured = Cmd::new("python3")
        .args(["-c", &script])
        .capture(BUILD_TIMEOUT)
        .map_err(|error| format!("cannot look for the `{package}` package: {error}"))?;
    let dir = captured.stdout.trim();
    match captured.status {
        Some(status) if status.success() && !dir.is_empty() => Ok(PathBuf::from(dir)),
        Some(status) if status.success() => Err(format!(
            "python3 finds no `{package}` package (pip install it, or add it to PYTHONPATH)"
        )),
        _ => Err(format!(
            "python3 could not look for the `{package}` package"
        )),
    }
}

/// The `.hpp` files in `dir` (none if it cannot be read: the build then says what is missing).
fn headers(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "hpp"))
        .collect()
}

/// Whether `output` exists and is newer than every input.
fn is_up_to_date(output: &Path, inputs: &[PathBuf]) -> bool {
    let modified = |path: &Path| path.metadata().and_then(|m| m.modified()).ok();
    let Some(built) = modified(output) else {
        return false;
    };
    inputs
        .iter()
        .all(|input| modified(input).unwrap_or(SystemTime::UNIX_EPOCH) <= built)
}

/// The line of a compiler's stderr that says what is missing, e.g.
/// `fatal error: oneapi/tbb.h: No such file or directory` or `cannot find -ltbb`.
fn first_error(stderr: &str) -> String {
    let lines = || stderr.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .find(|line| line.contains("error") || line.contains("cannot find"))
        .or_else(|| lines().next())
        .unwrap_or("the compiler failed without a message")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::{CppHarness, Library, first_error};

    #[test]
    fn a_missing_compiler_is_a_reason_to_skip() {
        let harness = CppHarness {
            binary: "pool_missing",
            source: "pool_missing.cpp",
            compiler: "xtask-test-no-such-compiler",
            flags: &[],
            libs: &[],
            library: Library::System,
        };
        let bin_dir = std::env::temp_dir().join("xtask-cpp-test");
        let reason = harness.build(&bin_dir).unwrap_err();
        assert!(reason.contains("xtask-test-no-such-compiler"), "{reason}");
    }

    #[test]
    fn a_missing_pkg_config_package_is_a_reason_to_skip() {
        let harness = CppHarness {
            binary: "engine_missing",
            source: "engine_missing.cpp",
            compiler: "g++",
            flags: &[],
            libs: &[],
            library: Library::PkgConfig("xtask-test-no-such-package"),
        };
        let bin_dir = std::env::temp_dir().join("xtask-cpp-test");
        let reason = harness.build(&bin_dir).unwrap_err();
        assert!(
            reason.contains("xtask-test-no-such-package") || reason.contains("pkg-config"),
            "{reason}"
        );
    }

    #[test]
    fn a_missing_python_package_is_a_reason_to_skip() {
        let library = Library::PythonPackage {
            package: "xtask_test_no_such_package",
            lib: "none",
        };
        let reason = library.flags().unwrap_err();
        assert!(reason.contains("xtask_test_no_such_package"), "{reason}");
    }

    #[test]
    fn a_python_package_gives_its_include_and_library_dirs() {
        if std::process::Command::new("python3")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipped: no python3 to find packages with");
            return;
        }
        // `json` is a package of the standard library, so every python3 has it.
        let library = Library::PythonPackage {
            package: "json",
            lib: "json",
        };
        let (before, after) = library.flags().unwrap();
        let dir = before[0]
            .strip_prefix("-I")
            .unwrap()
            .strip_suffix("/include")
            .unwrap();
        assert!(
            std::path::Path::new(dir).join("__init__.py").is_file(),
            "{dir}"
        );
        assert_eq!(
            after,
            [
                format!("-L{dir}"),
                "-ljson".to_owned(),
                "-Xlinker".to_owned(),
                "-rpath".to_owned(),
                "-Xlinker".to_owned(),
                dir.to_owned(),
            ]
        );
    }

    #[test]
    fn every_shared_header_is_an_input() {
        let headers = super::headers(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../crates/bench/cpp"
        )));
        for shared in ["bench_common.hpp", "cholesky_common.hpp"] {
            assert!(
                headers.iter().any(|path| path.ends_with(shared)),
                "{shared} not in {headers:?}"
            );
        }
        assert!(
            headers
                .iter()
                .all(|path| path.extension().unwrap() == "hpp")
        );
    }

    #[test]
    fn names_the_missing_piece() {
        let stderr = "In file included from x.cpp:1:\n\
                      x.cpp:1:10: fatal error: oneapi/tbb.h: No such file or directory\n\
                      compilation terminated.\n";
        assert_eq!(
            first_error(stderr),
            "x.cpp:1:10: fatal error: oneapi/tbb.h: No such file or directory"
        );
        assert_eq!(
            first_error("/usr/bin/ld: cannot find -ltbb: No such file or directory\n"),
            "/usr/bin/ld: cannot find -ltbb: No such file or directory"
        );
    }
}
