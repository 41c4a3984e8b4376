//! Summary statistics of one (workload, system) pair over the runs.

/// Median, min and max of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Summary {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    /// How many samples there were.
    pub(crate) runs: usize,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none. The median of an even count is the
    /// mean of the two middle samples.
    pub(crate) fn of(samples: &[f64]) -> Option<Self> {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let (&min, &max) = (sorted.first()?, sorted.last()?);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            f64::midpoint(sorted[mid - 1], sorted[mid])
        };
        Some(Summary {
            median,
            min,
            max,
            runs: sorted.len(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // the samples come back unchanged: exact comparison is right
mod tests {
    use super::Summary;

    #[test]
    fn no_samples_no_summary() {
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn odd_count_takes_the_middle_sample() {
        let summary = Summary::of(&[5.0, 1.0, 3.0, 9.0, 2.0]).unwrap();
        assert_eq!(summary.median, 3.0);
        assert_eq!((summary.min, summary.max, summary.runs), (1.0, 9.0, 5));
    }

    #[test]
    fn even_count_averages_the_two_middle_samples() {
        let summary = Summary::of(&[4.0, 1.0, 10.0, 2.0]).unwrap();
        assert_eq!(summary.median, 3.0);
        assert_eq!((summary.min, summary.max, summary.runs), (1.0, 10.0, 4));
    }

    #[test]
    fn single_sample_is_its_own_summary() {
        let summary = Summary::of(&[7.5]).unwrap();
        assert_eq!((summary.median, summary.min, summary.max), (7.5, 7.5, 7.5));
    }
}
