//! Dirac gradient canaries: where each canary lives, and a batch's per-sample gradients with the
//! sampled canaries appended.
//!
//! Part of the audit room. A canary is an example whose per-sample gradient is, at the steps it
//! is active, `magnitude · e_j` for its own coordinate j (a "Dirac canary", Steinke, Nasr &
//! Jagielski 2023, §7, white-box setting), and zero at the other steps. With m canaries and P
//! parameters, canary i takes coordinate `i mod P` and is active at the steps t with
//! `t mod K = ⌊i / P⌋`, K = ⌈m / P⌉: at any step, no two canaries share a coordinate, so a
//! canary's signal never mixes with another canary's. (With m ≤ P, K = 1 and every canary is
//! active at every step.)
//!
//! [`WithCanaries`] answers the three questions of [`PerSampleGradients`] for the data batch
//! followed by the sampled, active canaries, so the release goes through the real clipping and
//! noise code (`privacy::clip::flat`) unchanged.

use std::ops::Range;

use ndarray::{Array1, Array2, s};

use crate::grad::{GradError, PerSampleGradients};

/// The placement of m Dirac canaries over P coordinates and K step slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanaryLayout {
    /// Number of canaries m.
    pub canaries: usize,
    /// Number of model parameters P.
    pub num_params: usize,
    /// Number of step slots K = ⌈m / P⌉ (at least 1).
    pub slots: u64,
}

impl CanaryLayout {
    /// The layout of `canaries` canaries over `num_params` coordinates (`num_params` ≥ 1).
    pub fn new(canaries: usize, num_params: usize) -> Self {
        let p = num_params.max(1);
        CanaryLayout {
            canaries,
            num_params: p,
            slots: canaries.div_ceil(p).max(1) as u64,
        }
    }

    /// The coordinate of canary `i`.
    pub fn coordinate(&self, i: usize) -> usize {
        i % self.num_params
    }

    /// The slot of canary `i`: it is active at the steps t with `t mod K` equal to it.
    pub fn slot(&self, i: usize) -> u64 {
        (i / self.num_params) as u64
    }

    /// Whether canary `i` is active at step `t`.
    pub fn active(&self, i: usize, t: u64) -> bool {
        t % self.slots == self.slot(i)
    }

    /// The canaries active at step `t`, in order: `slot·P .. min((slot+1)·P, m)`.
    pub fn active_at(&self, t: u64) -> Range<usize> {
        let slot = (t % self.slots) as usize;
        let start = (slot * self.num_params).min(self.canaries);
        let end = ((slot + 1) * self.num_params).min(self.canaries);
        start..end
    }

    /// Number of steps among `0..steps` at which canary `i` is active.
    pub fn active_steps(&self, i: usize, steps: u64) -> u64 {
        let slot = self.slot(i);
        if slot >= steps {
            0
        } else {
            (steps - 1 - slot) / self.slots + 1
        }
    }
}

/// A batch's per-sample gradients (`data`, or none for an empty batch) followed by one row per
/// sampled, active canary: `magnitude · e_j` for each coordinate j in `coordinates`.
pub struct WithCanaries<'a> {
    pub data: Option<&'a dyn PerSampleGradients>,
    pub coordinates: &'a [usize],
    pub magnitude: f64,
    pub num_params: usize,
    pub groups: &'a [(String, Range<usize>)],
}

impl WithCanaries<'_> {
    fn data_rows(&self) -> usize {
        self.data.map_or(0, |d| d.batch_size())
    }

    /// The index of the group holding coordinate `j`.
    fn group_of(&self, j: usize) -> usize {
        self.groups
            .iter()
            .position(|(_, r)| r.contains(&j))
            .unwrap_or(0)
    }
}

