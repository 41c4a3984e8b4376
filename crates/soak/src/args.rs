//! The command line.

use std::time::Duration;

use depengine::EngineKind;

pub(crate) const USAGE: &str = "\
usage: depengine-soak [--ops N] [--seconds S] [--seed N] [--watchdog S] [--pushers N]
                      [--kinds K,K] [--engine-in-values on|off]
  --ops N        ops in all, split evenly between the engine kinds (default 10000000)
  --seconds S    a time budget for the whole run, split likewise (default: none)
  --seed N       the seed of every random choice (default: from the clock; printed)
  --watchdog S   a run without progress for S seconds is a hang (default 60)
  --pushers N    pusher threads per engine (default 3)
  --kinds K,K    engine kinds (default Naive,ThreadedPooled,ThreadedPerDevice)
  --engine-in-values on|off
                 values that own a clone of their engine (default on)";

/// What to run.
pub(crate) struct Options {
    pub(crate) ops: u64,
    pub(crate) time: Option<Duration>,
    pub(crate) seed: u64,
    pub(crate) watchdog: Duration,
    pub(crate) pushers: usize,
    pub(crate) kinds: Vec<EngineKind>,
    pub(crate) engine_in_values: bool,
}

/// Parses the arguments (after the program's name).
pub(crate) fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        ops: 10_000_000,
        time: None,
        seed: clock_seed(),
        watchdog: Duration::from_mins(1),
        pushers: 3,
        kinds: vec![
            EngineKind::Naive,
            EngineKind::ThreadedPooled,
            EngineKind::ThreadedPerDevice,
        ],
        engine_in_values: true,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--ops" => options.ops = number(&flag, &value()?)?,
            "--seconds" => options.time = Some(Duration::from_secs(number(&flag, &value()?)?)),
            "--seed" => options.seed = number(&flag, &value()?)?,
            "--watchdog" => options.watchdog = Duration::from_secs(number(&flag, &value()?)?),
            "--pushers" => options.pushers = number(&flag, &value()?)?.max(1) as usize,
            "--kinds" => {
                options.kinds = value()?
                    .split(',')
                    .map(|kind| kind.parse().map_err(|error| format!("--kinds: {error}")))
                    .collect::<Result<_, _>>()?;
            }
            "--engine-in-values" => {
                options.engine_in_values = match value()?.as_str() {
                    "on" => true,
                    "off" => false,
                    other => return Err(format!("--engine-in-values: `{other}` is not on or off")),
                };
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if options.kinds.is_empty() {
        return Err("--kinds: no engine kind".to_owned());
    }
    Ok(options)
}

fn number(flag: &str, text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("{flag}: `{text}` is not a number"))
}

/// A seed for a run that names none: the clock's nanoseconds.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}
