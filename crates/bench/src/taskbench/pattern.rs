//! The dependence patterns: which points of the step before a task reads (`README.md`, "The
//! task graph").

/// How the tasks of a step depend on those of the step before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pattern {
    Trivial,
    NoComm,
    Stencil1d,
    Stencil1dPeriodic,
    Dom,
    Tree,
    Fft,
    AllToAll,
    Nearest,
    Spread,
    RandomNearest,
}

impl Pattern {
    /// Every pattern, in the order of the README's table (and of the report).
    pub(crate) const ALL: [Pattern; 11] = [
        Pattern::Trivial,
        Pattern::NoComm,
        Pattern::Stencil1d,
        Pattern::Stencil1dPeriodic,
        Pattern::Dom,
        Pattern::Tree,
        Pattern::Fft,
        Pattern::AllToAll,
        Pattern::Nearest,
        Pattern::Spread,
        Pattern::RandomNearest,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Pattern::Trivial => "trivial",
            Pattern::NoComm => "no_comm",
            Pattern::Stencil1d => "stencil_1d",
            Pattern::Stencil1dPeriodic => "stencil_1d_periodic",
            Pattern::Dom => "dom",
            Pattern::Tree => "tree",
            Pattern::Fft => "fft",
            Pattern::AllToAll => "all_to_all",
            Pattern::Nearest => "nearest",
            Pattern::Spread => "spread",
            Pattern::RandomNearest => "random_nearest",
        }
    }

    /// Whether its tasks read and write tiles (all but `trivial`).
    pub(crate) fn has_data(self) -> bool {
        self != Pattern::Trivial
    }

    /// `deps(t, i)` for `t >= 1`, in increasing order, into `out` (cleared first).
    pub(crate) fn deps(self, t: u64, i: usize, width: usize, radix: usize, out: &mut Vec<usize>) {
        out.clear();
        let last = width - 1;
        match self {
            Pattern::Trivial => {}
            Pattern::NoComm => out.push(i),
            Pattern::Stencil1d => out.extend(i.saturating_sub(1)..=(i + 1).min(last)),
            Pattern::Stencil1dPeriodic => {
                out.extend([(i + last) % width, i, (i + 1) % width]);
            }
            Pattern::Dom => out.extend(i.saturating_sub(1)..=i),
            Pattern::Tree => out.push(i / 2),
            Pattern::Fft => {
                let bits = (usize::BITS - last.leading_zeros()).max(1);
                let shift = (t - 1) % u64::from(bits);
                out.push(i);
                let partner = i ^ (1 << shift);
                if partner < width {
                    out.push(partner);
                }
            }
            Pattern::AllToAll => out.extend(0..width),
            Pattern::Nearest => nearest(i, width, radix, out),
            Pattern::Spread => {
                let stride = width.div_ceil(radix);
                out.extend((0..radix).map(|k| (i + k * stride) % width));
            }
            Pattern::RandomNearest => {
                nearest(i, width, radix, out);
                out.retain(|&j| {
                    j == i || splitmix64((t << 32) ^ ((i as u64) << 16) ^ j as u64) & 1 == 1
                });
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}

/// The `radix` points centred on `i`, within `[0, width)`.
fn nearest(i: usize, width: usize, radix: usize, out: &mut Vec<usize>) {
    let low = i.saturating_sub((radix.max(1) - 1) / 2);
    let high = (i + radix / 2).min(width - 1);
    out.extend(low..=high);
}

/// Sebastiano Vigna's `splitmix64` finalizer (public domain), as the README gives it.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    fn deps(pattern: Pattern, t: u64, i: usize, width: usize) -> Vec<usize> {
        let mut out = Vec::new();
        pattern.deps(t, i, width, 3, &mut out);
        out
    }

    #[test]
    fn patterns_on_a_width_of_eight() {
        assert_eq!(deps(Pattern::Trivial, 1, 3, 8), [] as [usize; 0]);
        assert_eq!(deps(Pattern::NoComm, 1, 3, 8), [3]);
        assert_eq!(deps(Pattern::Stencil1d, 1, 0, 8), [0, 1]);
        assert_eq!(deps(Pattern::Stencil1d, 1, 7, 8), [6, 7]);
        assert_eq!(deps(Pattern::Stencil1dPeriodic, 1, 0, 8), [0, 1, 7]);
        assert_eq!(deps(Pattern::Dom, 1, 0, 8), [0]);
        assert_eq!(deps(Pattern::Dom, 1, 5, 8), [4, 5]);
        assert_eq!(deps(Pattern::Tree, 1, 5, 8), [2]);
        // Three bits: the partner cycles through 1, 2, 4 apart.
        assert_eq!(deps(Pattern::Fft, 1, 5, 8), [4, 5]);
        assert_eq!(deps(Pattern::Fft, 2, 5, 8), [5, 7]);
        assert_eq!(deps(Pattern::Fft, 3, 5, 8), [1, 5]);
        assert_eq!(deps(Pattern::Fft, 4, 5, 8), [4, 5]);
        assert_eq!(deps(Pattern::AllToAll, 1, 5, 3), [0, 1, 2]);
        assert_eq!(deps(Pattern::Nearest, 1, 0, 8), [0, 1]);
        assert_eq!(deps(Pattern::Nearest, 1, 4, 8), [3, 4, 5]);
        assert_eq!(deps(Pattern::Spread, 1, 1, 8), [1, 4, 7]);
    }

    #[test]
    fn fft_on_a_width_that_is_no_power_of_two_skips_missing_partners() {
        assert_eq!(deps(Pattern::Fft, 3, 1, 6), [1, 5]);
        assert_eq!(deps(Pattern::Fft, 3, 3, 6), [3]);
    }

    #[test]
    fn random_nearest_keeps_its_own_point_and_draws_the_others() {
        let mut kept = 0;
        for t in 1..200 {
            let list = deps(Pattern::RandomNearest, t, 4, 8);
            assert!(list.contains(&4), "{list:?}");
            assert!(list.iter().all(|j| (3..=5).contains(j)), "{list:?}");
            kept += list.len() - 1;
        }
        // About half of the 2 * 199 neighbours.
        assert!((100..300).contains(&kept), "{kept}");
    }

    #[test]
    fn width_two_as_measured() {
        for pattern in [
            Pattern::Stencil1d,
            Pattern::Nearest,
            Pattern::Spread,
            Pattern::Fft,
        ] {
            for t in 1..4 {
                assert_eq!(deps(pattern, t, 0, 2), [0, 1], "{pattern:?}");
                assert_eq!(deps(pattern, t, 1, 2), [0, 1], "{pattern:?}");
            }
        }
    }
}