impl PerSampleGradients for WithCanaries<'_> {
    fn batch_size(&self) -> usize {
        self.data_rows() + self.coordinates.len()
    }

    fn num_params(&self) -> usize {
        self.num_params
    }

    fn groups(&self) -> Vec<(String, Range<usize>)> {
        self.groups.to_vec()
    }

    fn norms(&self) -> Array1<f64> {
        let mut out = Vec::with_capacity(self.batch_size());
        if let Some(d) = self.data {
            out.extend(d.norms());
        }
        out.extend(std::iter::repeat_n(self.magnitude, self.coordinates.len()));
        Array1::from(out)
    }

    fn group_norms(&self) -> Array2<f64> {
        let b = self.data_rows();
        let mut out = Array2::zeros((self.batch_size(), self.groups.len().max(1)));
        if let Some(d) = self.data {
            out.slice_mut(s![..b, ..]).assign(&d.group_norms());
        }
        for (k, &j) in self.coordinates.iter().enumerate() {
            out[[b + k, self.group_of(j)]] = self.magnitude;
        }
        out
    }

    fn weighted_sum(&self, weights: &Array1<f64>) -> Array1<f64> {
        let b = self.data_rows();
        let mut sum = match self.data {
            Some(d) => d.weighted_sum(&weights.slice(s![..b]).to_owned()),
            None => Array1::zeros(self.num_params),
        };
        for (k, &j) in self.coordinates.iter().enumerate() {
            sum[j] += weights[b + k] * self.magnitude;
        }
        sum
    }

    fn group_weighted_sum(&self, weights: &Array2<f64>) -> Array1<f64> {
        let b = self.data_rows();
        let mut sum = match self.data {
            Some(d) => d.group_weighted_sum(&weights.slice(s![..b, ..]).to_owned()),
            None => Array1::zeros(self.num_params),
        };
        for (k, &j) in self.coordinates.iter().enumerate() {
            sum[j] += weights[[b + k, self.group_of(j)]] * self.magnitude;
        }
        sum
    }

    fn materialize(&self) -> Result<Array2<f32>, GradError> {
        let b = self.data_rows();
        let mut out = Array2::zeros((self.batch_size(), self.num_params));
        if let Some(d) = self.data {
            out.slice_mut(s![..b, ..]).assign(&d.materialize()?);
        }
        for (k, &j) in self.coordinates.iter().enumerate() {
            out[[b + k, j]] = self.magnitude as f32;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn layout_gives_each_active_canary_its_own_coordinate() {
        let layout = CanaryLayout::new(10, 4); // K = 3 slots: 4, 4, 2 canaries
        assert_eq!(layout.slots, 3);
        for t in 0..7u64 {
            let active: Vec<usize> = (0..10).filter(|&i| layout.active(i, t)).collect();
            assert_eq!(active, layout.active_at(t).collect::<Vec<_>>());
            let mut coords: Vec<usize> = active.iter().map(|&i| layout.coordinate(i)).collect();
            coords.dedup();
            assert_eq!(coords.len(), active.len(), "step {t}: shared coordinate");
        }
        // 7 steps, slots 0,1,2: slot 0 at t = 0,3,6; slot 1 at 1,4; slot 2 at 2,5.
        assert_eq!(layout.active_steps(0, 7), 3);
        assert_eq!(layout.active_steps(5, 7), 2);
        assert_eq!(layout.active_steps(9, 7), 2);
        assert_eq!(layout.active_steps(9, 2), 0);
        assert_eq!(CanaryLayout::new(3, 84).slots, 1);
        assert_eq!(CanaryLayout::new(0, 84).active_at(5), 0..0);
    }

    #[test]
    fn canary_rows_answer_like_an_explicit_matrix() {
        let groups = vec![("w".to_string(), 0..3), ("b".to_string(), 3..4)];
        let coords = [1usize, 3];
        let batch = WithCanaries {
            data: None,
            coordinates: &coords,
            magnitude: 2.0,
            num_params: 4,
            groups: &groups,
        };
        assert_eq!(batch.batch_size(), 2);
        assert_eq!(batch.norms(), array![2.0, 2.0]);
        assert_eq!(batch.group_norms(), array![[2.0, 0.0], [0.0, 2.0]]);
        assert_eq!(
            batch.weighted_sum(&array![0.5, 0.25]),
            array![0.0, 1.0, 0.0, 0.5]
        );
        assert_eq!(
            batch.group_weighted_sum(&array![[0.5, 9.0], [9.0, 0.25]]),
            array![0.0, 1.0, 0.0, 0.5]
        );
        assert_eq!(
            batch.materialize().unwrap(),
            array![[0.0f32, 2.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]]
        );
    }
}
