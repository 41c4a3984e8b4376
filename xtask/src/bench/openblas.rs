//! The kernels of the `OpenBLAS` peers: which ones `OpenBLAS` picks on this CPU, and the best the CPU
//! allows when it picks worse.
//!
//! Debian's `OpenBLAS` is built with `DYNAMIC_ARCH`: at load it picks its kernels (a "core") from
//! the CPU's identity. A virtual machine that hides its CPU model ("Intel(R) Xeon(R) Processor")
//! can lead it to an older core than the instruction set allows, and the LAPACK peers then run
//! with slower kernels than the CPU has. The bench runs a probe (`crates/bench/cpp/
//! openblas_core.cpp`) first: when the core it reports uses a smaller instruction set than
//! `/proc/cpuinfo`'s flags offer (AVX-512, AVX2 with FMA, AVX), the `OpenBLAS` peers run with
//! `OPENBLAS_CORETYPE` set to the core for those flags. A core set in the environment is kept.
//! The report's machine block names the core the peers ran with and how it was chosen.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use super::cpp::{CppHarness, Library};
use crate::cmd::Cmd;

/// The variable `OpenBLAS` reads its core from.
pub(crate) const CORETYPE: &str = "OPENBLAS_CORETYPE";

/// The probe: prints the core name, then the build configuration.
const PROBE: CppHarness = CppHarness {
    binary: "openblas_core",
    source: "openblas_core.cpp",
    compiler: "g++",
    flags: &["-O2", "-std=c++17"],
    libs: &["-lopenblas"],
    library: Library::System,
};

/// How long one probe run may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// What the `OpenBLAS` peers run with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenBlas {
    /// The core name `OpenBLAS` reports with the peers' environment.
    pub(crate) core: String,
    /// `openblas_get_config()`: version and build options.
    pub(crate) config: String,
    pub(crate) choice: Choice,
}

/// How the peers' core was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    /// `OpenBLAS`'s own pick: as good as the CPU's flags allow.
    Detected,
    /// `OPENBLAS_CORETYPE` from the environment.
    Environment,
    /// Set by the bench from the CPU's flags, over `OpenBLAS`'s pick of `detected`.
    Flags { detected: String },
}

impl OpenBlas {
    /// The value the `OpenBLAS` peers get as `OPENBLAS_CORETYPE`, when the bench sets one.
    pub(crate) fn coretype(&self) -> Option<&str> {
        match self.choice {
            Choice::Flags { .. } => Some(&self.core),
            Choice::Detected | Choice::Environment => None,
        }
    }

    /// The machine block's line.
    pub(crate) fn describe(&self) -> String {
        let how = match &self.choice {
            Choice::Detected => "OpenBLAS's own pick".to_owned(),
            Choice::Environment => format!("{CORETYPE} from the environment"),
            Choice::Flags { detected } => format!(
                "{CORETYPE} set by the bench from the CPU's flags; OpenBLAS picked {detected}"
            ),
        };
        format!("{} kernels ({how}); {}", self.core, self.config)
    }
}

/// The `OpenBLAS` settings of this run, found once: `None` where the probe cannot be built or
/// run (no `OpenBLAS`: its peers are skipped when they fail to build).
pub(crate) fn settled(bin_dir: &Path) -> Option<&'static OpenBlas> {
    static SETTLED: OnceLock<Option<OpenBlas>> = OnceLock::new();
    SETTLED.get_or_init(|| settle(bin_dir)).as_ref()
}

fn settle(bin_dir: &Path) -> Option<OpenBlas> {
    let probe = PROBE.build(bin_dir).ok()?;
    let (detected, config) = run_probe(&probe, None)?;
    if std::env::var_os(CORETYPE).is_some() {
        return Some(OpenBlas {
            core: detected,
            config,
            choice: Choice::Environment,
        });
    }
    let flags = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| cpu_flags(&text));
    match flags.and_then(|flags| better_core(&detected, &flags)) {
        Some(core) => {
            let (used, config) = run_probe(&probe, Some(core))?;
            Some(OpenBlas {
                core: used,
                config,
                choice: Choice::Flags { detected },
            })
        }
        None => Some(OpenBlas {
            core: detected,
            config,
            choice: Choice::Detected,
        }),
    }
}

