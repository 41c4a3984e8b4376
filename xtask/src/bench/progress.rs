//! The progress of a run: a bar per group on stderr, all drawn from the start (the groups still
//! to come wait at zero), the command lines and notes scrolling above them.
//!
//! Everything the run prints goes through `println` or `suspend`, which take the bars off the
//! terminal while it prints: a plain `println!` would write over them. When stderr is not a
//! terminal (CI, a pipe) indicatif draws nothing and the run says where it is with a line per
//! round instead.

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// How often a running bar redraws, so that its clock moves during a long invocation.
const TICK: Duration = Duration::from_millis(250);

const WAITING: &str = "{prefix:>10.bold}  waiting";
const RUNNING: &str =
    "{prefix:>10.bold} [{bar:30.cyan/blue}] {pos:>3}/{len:<3} {elapsed:>4}  {wide_msg}";
const DONE: &str = "{prefix:>10.bold} [{bar:30.green}] {pos:>3}/{len:<3} {elapsed:>4}  {wide_msg}";

/// The bars of one run, one per group in run order.
pub(crate) struct RunProgress {
    bars: MultiProgress,
    groups: Vec<ProgressBar>,
}

impl RunProgress {
    /// A waiting bar per group.
    pub(crate) fn new(groups: &[&str]) -> Self {
        let bars = MultiProgress::new();
        let groups = groups
            .iter()
            .map(|&name| {
                let bar = ProgressBar::new(0)
                    .with_style(style(WAITING))
                    .with_prefix(name.to_owned());
                let bar = bars.add(bar);
                bar.tick();
                bar
            })
            .collect();
        RunProgress { bars, groups }
    }

    /// Whether the bars are drawn at all (stderr is a terminal).
    pub(crate) fn is_drawn(&self) -> bool {
        !self.bars.is_hidden()
    }

    /// Prints a line on stdout, above the bars.
    pub(crate) fn println(&self, line: impl AsRef<str>) {
        self.bars.suspend(|| println!("{}", line.as_ref()));
    }

    /// Runs `work` (which prints freely) with the bars off the terminal.
    pub(crate) fn suspend<R>(&self, work: impl FnOnce() -> R) -> R {
        self.bars.suspend(work)
    }

    /// Starts group `index`'s bar, `invocations` long.
    pub(crate) fn start(&self, index: usize, invocations: usize) -> &ProgressBar {
        let bar = &self.groups[index];
        bar.set_length(invocations as u64);
        bar.set_style(style(RUNNING));
        bar.reset_elapsed();
        bar.enable_steady_tick(TICK);
        bar
    }

    /// Ends group `index`'s bar with `message`, left on the terminal.
    pub(crate) fn finish(&self, index: usize, message: String) {
        let bar = &self.groups[index];
        bar.set_style(style(DONE));
        bar.finish_with_message(message);
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("the bar templates are valid (tested)")
        .progress_chars("=> ")
}

#[cfg(test)]
mod tests {
    use indicatif::ProgressStyle;

    use super::{DONE, RUNNING, WAITING};

    #[test]
    fn bar_templates_parse() {
        for template in [WAITING, RUNNING, DONE] {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }
}
