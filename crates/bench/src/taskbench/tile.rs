//! A point's tile: the 16-byte header that names the task that wrote it, and the check every
//! task makes of its inputs (`README.md`, "Data and the check").

/// The header's step before any task wrote the tile.
const UNWRITTEN: u64 = u64::MAX;

/// The bytes of one point in one field.
pub(crate) struct Tile(Vec<u8>);

impl Tile {
    /// A tile of `bytes` bytes (at least 16), not written yet.
    pub(crate) fn new(bytes: usize) -> Self {
        let mut tile = Tile(vec![0; bytes.max(16)]);
        tile.set_header(UNWRITTEN, 0);
        tile
    }

    /// The step and the point of the task that wrote it last.
    fn header(&self) -> (u64, u64) {
        let word = |at: usize| {
            let mut bytes = [0; 8];
            bytes.copy_from_slice(&self.0[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        (word(0), word(8))
    }

    fn set_header(&mut self, step: u64, point: u64) {
        self.0[..8].copy_from_slice(&step.to_le_bytes());
        self.0[8..16].copy_from_slice(&point.to_le_bytes());
    }

    /// Fails unless task `(step, point)` wrote it last.
    pub(crate) fn check(
        &self,
        step: u64,
        point: usize,
        reader: (u64, usize),
    ) -> Result<(), String> {
        let found = self.header();
        if found == (step, point as u64) {
            Ok(())
        } else {
            let writer = if found.0 == UNWRITTEN {
                "no task".to_owned()
            } else {
                format!("task ({}, {})", found.0, found.1)
            };
            Err(format!(
                "task ({}, {}) read the tile of point {point} written by {writer}, expected \
                 task ({step}, {point}): a dependency was not respected",
                reader.0, reader.1,
            ))
        }
    }

    /// Records that task `(step, point)` wrote it, with `result`'s low byte in its payload.
    #[expect(
        clippy::cast_sign_loss,
        clippy::cast_possible_truncation,
        reason = "the payload is the low byte of the result's integer part, as the README says"
    )]
    pub(crate) fn write(&mut self, step: u64, point: usize, result: f64) {
        self.set_header(step, point as u64);
        self.0[16..].fill(result as u64 as u8);
    }
}

/// One task's body on tiles: checks `inputs` (the tiles of `deps`, from step `t - 1`), runs
/// the kernel and writes `output`.
pub(crate) fn run_task(
    task: &super::Task,
    inputs: &[&Tile],
    output: &mut Tile,
) -> Result<(), String> {
    for (tile, &point) in inputs.iter().zip(&task.deps) {
        tile.check(task.step - 1, point, (task.step, task.point))?;
    }
    let result = task.run_kernel();
    output.write(task.step, task.point, result);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Tile;

    #[test]
    fn a_tile_names_its_writer() {
        let mut tile = Tile::new(32);
        assert!(tile.check(0, 1, (1, 1)).is_err());
        tile.write(0, 1, 7.0);
        assert!(tile.check(0, 1, (1, 1)).is_ok());
        assert!(tile.check(1, 1, (2, 1)).is_err());
        assert!(tile.check(0, 2, (1, 2)).is_err());
    }
}