/// The probe's core name and configuration, run with `coretype` set if given.
fn run_probe(probe: &Path, coretype: Option<&str>) -> Option<(String, String)> {
    let mut command = Cmd::new(probe);
    if let Some(core) = coretype {
        command = command.env(CORETYPE, core);
    }
    let captured = command.capture_without_echo(PROBE_TIMEOUT).ok()?;
    if !captured.status?.success() {
        return None;
    }
    let mut lines = captured.stdout.lines().map(str::trim);
    let core = lines.next().filter(|line| !line.is_empty())?.to_owned();
    Some((core, lines.next().unwrap_or_default().to_owned()))
}

/// The `flags` line of the first processor in `/proc/cpuinfo`'s text.
fn cpu_flags(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "flags").then(|| value.trim().to_owned())
    })
}

/// The instruction sets `OpenBLAS`'s x86-64 kernels are written for, from the smallest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Isa {
    Older,
    Avx,
    Avx2,
    Avx512,
}

/// The instruction set of the `OpenBLAS` core `name` (`openblas_get_corename()`).
fn core_isa(name: &str) -> Isa {
    match name.to_ascii_lowercase().as_str() {
        "skylakex" | "cooperlake" | "sapphirerapids" => Isa::Avx512,
        "haswell" | "zen" | "excavator" => Isa::Avx2,
        "sandybridge" | "bulldozer" | "piledriver" | "steamroller" => Isa::Avx,
        _ => Isa::Older,
    }
}

/// The largest instruction set in a `/proc/cpuinfo` flags line, with `OpenBLAS`'s core for it.
fn flags_isa(flags: &str) -> (Isa, Option<&'static str>) {
    let has = |wanted: &[&str]| {
        wanted
            .iter()
            .all(|w| flags.split_whitespace().any(|f| f == *w))
    };
    if has(&["avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"]) {
        (Isa::Avx512, Some("SkylakeX"))
    } else if has(&["avx2", "fma"]) {
        (Isa::Avx2, Some("Haswell"))
    } else if has(&["avx"]) {
        (Isa::Avx, Some("Sandybridge"))
    } else {
        (Isa::Older, None)
    }
}

/// The core to set when `OpenBLAS`'s pick `detected` uses a smaller instruction set than `flags`
/// offer.
fn better_core(detected: &str, flags: &str) -> Option<&'static str> {
    let (isa, core) = flags_isa(flags);
    if core_isa(detected) < isa { core } else { None }
}

#[cfg(test)]
mod tests {
    use super::{Choice, OpenBlas, better_core, cpu_flags};

    const AVX512: &str = "fpu sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl";

    #[test]
    fn a_pick_below_the_flags_is_raised_to_their_core() {
        assert_eq!(better_core("Prescott", AVX512), Some("SkylakeX"));
        assert_eq!(better_core("Haswell", AVX512), Some("SkylakeX"));
        assert_eq!(
            better_core("Nehalem", "sse4_2 avx avx2 fma"),
            Some("Haswell")
        );
        assert_eq!(better_core("Core2", "sse4_2 avx"), Some("Sandybridge"));
    }

    #[test]
    fn a_pick_as_good_as_the_flags_is_kept() {
        assert_eq!(better_core("Cooperlake", AVX512), None);
        assert_eq!(better_core("Zen", "avx avx2 fma"), None);
        // A flag alone is not the set: AVX-512 without its BW and VL parts is no SkylakeX.
        assert_eq!(better_core("Haswell", "avx avx2 fma avx512f"), None);
        assert_eq!(better_core("Prescott", "sse2 sse3"), None);
    }

    #[test]
    fn the_flags_are_the_first_processors() {
        let cpuinfo = "processor\t: 0\nflags\t\t: fpu avx2\nprocessor\t: 1\nflags\t\t: fpu\n";
        assert_eq!(cpu_flags(cpuinfo).as_deref(), Some("fpu avx2"));
        assert_eq!(cpu_flags("processor : 0\n"), None);
    }

    #[test]
    fn the_line_says_how_the_core_was_chosen() {
        let raised = OpenBlas {
            core: "SkylakeX".to_owned(),
            config: "OpenBLAS 0.3.21 DYNAMIC_ARCH".to_owned(),
            choice: Choice::Flags {
                detected: "Prescott".to_owned(),
            },
        };
        assert_eq!(raised.coretype(), Some("SkylakeX"));
        assert_eq!(
            raised.describe(),
            "SkylakeX kernels (OPENBLAS_CORETYPE set by the bench from the CPU's flags; \
             OpenBLAS picked Prescott); OpenBLAS 0.3.21 DYNAMIC_ARCH"
        );
        let detected = OpenBlas {
            choice: Choice::Detected,
            ..raised
        };
        assert_eq!(detected.coretype(), None);
    }
}
