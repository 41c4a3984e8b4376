//! Which way each unit improves, and the ratio that says how far ahead our system is.
//!
//! The harnesses print times (`ns/op`, `us/round`, `ms_cpu_per_s`, ...) and memory (`MB`,
//! `%` retained), where lower is better, and rates (`GFLOP/s`, `Gunit/s`) and efficiencies (`ratio`), where higher is better.
//! A comparison has to know which, or a peer with twice our GFLOP/s reads as twice as slow.
//! The ratio reported is always "how many times better ours does", so that above 1 means ours
//! is ahead whatever the unit: the peer's time over ours, or our rate over the peer's.

/// Which way a unit improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Better {
    /// Times and costs: `ns/op`, `us`, `ms_cpu_per_s`.
    Lower,
    /// Rates and efficiencies: `GFLOP/s`, `Gunit/s`, `ratio`.
    Higher,
}

/// Units that count time: a unit is a time when its first word (before a `/` or `_`) is one.
const TIMES: &[&str] = &["ns", "us", "µs", "ms", "s"];

/// Units of memory, and `%`: the engine group's `burst_retained`, the share of a burst's peak
/// memory still resident after it (the harnesses print no other percentage).
const COSTS: &[&str] = &["B", "KB", "MB", "GB", "KiB", "MiB", "GiB", "%"];

impl Better {
    /// The direction of `unit`, or `None` for a unit this table does not know (its rows get
    /// no ratio rather than a wrong one).
    ///
    /// - `ratio` (an efficiency, `rate / peak`): higher.
    /// - `<amount>/s` (a rate: `GFLOP/s`, `Gunit/s`, `ops/s`): higher.
    /// - a time, alone or per something (`us`, `ns/op`, `us/round`, `ms_cpu_per_s`): lower.
    /// - memory, alone or per something (`MB`, `B/op`), and `%` (see `COSTS`): lower.
    pub(crate) fn of(unit: &str) -> Option<Better> {
        if unit == "ratio" {
            return Some(Better::Higher);
        }
        if unit.ends_with("/s") && !TIMES.contains(&unit.trim_end_matches("/s")) {
            return Some(Better::Higher);
        }
        let first_word = unit.split(['/', '_']).next().unwrap_or(unit);
        (TIMES.contains(&first_word) || COSTS.contains(&first_word)).then_some(Better::Lower)
    }

    /// `lower` or `higher`, as the JSON report writes it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Better::Lower => "lower",
            Better::Higher => "higher",
        }
    }
}

/// How many times better `ours` does than `other` on a unit that improves as `better` says:
/// `other / ours` for a time, `ours / other` for a rate. Above 1, ours is ahead. `None` when
/// either value is not positive (a difference such as `random_1us_overhead` can be zero or
/// negative, and then no ratio means anything).
pub(crate) fn advantage(better: Better, ours: f64, other: f64) -> Option<f64> {
    if ours <= 0.0 || other <= 0.0 {
        return None;
    }
    Some(match better {
        Better::Lower => other / ours,
        Better::Higher => ours / other,
    })
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // ratios of small integers are exact
mod tests {
    use super::{Better, advantage};

    #[test]
    fn every_unit_the_harnesses_print_has_a_direction() {
        for unit in [
            "ns/task",
            "ns/op",
            "us/round",
            "us",
            "ms_cpu_per_s",
            "us/s",
            "MB",
            "%",
            "B/op",
        ] {
            assert_eq!(Better::of(unit), Some(Better::Lower), "{unit}");
        }
        for unit in ["GFLOP/s", "Gunit/s", "ratio"] {
            assert_eq!(Better::of(unit), Some(Better::Higher), "{unit}");
        }
    }

    #[test]
    fn unknown_units_have_no_direction() {
        for unit in ["", "widgets", "GFLOP", "items/op"] {
            assert_eq!(Better::of(unit), None, "{unit}");
        }
    }

    #[test]
    fn a_peer_taking_twice_our_time_gives_two() {
        assert_eq!(advantage(Better::Lower, 50.0, 100.0), Some(2.0));
        assert_eq!(advantage(Better::Lower, 100.0, 50.0), Some(0.5));
    }

    #[test]
    fn a_peer_with_twice_our_rate_gives_one_half() {
        assert_eq!(advantage(Better::Higher, 10.0, 20.0), Some(0.5));
        assert_eq!(advantage(Better::Higher, 0.9, 0.45), Some(2.0));
    }

    #[test]
    fn no_ratio_of_values_that_are_not_positive() {
        assert_eq!(advantage(Better::Lower, 0.0, 5.0), None);
        assert_eq!(advantage(Better::Lower, 5.0, -1.0), None);
        assert_eq!(advantage(Better::Higher, -2.0, 5.0), None);
    }
}
